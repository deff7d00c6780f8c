"""Floods of incremental fetch sessions (KIP-227; issue 33).

The session cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions. Kafka's
FetchSessionCache decides who gets a slot when it is full: a stale session (unused for
``min.incremental.fetch.session.eviction.ms``) goes first; otherwise a newcomer with more partitions
takes the place of the smallest session created longer ago than that; a follower's takes a
consumer's. So 100,000 session openings neither grow the cache nor push out consumers that keep
fetching, and an attacker who keeps every slot busy with one-partition sessions cannot keep a real
consumer (more partitions) from getting one. Raw Fetch v7 frames against a real broker process.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from integration import wire
from integration.broker import Broker, BrokerFactory
from integration.clients import assert_served, create_topic, unique
from integration.wire import Conn, Reader, Writer
from prometheus_client.parser import text_string_to_metric_families

FETCH_SESSION_ID_NOT_FOUND = 70
EVICTION_MS = 5000  # the size rule test waits this long
FLOOD_EVICTION_MS = 15_000  # a slow round of the flood must not leave the consumer unused this long


def session_metrics(b: Broker) -> tuple[float, float, float]:
    """(NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached, evictions) from /metrics."""
    with urllib.request.urlopen(f"http://{b.host}:{b.http_port}/metrics", timeout=15) as r:
        text = r.read().decode()
    got = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples
           if s.name.startswith("kafka_server_fetchsessioncache_")}
    f = "kafka_server_fetchsessioncache_"
    return (got[f + "numincrementalfetchsessions"], got[f + "numincrementalfetchpartitionscached"],
            got[f + "incrementalfetchsessionevictions_total"])


def vm_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def fetch_v7(corr: int, session_id: int, epoch: int, topic: str, partitions: list[int]) -> bytes:
    """A Fetch v7 frame (no wait) naming ``partitions`` of ``topic`` at offset 0."""
    w = Writer().int32(-1).int32(0).int32(0).int32(1 << 20).int8(0).int32(session_id).int32(epoch)
    w.array([topic] if partitions else [], lambda w, t: w.string(t).array(
        partitions, lambda w2, p: w2.int32(p).int64(0).int64(-1).int32(1 << 16)))
    w.array([], lambda w, t: None)  # forgotten_topics_data
    return wire.encode_request(wire.FETCH, 7, corr, w.done())


def read_session(conn: Conn) -> tuple[int, int, int]:
    """One Fetch v7 response's (correlation id, error code, session id)."""
    r = Reader(conn.recv_frame())
    corr = r.int32()
    r.int32()  # throttle_time_ms
    return corr, r.int16(), r.int32()


def session_fetch(conn: Conn, session_id: int, epoch: int, topic: str, partitions: list[int]) -> tuple[int, int]:
    corr = conn.next_corr()
    conn.send(fetch_v7(corr, session_id, epoch, topic, partitions))
    got, err, sid = read_session(conn)
    assert got == corr
    return err, sid


class Held:
    """A session kept in use: an incremental fetch (nothing new to say) moves it on an epoch."""

    def __init__(self, conn: Conn, topic: str, partitions: list[int]) -> None:
        self.conn, self.topic = conn, topic
        err, self.session_id = session_fetch(conn, 0, 0, topic, partitions)
        assert err == wire.NONE
        self.epoch = 1

    def use(self) -> int:
        err, sid = session_fetch(self.conn, self.session_id, self.epoch, self.topic, [])
        if err == wire.NONE:
            assert sid == self.session_id
            self.epoch += 1
        return err


