"""Issue 12, item 3: batches whose records do not match their header. A gzip batch holding 3 records whose
header says 1 used to be stored at offset 0; the next produce got offset 1; librdkafka then read offsets
0, 1, 2, 1 and kafka-python silently dropped two records. Now the records of every batch (compressed or
not) are walked as Kafka's LogValidator does, and a lying batch is refused (INVALID_RECORD or
CORRUPT_MESSAGE) with nothing appended, while honest clients go on being served."""

from __future__ import annotations

import pytest
from integration import wire
from integration.broker import Broker
from integration.clients import CODECS, consume, create_topic, make_messages, produce, unique, watermarks

from ._records import batch, compress, produce_v8, records_section

REFUSED = (wire.INVALID_RECORD, wire.CORRUPT_MESSAGE)


def _send(broker: Broker, topic: str, records: bytes) -> tuple[int, int, str | None]:
    with wire.Conn(broker.bootstrap, timeout=30) as conn:
        err, base, _rec, msg = produce_v8(conn, topic, 0, records)
    broker.assert_alive()
    return err, base, msg


def test_gzip_batch_with_more_records_than_its_header_is_refused_and_clients_see_a_clean_log(
    broker: Broker,
) -> None:
    topic = unique("lies")
    create_topic(broker.bootstrap, topic, 1)
    liar = batch(compress("gzip", records_section(3)), codec="gzip", count=1)
    err, _base, msg = _send(broker, topic, liar)
    assert err == wire.INVALID_RECORD, (err, msg)
    assert msg and "3 records" in msg
    assert watermarks(broker.bootstrap, topic) == (0, 0)  # nothing appended
    msgs = make_messages(3, "honest")
    acks = produce("confluent", broker.bootstrap, topic, msgs, compression="gzip", partition=0)
    assert [o for _p, o in acks] == [0, 1, 2]
    for client in ("confluent", "kafka-python"):
        got = consume(client, broker.bootstrap, topic, {0: 0}, 3, timeout=20)
        assert [(m.offset, m.value) for m in got] == [(i, m.value) for i, m in enumerate(msgs)], client


# (name, records section, header's count): each one a lie the header tells about its records
LIES = [
    ("more-records", records_section(3), 1),
    ("fewer-records", records_section(2), 3),
    ("repeated-offset-delta", records_section(3, offset_deltas=[0, 0, 1]), 3),
    ("shuffled-offset-deltas", records_section(3, offset_deltas=[0, 2, 1]), 3),
    ("truncated-record", records_section(3)[:-5], 3),
    ("record-length-past-its-fields", records_section(2) + b"\x06\x00\x00\x04", 3),
]


@pytest.mark.parametrize("codec", ("none", *CODECS))
def test_records_that_do_not_match_the_header_are_refused(broker: Broker, codec: str) -> None:
    topic = unique(f"lies-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    outcomes = {}
    for name, section, count in LIES:
        err, _base, msg = _send(broker, topic, batch(compress(codec, section), codec=codec, count=count))
        outcomes[name] = (err, msg)
    bad = {k: v for k, v in outcomes.items() if v[0] not in REFUSED}
    assert not bad, f"accepted or misjudged: {bad}"
    assert watermarks(broker.bootstrap, topic) == (0, 0)
    err, base, _msg = _send(broker, topic, batch(compress(codec, records_section(3)), codec=codec, count=3))
    assert (err, base) == (wire.NONE, 0)
    assert watermarks(broker.bootstrap, topic) == (0, 3)
    assert "rejected produce" in broker.log_text()


def test_records_inflating_past_max_message_bytes_are_refused(broker: Broker) -> None:
    """10 records of 20 KB of zeros: 200 KB inflated, at most 20 KB compressed (snappy; the rest far less)."""
    topic = unique("inflate")
    create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": 100000})
    for codec in CODECS:
        section = records_section(10, value=bytes(20000))
        liar = batch(compress(codec, section), codec=codec, count=10)
        assert len(liar) < 20000  # well under max.message.bytes on the wire
        err, _base, msg = _send(broker, topic, liar)
        assert err == wire.MESSAGE_TOO_LARGE, (codec, err, msg)
        fits = batch(compress(codec, records_section(4, value=bytes(20000))), codec=codec, count=4)
        assert _send(broker, topic, fits)[0] == wire.NONE, codec
    assert watermarks(broker.bootstrap, topic) == (0, 16)


@pytest.mark.parametrize("client", ("confluent", "kafka-python", "aiokafka"))
def test_client_batches_are_accepted_with_every_codec(broker: Broker, client: str) -> None:
    """No false refusals: what the clients build (near max.message.bytes of compressible data too)."""
    topic = unique(f"honest-{client}")
    create_topic(broker.bootstrap, topic, 1)
    expected = 0
    for codec in CODECS:
        msgs = make_messages(300, codec, value_size=3000)
        acks = produce(client, broker.bootstrap, topic, msgs, compression=codec, partition=0)
        assert [o for _p, o in acks] == list(range(expected, expected + len(msgs))), codec
        expected += len(msgs)
    got = consume("confluent", broker.bootstrap, topic, {0: 0}, expected, timeout=30)
    assert [m.offset for m in got] == list(range(expected))
