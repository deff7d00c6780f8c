"""Issue 12, item 2: decompression bombs. A 256 KiB zstd batch of RLE blocks that inflates to 8 GiB,
claiming 2 records. Produced to a compacted topic it used to abort the broker at once (the keyless-record
check inflated it whole); produced to a normal topic it was stored, and the next ListOffsets by timestamp
aborted the broker, again after every restart. Now a batch is inflated with a hard cap of the topic's
max.message.bytes and refused with MESSAGE_TOO_LARGE; a bomb already in a segment answers
CORRUPT_MESSAGE to ListOffsets and the broker goes on serving."""

from __future__ import annotations

import pytest
from integration import wire
from integration.broker import Broker
from integration.clients import assert_served, create_topic, unique, watermarks

from ._records import batch, compress, list_offsets, now_ms, produce_v8, records_section, zstd_rle_bomb

BOMB_INFLATED = 8 << 30


def _bomb(ts: int) -> bytes:
    b = batch(zstd_rle_bomb(BOMB_INFLATED), codec="zstd", count=2, base_ts=ts, max_ts=ts + 1)
    assert len(b) < 300_000
    return b


def _produce(broker: Broker, topic: str, records: bytes) -> tuple[int, int, list[tuple[int, str | None]], str | None]:
    with wire.Conn(broker.bootstrap, timeout=60) as conn:
        try:
            return produce_v8(conn, topic, 0, records)
        except (ConnectionError, OSError, AssertionError) as e:
            broker.assert_alive()
            raise AssertionError(f"connection failed on produce: {e!r}") from e


def test_bomb_to_compacted_topic_is_refused_without_inflating_it(broker: Broker) -> None:
    topic = unique("bomb-compact")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    err, _base, _rec, msg = _produce(broker, topic, _bomb(now_ms()))
    broker.assert_alive()
    assert err == wire.MESSAGE_TOO_LARGE, (err, msg)
    assert msg and "max.message.bytes" in msg
    assert watermarks(broker.bootstrap, topic) == (0, 0)
    assert "rejected produce" in broker.log_text()
    assert_served(broker.bootstrap)


def test_bomb_to_normal_topic_is_refused_and_list_offsets_keeps_working(broker: Broker) -> None:
    topic = unique("bomb")
    create_topic(broker.bootstrap, topic, 1)
    ts = now_ms()
    err, _base, _rec, msg = _produce(broker, topic, _bomb(ts))
    broker.assert_alive()
    assert err == wire.MESSAGE_TOO_LARGE, (err, msg)
    err, _b, _r, _m = _produce(broker, topic, batch(records_section(2), count=2, base_ts=ts, max_ts=ts))
    assert err == wire.NONE
    with wire.Conn(broker.bootstrap) as conn:
        assert list_offsets(conn, topic, 0, ts) == (wire.NONE, ts, 0)
    broker.assert_alive()
    assert watermarks(broker.bootstrap, topic) == (0, 2)


def test_bomb_already_in_a_segment_answers_corrupt_message_and_survives_restarts(broker: Broker) -> None:
    """A bomb written by an older broker (or planted on disk): ListOffsets by timestamp reads it."""
    topic = unique("bomb-disk")
    create_topic(broker.bootstrap, topic, 1)
    ts = now_ms()
    err, _b, _r, _m = _produce(broker, topic, batch(records_section(1), count=1, base_ts=ts - 1000))
    assert err == wire.NONE
    broker.kill()  # no clean shutdown: the restart recovers the segment (CRC, offsets) and keeps the bomb
    seg = broker.segment_files(topic)[-1]
    bomb = bytearray(_bomb(ts))
    bomb[0:8] = (1).to_bytes(8, "big")  # base offset 1, after the record at 0 (outside the CRC)
    with seg.open("ab") as f:
        f.write(bomb)
    for _ in range(2):
        broker.start()
        with wire.Conn(broker.bootstrap, timeout=60) as conn:
            try:
                err, _ts, off = list_offsets(conn, topic, 0, ts)
            except (ConnectionError, OSError, AssertionError) as e:
                raise AssertionError(f"ListOffsets failed: {e!r}; alive: {broker.running}") from e
        broker.assert_alive()
        assert (err, off) == (wire.CORRUPT_MESSAGE, -1)
        with wire.Conn(broker.bootstrap) as conn:  # the record before the bomb is still found
            assert list_offsets(conn, topic, 0, ts - 1000) == (wire.NONE, ts - 1000, 0)
        assert_served(broker.bootstrap)
        broker.stop()
    assert "ListOffsets by timestamp" in broker.log_text()


def _xerial(data: bytes, block: int = 32 * 1024) -> bytes:
    import cramjam

    out = bytearray(b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big"))
    for i in range(0, len(data), block):
        c = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += len(c).to_bytes(4, "big") + c
    return bytes(out)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "snappy-xerial", "lz4", "zstd"])
def test_bombs_of_every_codec_are_refused(broker: Broker, codec: str) -> None:
    """16 MiB of zeros claiming 2 records, under 1 MB on the wire: past max.message.bytes once inflated."""
    topic = unique(f"bomb-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    zeros = bytes(16 << 20)
    payload = _xerial(zeros) if codec == "snappy-xerial" else compress(codec, zeros)
    b = batch(payload, codec=codec.split("-")[0], count=2)
    assert len(b) < 1_000_000
    err, _base, _rec, msg = _produce(broker, topic, b)
    broker.assert_alive()
    assert err == wire.MESSAGE_TOO_LARGE, (codec, err, msg)
    assert watermarks(broker.bootstrap, topic) == (0, 0)
