"""Client quotas' admin APIs against a real broker (KIP-546 over the wire, kio-encoded requests:
neither confluent-kafka's nor kafka-python's admin client has them): AlterClientQuotas with
per-entry errors, DescribeClientQuotas filters, and the configs surviving a restart."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

from odradek.client.wire import WireClient

from .broker import Broker, BrokerFactory
from .clients import create_topic, unique


def alter(b: Broker, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
          validate_only: bool = False) -> list[tuple[int, str | None]]:
    from kio.schema.alter_client_quotas.v1 import request as a
    from kio.static.primitive import f64

    req = tuple(
        a.EntryData(entity=tuple(a.EntityData(entity_type=t, entity_name=n) for t, n in ent),
                    ops=tuple(a.OpData(key=k, value=f64(v), remove=r) for k, v, r in ops))
        for ent, ops in entries
    )
    with WireClient(b.bootstrap, timeout=15) as w:
        r = w.request(49, 1, entries=req, validate_only=validate_only)
    return [(int(e.error_code), e.error_message) for e in r.entries]


def describe(b: Broker, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    from kio.schema.describe_client_quotas.v1 import request as d
    from kio.static.primitive import i8

    with WireClient(b.bootstrap, timeout=15) as w:
        r = w.request(48, 1, components=tuple(d.ComponentData(entity_type=t, match_type=i8(m), match=x)
                                               for t, m, x in components), strict=strict)
    if int(r.error_code):
        return int(r.error_code), r.error_message
    return sorted(
        ((tuple((e.entity_type, e.entity_name) for e in entry.entity), {v.key: float(v.value) for v in entry.values})
         for entry in r.entries), key=repr,
    )


def test_alter_and_describe_client_quotas(broker: Broker) -> None:
    b = broker
    assert describe(b, []) == []
    assert alter(b, [([("client-id", "app 1")], [("producer_byte_rate", 1048576.0, False)])], validate_only=True) == [
        (0, None)]
    assert describe(b, []) == []
    assert alter(b, [
        ([("client-id", "app 1")], [("producer_byte_rate", 1048576.0, False)]),
        ([("user", None), ("client-id", None)], [("request_percentage", 50.5, False)]),
        ([("user", "alice")], [("consumer_byte_rate", 2048.0, False), ("controller_mutation_rate", 5.0, False)]),
        ([("user", "bob")], [("bogus", 1.0, False)]),
        ([("user", "bob")], [("producer_byte_rate", 1.5, False)]),
        ([("ip", "10.0.0.1")], [("connection_creation_rate", 1.0, False)]),
    ]) == [
        (0, None), (0, None), (0, None),
        (42, "Invalid configuration key bogus"),
        (42, "Configuration producer_byte_rate must be a Long value"),
        (0, None),
    ]
    everything = [
        ((("ip", "10.0.0.1"),), {"connection_creation_rate": 1.0}),
        ((("client-id", "app 1"),), {"producer_byte_rate": 1048576.0}),
        ((("user", None), ("client-id", None)), {"request_percentage": 50.5}),
        ((("user", "alice"),), {"consumer_byte_rate": 2048.0, "controller_mutation_rate": 5.0}),
    ]
    assert describe(b, []) == sorted(everything, key=repr)
    assert describe(b, [("client-id", 0, "app 1")], strict=True) == [everything[1]]
    assert describe(b, [("user", 1, None)]) == [everything[2]]
    assert describe(b, [("user", 2, None)]) == [everything[3]]
    assert describe(b, [("ip", 2, None)]) == [everything[0]]
    assert describe(b, [("user", 0, None)]) == (42, "Missing match for user component")
    b.restart()
    assert describe(b, []) == sorted(everything, key=repr)
    assert alter(b, [([("user", "alice")], [("consumer_byte_rate", 0.0, True)])]) == [(0, None)]
    assert describe(b, [("user", 0, "alice")]) == [((("user", "alice"),), {"controller_mutation_rate": 5.0})]


def _produce(bootstrap: str, client_id: str, topic: str, total: int, out: dict[str, float]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "batch.size": 100_000, "statistics.interval.ms": 0})
    payload = b"x" * 10_000
    t0 = time.monotonic()
    for _ in range(total // len(payload)):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0
    out[client_id] = time.monotonic() - t0


def test_a_producer_held_to_its_byte_rate(make_broker: BrokerFactory) -> None:
    """1 MB/s for client id "slow" (quota.window.num=2: a new client's allowance is one window):
    6 MB take about 5 s more than one window's worth, while "fast" on the same broker is not held."""
    b = make_broker(quota_window_num=2)
    topic = unique("quota")
    create_topic(b.bootstrap, topic, 1)
    assert alter(b, [([("client-id", "slow")], [("producer_byte_rate", 1_000_000.0, False)])]) == [(0, None)]
    took: dict[str, float] = {}
    slow = threading.Thread(target=_produce, args=(b.bootstrap, "slow", topic, 6_000_000, took))
    slow.start()
    _produce(b.bootstrap, "fast", topic, 6_000_000, took)
    slow.join(120)
    assert 4.0 <= took["slow"] <= 8.0, took
    assert took["fast"] < 3.0, took


def test_a_consumer_held_to_its_byte_rate(make_broker: BrokerFactory) -> None:
    """consumer_byte_rate 1 MB/s for client id "slow-c" (quota.window.num=2), "fast-c" unlimited;
    no record is lost or repeated. A throttled fetch returns nothing and is read again after the
    mute (Kafka's getThrottledResponse with unrecord), so with two 1 s samples the consumer gets
    1 MB every 1-2 s: 6 MB took 8 s when measured (5 s would be the bound itself)."""
    from confluent_kafka import Consumer

    b = make_broker(quota_window_num=2)
    topic = unique("fquota")
    create_topic(b.bootstrap, topic, 1)
    _produce(b.bootstrap, "loader", topic, 6_000_000, {})
    assert alter(b, [([("client-id", "slow-c")], [("consumer_byte_rate", 1_000_000.0, False)])]) == [(0, None)]

    def consume(client_id: str) -> float:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g"), "client.id": client_id,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        got, t0 = 0, 0.0
        offsets: set[int] = set()
        deadline = time.monotonic() + 60
        while got < 6_000_000 and time.monotonic() < deadline:
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    t0 = t0 or time.monotonic()
                    got += len(m.value() or b"")
                    offsets.add(int(m.offset() or 0))
        c.close()
        assert got == 6_000_000 and len(offsets) == 600
        return time.monotonic() - t0

    fast, slow = consume("fast-c"), consume("slow-c")
    assert fast < 3.0, (fast, slow)
    assert 4.5 <= slow <= 14.0, (fast, slow)


def configs_cli(b: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "configs", "--bootstrap-server", b.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def test_configs_cli_for_client_quotas(broker: Broker) -> None:
    b = broker
    pair = ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default"]
    r = configs_cli(b, "--alter", *pair, "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2048")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for user-principal 'alice', the default "
                                           "client-id.\n"), r.stderr
    r = configs_cli(b, "--alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "bogus=1")
    assert r.returncode == 1 and "Invalid configuration key bogus" in r.stderr
    r = configs_cli(b, "--alter", "--entity-type", "clients", "--entity-name", "app",
                    "--add-config", "request_percentage=12.5")
    assert r.returncode == 0, r.stderr
    r = configs_cli(b, "--describe", "--entity-type", "clients")
    assert r.stdout == "Quota configs for client-id 'app' are request_percentage=12.5\n"
    r = configs_cli(b, "--alter", *pair, "--delete-config", "consumer_byte_rate")
    assert r.returncode == 0, r.stderr
    r = configs_cli(b, "--describe", *pair)
    assert r.stdout == ("Quota configs for user-principal 'alice', the default client-id are "
                        "producer_byte_rate=1048576.0\n")
    assert describe(b, [("user", 0, "alice")]) == [((("user", "alice"), ("client-id", None)),
                                                     {"producer_byte_rate": 1048576.0})]


def test_request_percentage_throttles_a_busy_client(broker: Broker) -> None:
    """request_percentage 0.001 (10 µs of handler time per second) for client id "busy": its
    Metadata answers soon carry throttle_time (capped at one quota window, 1 s) and the broker
    stops reading from it meanwhile; client "idle" on the same broker is answered at once."""
    b = broker
    assert alter(b, [([("client-id", "busy")], [("request_percentage", 0.001, False)])]) == [(0, None)]

    def run(client_id: str, n: int) -> tuple[float, list[int]]:
        throttles = []
        with WireClient(b.bootstrap, timeout=30, client_id=client_id) as w:
            t0 = time.monotonic()
            for _ in range(n):
                r = w.request(3, 9, topics=None, allow_auto_topic_creation=False,
                              include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
                throttles.append(int(r.throttle_time.total_seconds() * 1000))
            return time.monotonic() - t0, throttles

    idle_took, idle_throttles = run("idle", 20)
    busy_took, busy_throttles = run("busy", 20)
    assert set(idle_throttles) == {0} and idle_took < 2.0
    assert max(busy_throttles) > 0 and max(busy_throttles) <= 1000, busy_throttles
    # each throttled answer mutes the connection: the next request waits for it
    muted = sum(t for t in busy_throttles[:-1]) / 1000.0
    assert busy_took >= muted * 0.9, (busy_took, busy_throttles)
