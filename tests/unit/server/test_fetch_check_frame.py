"""The Fetch handler's check before decoding: at most the cluster's partitions plus 10,000 entries."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from hostile.test_fetch_partition_flood import fetch_body

from odradek.server.handlers import fetch, registry


def _services(partitions: int) -> SimpleNamespace:
    return SimpleNamespace(topics=SimpleNamespace(partition_count=lambda: partitions))


def test_the_bound_is_the_clusters_partitions_plus_ten_thousand() -> None:
    assert fetch.PARTITIONS_OVER_CLUSTER == 10_000
    for version in (4, 7, 12, 13):
        topic: str | uuid.UUID = "t" if version < 13 else uuid.uuid4()
        for cluster in (0, 25_000):
            limit = cluster + 10_000
            ok = b"\0" * 9 + fetch_body(version, [(topic, range(limit))])
            assert fetch.check_frame(_services(cluster), version, ok, 9) is None
            over = b"\0" * 9 + fetch_body(version, [(topic, range(limit + 1))])
            why = fetch.check_frame(_services(cluster), version, over, 9)
            assert why is not None and f"more than {limit} partitions or topics" in why
            empty = fetch_body(version, [(topic, ()) for _ in range(limit + 1)])
            assert fetch.check_frame(_services(cluster), version, empty, 0) is not None


def test_forgotten_partitions_count() -> None:
    body = fetch_body(7, [("t", range(6000))], [("gone", range(4001))])
    assert fetch.check_frame(_services(0), 7, body, 0) is not None
    body = fetch_body(7, [("t", range(6000))], [("gone", range(4000))])
    assert fetch.check_frame(_services(0), 7, body, 0) is None


def test_the_cluster_is_asked_only_past_ten_thousand() -> None:
    """A Fetch of at most PARTITIONS_OVER_CLUSTER entries never sums the cluster's partitions (a follower
    of thousands of partitions sends one every round trip)."""
    def boom() -> int:
        raise AssertionError("summed the cluster's partitions")
    svc = SimpleNamespace(topics=SimpleNamespace(partition_count=boom))
    for version in (4, 12, 13):
        topic: str | uuid.UUID = "t" if version < 13 else uuid.uuid4()
        assert fetch.check_frame(svc, version, fetch_body(version, [(topic, range(900))]), 0) is None
        assert fetch.check_frame(svc, version, fetch_body(version, [(topic, range(10_000))]), 0) is None
        many_topics = [(f"t{i}" if version < 13 else uuid.uuid4(), range(10)) for i in range(1000)]
        assert fetch.check_frame(svc, version, fetch_body(version, many_topics), 0) is None


def test_registered_for_the_connection() -> None:
    assert registry[fetch.API_KEY].check_frame is fetch.check_frame
    assert all(h.check_frame is None for k, h in registry.items() if k != fetch.API_KEY)