def test_100k_new_sessions_do_not_grow_the_cache_or_evict_a_consumer(make_broker: BrokerFactory) -> None:
    """100,000 session openings (one partition each) on two pipelined connections, while a consumer's
    four-partition session keeps fetching: at most the cache's slots are ever granted at once, the
    consumer's session survives every round, the broker's RSS stays put and it goes on serving.
    (A regression test: the cache was bounded before KIP-227's eviction rules were completed.)"""
    slots = 500
    b = make_broker({"max.incremental.fetch.session.cache.slots": slots,
                     "min.incremental.fetch.session.eviction.ms": FLOOD_EVICTION_MS})
    topic = unique("flood")
    create_topic(b.bootstrap, topic, 4)
    with Conn(b.bootstrap, timeout=60) as own, Conn(b.bootstrap, timeout=60) as a1, \
            Conn(b.bootstrap, timeout=60) as a2:
        consumer = Held(own, topic, [0, 1, 2, 3])
        rss_before = vm_rss(b.pid)
        granted: list[int] = []
        window, total, sent = 250, 100_000, 0
        last_use = time.monotonic()
        while sent < total:
            for c in (a1, a2):
                frames = b"".join(fetch_v7(1000 + i, 0, 0, topic, [i % 4]) for i in range(window))
                c.send(frames)
            for c in (a1, a2):
                for _ in range(window):
                    _corr, err, sid = read_session(c)
                    assert err == wire.NONE
                    if sid:
                        granted.append(sid)
            sent += 2 * window
            if time.monotonic() - last_use > 0.5:
                assert consumer.use() == wire.NONE, f"the consumer's session was evicted after {sent} openings"
                last_use = time.monotonic()
                sessions, cached, _ = session_metrics(b)
                assert sessions <= slots and cached <= slots * 4, (sessions, cached)
        assert consumer.use() == wire.NONE
        rss_after = vm_rss(b.pid)
        sessions, _cached, evictions = session_metrics(b)
    # the flood's sessions are only replaced once stale: never more than the slots per eviction time
    assert 0 < len(set(granted)) < total // 10, len(set(granted))
    assert sessions == slots and evictions == len(set(granted)) + 1 - slots, (sessions, evictions, len(set(granted)))
    assert rss_after - rss_before < 100 << 20, f"RSS grew {(rss_after - rss_before) >> 20} MiB"
    b.assert_alive()
    assert_served(b.bootstrap)


def test_slots_held_by_small_sessions_give_way_to_a_bigger_consumer(make_broker: BrokerFactory) -> None:
    """An attacker opens every slot with one-partition sessions and keeps each in use, so none goes
    stale. Once they are older than the eviction time, a consumer fetching three partitions gets a
    session (one of the attacker's goes); before Kafka's size rule it never could."""
    slots = 40
    b = make_broker({"max.incremental.fetch.session.cache.slots": slots,
                     "min.incremental.fetch.session.eviction.ms": EVICTION_MS})
    topic = unique("held")
    create_topic(b.bootstrap, topic, 3)
    with Conn(b.bootstrap, timeout=60) as attacker, Conn(b.bootstrap, timeout=60) as own:
        held = [Held(attacker, topic, [0]) for _ in range(slots)]
        assert len({h.session_id for h in held}) == slots and all(h.session_id for h in held)
        # the cache is full of young sessions: no newcomer gets one
        assert session_fetch(own, 0, 0, topic, [0, 1, 2]) == (wire.NONE, 0)
        deadline = time.monotonic() + EVICTION_MS / 1000 + 1.0
        while time.monotonic() < deadline:  # keep every one in use past the eviction time
            assert all(h.use() == wire.NONE for h in held)
            time.sleep(0.3)
        assert all(h.use() == wire.NONE for h in held)
        err, sid = session_fetch(own, 0, 0, topic, [0, 1, 2])
        assert err == wire.NONE and sid != 0, "a consumer with more partitions got no session"
        lost = [h for h in held if h.use() == FETCH_SESSION_ID_NOT_FOUND]
        assert len(lost) == 1, len(lost)
        # a newcomer with one partition is no better than the attacker's: still none
        assert session_fetch(own, 0, 0, topic, [0]) == (wire.NONE, 0)
    assert_served(b.bootstrap)
