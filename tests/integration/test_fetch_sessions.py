"""Incremental fetch sessions (KIP-227) at the wire level, plus kafka-python, which uses them."""

from __future__ import annotations

import datetime

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kio.static.primitive import i8, i32, i64

from odradek.client.wire import WireClient
from odradek.protocol import errors

from .broker import Broker


def _fetch(c: WireClient, session_id: int, epoch: int, parts: dict[int, int], forgotten: tuple[int, ...] = (), topic: str = "fs") -> object:
    topics = (
        (FetchTopic(topic=topic, partitions=tuple(
            FetchPartition(partition=i32(p), current_leader_epoch=i32(-1), fetch_offset=i64(o), last_fetched_epoch=i32(-1),
                           log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20))
            for p, o in parts.items())),)
        if parts else ()
    )
    fields = {f: getattr(r, f) for r in [FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(0),
        max_bytes=i32(1 << 24), isolation_level=i8(0), session_id=i32(session_id), session_epoch=i32(epoch),
        topics=topics,
        forgotten_topics_data=(ForgottenTopic(topic=topic, partitions=tuple(i32(p) for p in forgotten)),) if forgotten else (),
        rack_id="",
    )] for f in r.__dataclass_fields__ if not f.startswith("__")}
    return c.request(1, 12, **fields)


def _parts(resp: object) -> dict[int, tuple[int, int]]:
    return {p.partition_index: (p.high_watermark, len(p.records or b"")) for t in resp.responses for p in t.partitions}  # type: ignore[attr-defined]


def test_incremental_session_reports_only_changes(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("fs", 3, 1)])["fs"].result(15)
    prod = Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(3):
        prod.produce("fs", b"x", partition=p)
    assert prod.flush(15) == 0
    with WireClient(broker.bootstrap) as c:
        full = _fetch(c, 0, 0, {0: 0, 1: 0, 2: 0})
        sid = full.session_id  # type: ignore[attr-defined]
        assert sid != 0 and full.error_code == 0  # type: ignore[attr-defined]
        assert set(_parts(full)) == {0, 1, 2}
        # client advanced its positions; nothing new since: an empty incremental response
        inc = _fetch(c, sid, 1, {0: 1, 1: 1, 2: 1})
        assert inc.session_id == sid and _parts(inc) == {}  # type: ignore[attr-defined]
        prod.produce("fs", b"y", partition=1)
        assert prod.flush(15) == 0
        inc2 = _fetch(c, sid, 2, {})
        assert _parts(inc2) == {1: (2, _parts(inc2)[1][1])} and _parts(inc2)[1][1] > 0
        # forget partition 1, then a produce to it is not reported
        _fetch(c, sid, 3, {1: 2}, forgotten=(1,))
        prod.produce("fs", b"z", partition=1)
        assert prod.flush(15) == 0
        assert _parts(_fetch(c, sid, 4, {})) == {}
        bad = _fetch(c, sid, 9, {})
        assert bad.error_code == errors.INVALID_FETCH_SESSION_EPOCH  # type: ignore[attr-defined]
        gone = _fetch(c, 12345, 1, {})
        assert gone.error_code == errors.FETCH_SESSION_ID_NOT_FOUND  # type: ignore[attr-defined]
        closed = _fetch(c, sid, -1, {0: 0})
        assert closed.session_id == 0 and set(_parts(closed)) == {0}  # type: ignore[attr-defined]
        assert _fetch(c, sid, 5, {}).error_code == errors.FETCH_SESSION_ID_NOT_FOUND  # type: ignore[attr-defined]
