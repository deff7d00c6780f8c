"""controller_mutation_rate (KIP-599) against a real broker with real admin clients.

kafka-python's admin client speaks CreateTopics v7 / DeleteTopics v6 / CreatePartitions v3: the
strict quota, a topic met by an exhausted quota fails with THROTTLING_QUOTA_EXCEEDED (89). Pinned
to Kafka 2.6's versions (api_version=(2, 6): CreateTopics v5, before KIP-599) the same client gets
the permissive quota: everything is done, the response only carries a throttle time and the
connection is muted for it. A client id without a quota is not held."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .broker import Broker, BrokerFactory
from .clients import unique
from .test_client_quotas import alter

THROTTLING_QUOTA_EXCEEDED = 89


def _admin(b: Broker, client_id: str, **kw: Any) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=b.bootstrap, client_id=client_id, request_timeout_ms=30_000, **kw)


def _unpaused(call: Callable[[], Any]) -> Any:
    """kafka-python pauses a node for a response's throttle time (KIP-219) and fails requests to it
    meanwhile with NodeNotReadyError: retried until the pause is over."""
    from kafka.errors import NodeNotReadyError

    deadline = time.monotonic() + 15
    while True:
        try:
            return call()
        except NodeNotReadyError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def _codes(result: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in result["topics"]}


def test_strict_quota_refuses_topics_once_the_bucket_is_empty(make_broker: BrokerFactory) -> None:
    # 2 partition mutations/s, burst 2 * quota.window.num(2) * 1 s = 4
    b = make_broker(quota_window_num=2)
    assert alter(b, [([("client-id", "mutator")], [("controller_mutation_rate", 2.0, False)])]) == [(0, None)]
    admin, free = _admin(b, "mutator"), _admin(b, "free")
    try:
        big, small, other = unique("cmq-big"), unique("cmq-small"), unique("cmq-other")
        # 4 tokens: a 6-partition topic is taken whole (tokens -2)
        assert _codes(admin.create_topics({big: {"num_partitions": 6, "replication_factor": 1}},
                                          raise_errors=False)) == {big: 0}
        t0 = time.monotonic()
        r = admin.create_topics({small: {"num_partitions": 1, "replication_factor": 1},
                                 other: {"num_partitions": 1, "replication_factor": 1}}, raise_errors=False)
        assert _codes(r) == {small: THROTTLING_QUOTA_EXCEEDED, other: THROTTLING_QUOTA_EXCEEDED}
        assert all(t["error_message"] == "The throttling quota has been exceeded." for t in r["topics"])
        # a client id without a quota is not held
        assert _codes(free.create_topics({other: {"num_partitions": 3, "replication_factor": 1}},
                                         raise_errors=False)) == {other: 0}
        # validate-only takes nothing and is not refused (another connection: this one is muted)
        checker = _admin(b, "mutator")
        try:
            assert _codes(checker.create_topics({small: {"num_partitions": 1, "replication_factor": 1}},
                                                validate_only=True, raise_errors=False)) == {small: 0}
        finally:
            checker.close()
        # the deficit of 2 is earned back at 2/s: the client, paused for the throttle time the
        # refusal carried, gets its topic about one second after the violation
        codes = _codes(_unpaused(lambda: admin.create_topics({small: {"num_partitions": 1, "replication_factor": 1}},
                                                             raise_errors=False)))
        waited = time.monotonic() - t0
        assert codes == {small: 0}
        assert 0.7 <= waited <= 3.0, waited
        # CreatePartitions counts the partitions added, DeleteTopics the topic's partitions
        time.sleep(2.5)  # back to a full bucket (4)
        added = _unpaused(lambda: admin.create_partitions({big: 12}, raise_errors=False))  # tokens -2
        assert [t.error_code for t in added.results] == [0]
        refused = _unpaused(lambda: admin.create_partitions({small: 2}, raise_errors=False))
        assert [t.error_code for t in refused.results] == [THROTTLING_QUOTA_EXCEEDED]
        time.sleep(2.5)  # full again: deleting big (12 partitions) is taken whole, the next refused
        assert _codes(_unpaused(lambda: admin.delete_topics([big], raise_errors=False))) == {big: 0}
        deleted = _unpaused(lambda: admin.delete_topics([small], raise_errors=False))
        assert [t["error_code"] for t in deleted["topics"]] == [THROTTLING_QUOTA_EXCEEDED]
        assert _codes(free.delete_topics([small], raise_errors=False)) == {small: 0}
    finally:
        admin.close()
        free.close()


def test_permissive_quota_for_versions_before_kip_599(make_broker: BrokerFactory) -> None:
    import datetime

    from kio.schema.create_topics.v5 import request as ct

    from odradek.client.wire import WireClient

    b = make_broker(quota_window_num=2)
    assert alter(b, [([("client-id", "old-admin")], [("controller_mutation_rate", 2.0, False)])]) == [(0, None)]
    admin = _admin(b, "old-admin", api_version=(2, 6))  # CreateTopics v5: no THROTTLING_QUOTA_EXCEEDED
    try:
        names = [unique("cmq-old") for _ in range(3)]
        for name in names:  # 12 partitions against a burst of 4: all created, none refused
            assert _codes(_unpaused(lambda name=name: admin.create_topics(
                {name: {"num_partitions": 4, "replication_factor": 1}}, raise_errors=False))) == {name: 0}
    finally:
        admin.close()
    # the throttle time the v5 response carries: the deficit over the rate
    topic = ct.CreatableTopic(name=unique("cmq-wire"), num_partitions=2, replication_factor=1,
                              assignments=(), configs=())
    with WireClient(b.bootstrap, timeout=15, client_id="old-admin") as w:
        r = w.request(19, 5, topics=(topic,), timeout=datetime.timedelta(seconds=10), validate_only=False)
    assert [int(t.error_code) for t in r.topics] == [0]
    assert r.throttle_time.total_seconds() * 1000 >= 1000  # at least the 2-token deficit at 2/s
