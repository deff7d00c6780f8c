"""KIP-467 record errors and Kafka 4.0's timestamp checks (KIP-937).

A refused batch names its offending records in the Produce response (``record_errors``: batch_index and
message; ``error_message``, v8+), so librdkafka fails exactly those records with INVALID_RECORD (the
others of the batch with _INVALID_DIFFERENT_RECORD, to be retried by the application). On CreateTime
topics each record's timestamp is checked, not only the batch's base and max, against
``message.timestamp.after.max.ms`` (default 1 hour since Kafka 4.0) and ``.before.max.ms``. Clients
cannot produce to internal topics."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from integration import wire
from integration.broker import Broker
from integration.clients import create_topic, unique, watermarks

from ._records import batch, now_ms, produce_v8, records_section

INVALID_TIMESTAMP = 32
HOUR = 3600_000


def _send(broker: Broker, topic: str, records: bytes) -> tuple[int, int, list[tuple[int, str | None]], str | None]:
    with wire.Conn(broker.bootstrap, timeout=30) as conn:
        out = produce_v8(conn, topic, 0, records)
    broker.assert_alive()
    return out


def _deliver(bootstrap: str, topic: str, msgs: list[dict[str, object]]) -> list[tuple[int | None, str]]:
    """Produce ``msgs`` in one batch with librdkafka; -> [(error code or None, error string)] per message."""
    # a long linger: on a loaded machine the first record's batch must not leave before the last is added
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "acks": "all",
                  "enable.idempotence": False, "retries": 0})
    out: list[tuple[int | None, str]] = [(None, "")] * len(msgs)
    done: list[int] = []

    def cb_for(i: int):  # type: ignore[no-untyped-def]
        def cb(err, _m):  # type: ignore[no-untyped-def]
            out[i] = (err.code() if err else None, err.str() if err else "")
            done.append(i)
        return cb

    for i, m in enumerate(msgs):
        p.produce(topic, partition=0, on_delivery=cb_for(i), **m)  # type: ignore[arg-type]
    assert p.flush(30) == 0
    assert sorted(done) == list(range(len(msgs)))
    return out


def test_librdkafka_fails_only_the_keyless_records_of_a_compacted_topic(broker: Broker) -> None:
    topic = unique("compact-rec-errors")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    res = _deliver(broker.bootstrap, topic, [
        {"key": b"a", "value": b"1"}, {"key": None, "value": b"2"}, {"key": b"c", "value": b"3"},
        {"key": None, "value": b"4"},
    ])
    # librdkafka names the culprits (with several record errors it can tell them apart from the batch's
    # error; with a single one it fails the whole batch with INVALID_RECORD); the batch's other records
    # were not written either and fail with _INVALID_DIFFERENT_RECORD, for the application to retry
    assert [code for code, _s in res] == [
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
    ], res
    assert watermarks(broker.bootstrap, topic) == (0, 0)
    retry = _deliver(broker.bootstrap, topic, [{"key": b"a", "value": b"1"}, {"key": b"c", "value": b"3"}])
    assert retry == [(None, "")] * 2
    assert watermarks(broker.bootstrap, topic) == (0, 2)


def test_produce_response_names_every_offending_record(broker: Broker) -> None:
    topic = unique("compact-raw")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    section = records_section(5, keys=[b"a", None, b"c", None, b"e"])
    for codec_batch in (batch(section, count=5),):
        err, base, rec_errors, msg = _send(broker, topic, codec_batch)
        assert (err, base) == (wire.INVALID_RECORD, -1)
        assert [i for i, _m in rec_errors] == [1, 3]
        assert all(m and m.startswith("Compacted topic cannot accept message without key in topic partition")
                   for _i, m in rec_errors), rec_errors
        assert msg and msg.startswith("One or more records have been rejected due to 2 record errors"), msg
    assert watermarks(broker.bootstrap, topic) == (0, 0)


def test_each_record_timestamp_is_checked_not_only_the_header(broker: Broker) -> None:
    """Record 2 is 2 h in the future; the header's base and max timestamps say all is well."""
    topic = unique("ts")
    create_topic(broker.bootstrap, topic, 1)
    now = now_ms()
    section = records_section(4, ts_deltas=[0, 10, 2 * HOUR, 20])
    err, _base, rec_errors, msg = _send(broker, topic, batch(section, count=4, base_ts=now, max_ts=now + 20))
    assert err == INVALID_TIMESTAMP, (err, msg)
    assert [i for i, _m in rec_errors] == [2], rec_errors
    assert rec_errors[0][1] and "is out of range" in rec_errors[0][1]
    assert msg == "One or more records have been rejected due to invalid timestamp"
    # past timestamps stay unbounded (message.timestamp.before.max.ms = Long.MAX_VALUE)
    old = now - 30 * 24 * HOUR
    err, base, _r, _m = _send(broker, topic, batch(records_section(2, ts_deltas=[0, 5]), count=2, base_ts=old))
    assert (err, base) == (wire.NONE, 0)
    # and a lying maxTimestamp is corrected: the time index finds the record by its real timestamp
    err, base, _r, _m = _send(broker, topic, batch(records_section(2, ts_deltas=[0, 60_000]), count=2,
                                                   base_ts=now, max_ts=now))
    assert (err, base) == (wire.NONE, 2)
    from integration.clients import offsets_for_times
    assert offsets_for_times(broker.bootstrap, topic, {0: now + 30_000}) == {0: 3}


def test_librdkafka_gets_invalid_timestamp_for_a_record_an_hour_and_more_ahead(broker: Broker) -> None:
    topic = unique("ts-client")
    create_topic(broker.bootstrap, topic, 1)
    now = int(time.time() * 1000)
    res = _deliver(broker.bootstrap, topic, [
        {"value": b"now", "timestamp": now}, {"value": b"later", "timestamp": now + 2 * HOUR},
    ])
    assert res[1][0] == KafkaError.INVALID_TIMESTAMP, res
    assert res[0][0] in (KafkaError.INVALID_TIMESTAMP, KafkaError._INVALID_DIFFERENT_RECORD), res
    assert _deliver(broker.bootstrap, topic, [{"value": b"soon", "timestamp": now + HOUR // 2}]) == [(None, "")]


def test_timestamp_defaults_are_kafka_4(broker: Broker) -> None:
    topic = unique("ts-defaults")
    create_topic(broker.bootstrap, topic, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = admin.describe_configs([res])[res].result(timeout=20)
    assert cfg["message.timestamp.after.max.ms"].value == "3600000"
    assert cfg["message.timestamp.before.max.ms"].value == str(2**63 - 1)


def test_clients_cannot_produce_to_internal_topics(broker: Broker) -> None:
    # the group coordinator creates __consumer_offsets on first use
    create_topic(broker.bootstrap, unique("warm"), 1)
    with wire.Conn(broker.bootstrap) as conn:
        err, base, _r, msg = produce_v8(conn, "__consumer_offsets", 0, batch(records_section(1), count=1))
    assert (err, base) == (wire.INVALID_TOPIC_EXCEPTION, -1), msg
    assert msg and "internal topic" in msg
    broker.assert_alive()
