"""Option parsing of the ``odradek`` source and the job's config (no Spark, no broker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.pipeline import config, options
from odradek.pipeline.options import OptionError, SourceOptions, rate_limit

BASE = {"kafka.bootstrap.servers": "h:1"}


def test_topics_exactly_one() -> None:
    with pytest.raises(OptionError, match="exactly one"):
        SourceOptions.parse(BASE, streaming=False)
    with pytest.raises(OptionError, match="exactly one"):
        SourceOptions.parse({**BASE, "subscribe": "a", "assign": '{"a": [0]}'}, streaming=False)
    o = SourceOptions.parse({**BASE, "subscribe": "a, b"}, streaming=False)
    assert o.topics.select({"a": [0, 1], "b": [0], "c": [0]}) == [("a", 0), ("a", 1), ("b", 0)]
    o = SourceOptions.parse({**BASE, "subscribepattern": "shop\\..*"}, streaming=False)  # case-insensitive
    assert o.topics.select({"shop.x": [0], "shopx": [0], "__consumer_offsets": [0]}) == [("shop.x", 0)]
    o = SourceOptions.parse({**BASE, "assign": '{"a": [1, 0]}'}, streaming=False)
    assert o.topics.select({}) == [("a", 0), ("a", 1)]


def test_offset_specs() -> None:
    o = SourceOptions.parse({**BASE, "subscribe": "t"}, streaming=True)
    assert o.starting.kind == "latest" and o.max_offsets_per_trigger is None
    o = SourceOptions.parse({**BASE, "subscribe": "t"}, streaming=False)
    assert (o.starting.kind, o.ending.kind) == ("earliest", "latest")
    o = SourceOptions.parse({**BASE, "subscribe": "t", "startingOffsets": '{"t": {"0": 23, "1": -2}}',
                             "endingOffsets": '{"t": {"0": 50, "1": -1}}'}, streaming=False)
    assert o.starting.offsets == {("t", 0): 23, ("t", 1): -2}
    assert o.ending.offsets == {("t", 0): 50, ("t", 1): -1}
    with pytest.raises(OptionError, match="earliest"):
        SourceOptions.parse({**BASE, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, streaming=False)
    with pytest.raises(OptionError, match="streaming"):
        SourceOptions.parse({**BASE, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    o = SourceOptions.parse({**BASE, "subscribe": "t", "startingTimestamp": "1000", "startingOffsets": "latest"},
                            streaming=True)
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 1000)
    with pytest.raises(OptionError, match="not supported"):
        SourceOptions.parse({**BASE, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, streaming=True)
    with pytest.raises(OptionError, match="bootstrap"):
        SourceOptions.parse({"subscribe": "t"}, streaming=True)
    with pytest.raises(OptionError, match="true or false"):
        SourceOptions.parse({**BASE, "subscribe": "t", "failOnDataLoss": "maybe"}, streaming=True)


def test_offsets_json_round_trip() -> None:
    offs = {("b", 1): 5, ("a", 10): 7, ("a", 2): 3}
    js = options.offsets_to_json(offs)
    assert list(js) == ["a:2", "a:10", "b:1"]  # canonical order: equal offsets, equal JSON
    assert options.offsets_from_json(js) == offs
    assert options.parse_tp_key("my.topic-x:12") == ("my.topic-x", 12)
    # the startingOffsets / endingOffsets option form, read back by the option parser
    raw = options.offsets_option_json(offs)
    assert json.loads(raw) == {"a": {"2": 3, "10": 7}, "b": {"1": 5}}
    o = SourceOptions.parse({**BASE, "subscribe": "a,b", "startingOffsets": raw}, streaming=False)
    assert o.starting.offsets == offs


def test_rate_limit_is_proportional_and_bounded() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 1000, ("t", 1): 200, ("t", 2): 50}
    end = rate_limit(start, latest, 110)
    assert end == {("t", 0): 100, ("t", 1): 110, ("t", 2): 50}
    assert sum(end[tp] - start[tp] for tp in start) <= 110
    assert rate_limit(start, latest, 10_000) == latest
    # a tiny share still moves a partition (Spark rounds shares below one up)
    assert rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 10)[("t", 1)] == 1


def test_config(tmp_path: Path) -> None:
    text = """
[broker]
bootstrap_servers = "127.0.0.1:9092"
[warehouse]
path = "./wh"
checkpoint_dir = "./ck"
[[ods]]
table = "customers"
topics = ["crm.customers"]
key = ["id"]
version = "source.lsn"
[ods.columns]
id = "Int64"
name = "String"
city = "Nullable(String)"
"""
    f = tmp_path / "p.toml"
    f.write_text(text)
    cfg = config.load(f)
    assert cfg.warehouse_path == (tmp_path / "wh").resolve()
    t = cfg.ods[0]
    assert t.key == ("id",) and t.columns["city"].nullable and t.columns["city"].base == "String"
    assert cfg.source_options == {}
    f.write_text(text + '[spark.source_options]\ncoalesceBelowRecords = 5000\n')
    assert config.load(f).source_options == {"coalesceBelowRecords": "5000"}
    f.write_text(text.replace('city = "Nullable(String)"', 'city = "Map(String, String)"'))
    with pytest.raises(config.ConfigError, match="unsupported type"):
        config.load(f)
    f.write_text(text.replace('key = ["id"]', 'key = ["nope"]'))
    with pytest.raises(config.ConfigError, match="key column"):
        config.load(f)


def test_isolation_level_option(tmp_path: Path) -> None:
    opts = SourceOptions.parse({**BASE, "subscribe": "a", "kafka.isolation.level": "read_committed"}, streaming=True)
    assert opts.kafka["isolation.level"] == "read_committed"
    with pytest.raises(OptionError, match="isolation.level"):
        SourceOptions.parse({**BASE, "subscribe": "a", "kafka.isolation.level": "committed"}, streaming=True)
    from odradek.pipeline.job import ods_kafka_options

    f = tmp_path / "p.toml"
    f.write_text('[broker]\nbootstrap_servers = "h:1"\n[warehouse]\npath = "./wh"\ncheckpoint_dir = "./ck"\n'
                 '[[ods]]\ntable = "c"\ntopics = ["t"]\nkey = ["id"]\nversion = "source.lsn"\n'
                 '[ods.columns]\nid = "Int64"\n')
    assert ods_kafka_options(config.load(f))["isolation.level"] == "read_committed"  # the ODS job's default
    f.write_text(f.read_text().replace('bootstrap_servers = "h:1"',
                                       'bootstrap_servers = "h:1"\noptions = { "isolation.level" = "read_uncommitted" }'))
    assert ods_kafka_options(config.load(f))["isolation.level"] == "read_uncommitted"


def test_exactly_once_task_identity() -> None:
    from odradek.pipeline import exactly_once as eo

    ident = eo.task_identity({eo.BATCH_ID_PROPERTY: "7", eo.QUERY_ID_PROPERTY: "q-1"}, 3)
    assert ident.transactional_id("p") == "p-q-1-3"  # the same for every batch and attempt of the task
    assert ident.marker_offset() == 8
    with pytest.raises(eo.NotInStreamingTask):
        eo.task_identity({eo.QUERY_ID_PROPERTY: "q-1"}, 0)
    with pytest.raises(eo.NotInStreamingTask):
        eo.task_identity({eo.BATCH_ID_PROPERTY: "x", eo.QUERY_ID_PROPERTY: "q-1"}, 0)


def test_exactly_once_sink_options() -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from odradek.pipeline.source import OdradekStreamWriter, OdradekWriter

    schema = StructType([StructField("value", BinaryType())])
    w = OdradekStreamWriter({**BASE, "topic": "t", "exactlyOnce": "true"}, schema)
    assert w.producing.exactly_once and w.producing.prefix == "odradek-sink"
    assert not OdradekStreamWriter({**BASE, "topic": "t"}, schema).producing.exactly_once
    with pytest.raises(OptionError, match="'topic' option"):
        OdradekStreamWriter({**BASE, "exactlyOnce": "true"}, StructType([*schema.fields,
                                                                          StructField("topic", BinaryType())]))
    with pytest.raises(OptionError, match="transactional.id"):
        OdradekStreamWriter({**BASE, "topic": "t", "kafka.transactional.id": "x"}, schema)
    with pytest.raises(OptionError, match="streaming"):
        OdradekWriter({**BASE, "topic": "t", "exactlyOnce": "true"}, schema)
    with pytest.raises(OptionError, match="true or false"):
        OdradekStreamWriter({**BASE, "topic": "t", "exactlyOnce": "yes please"}, schema)


def test_kafka_security_options_as_spark_gives_them() -> None:
    """Spark's Kafka source takes the Java client's security settings: they reach librdkafka translated."""
    params = options.kafka_params({
        **BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="alice" password="s3cret";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/etc/ca.pem",
    })
    assert params == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                      "sasl.username": "alice", "sasl.password": "s3cret", "ssl.ca.location": "/etc/ca.pem"}


def test_small_batches_are_read_by_one_task() -> None:
    from odradek.pipeline.source import CoalescedInputPartition, KafkaInputPartition, plan_ranges

    ranges = {("t", 0): (0, 10), ("t", 1): (5, 5), ("t", 2): (7, 9), ("u", 0): (0, 3)}
    one = plan_ranges(ranges, None, coalesce_below=100)
    assert len(one) == 1 and isinstance(one[0], CoalescedInputPartition)
    assert one[0].ranges == [KafkaInputPartition("t", 0, 0, 10), KafkaInputPartition("t", 2, 7, 9),
                             KafkaInputPartition("u", 0, 0, 3)]  # the empty range is left out
    # at or above the threshold, or with minPartitions > 1, or turned off: one task per topic partition
    for got in (plan_ranges(ranges, None, coalesce_below=15), plan_ranges(ranges, 2, coalesce_below=100),
                plan_ranges(ranges, None, coalesce_below=0)):
        assert all(isinstance(p, KafkaInputPartition) for p in got) and len(got) >= 3
    assert SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}, streaming=True).coalesce_below \
        == options.DEFAULT_COALESCE_BELOW == 20_000
    assert SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "coalesceBelowRecords": "0"},
                               streaming=True).coalesce_below == 0  # off
    assert SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "coalescebelowrecords": "500"},
                               streaming=True).coalesce_below == 500
    with pytest.raises(OptionError):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "coalesceBelowRecords": "-1"},
                            streaming=True)


def test_check_crcs_is_on_unless_turned_off() -> None:
    """``kafka.check.crcs`` (the Java consumer's setting, handed on as Spark's Kafka source hands on every
    ``kafka.*`` option): true by default in both readers, librdkafka's own default (false) overridden."""
    from odradek.pipeline.kafka_client import consumer_config

    on = SourceOptions.parse({**BASE, "subscribe": "t"}, streaming=False)
    assert on.check_crcs is True
    assert consumer_config(on)["check.crcs"] is True
    off = SourceOptions.parse({**BASE, "subscribe": "t", "kafka.check.crcs": "false"}, streaming=False)
    assert off.check_crcs is False
    assert consumer_config(off)["check.crcs"] == "false"
    assert SourceOptions.parse({**BASE, "subscribe": "t", "kafka.check.crcs": "TRUE"}, streaming=False).check_crcs
    with pytest.raises(OptionError, match="check.crcs"):
        SourceOptions.parse({**BASE, "subscribe": "t", "kafka.check.crcs": "maybe"}, streaming=False)


def test_share_options() -> None:
    from odradek.pipeline.share_source import ShareOptions, is_share_mode

    given = {**BASE, "subscribe": "a,b", "ShareGroup": "g", "shareTasks": "8"}
    assert is_share_mode(given) and not is_share_mode({**BASE, "subscribe": "a"})
    o = ShareOptions.parse(given, default_tasks=2)
    assert (o.group, o.topics, o.tasks, o.fetch_wait_ms, o.max_records) == ("g", ("a", "b"), 8, 1000, 10_000)
    assert ShareOptions.parse({**BASE, "subscribe": "a", "shareGroup": "g"}, default_tasks=3).tasks == 3
    with pytest.raises(OptionError, match="startingOffsets"):
        ShareOptions.parse({**given, "startingOffsets": "earliest"}, default_tasks=2)
    with pytest.raises(OptionError, match="subscribe"):
        ShareOptions.parse({**BASE, "assign": '{"a": [0]}', "shareGroup": "g"}, default_tasks=2)
    with pytest.raises(OptionError, match="shareTasks"):
        ShareOptions.parse({**given, "shareTasks": "0"}, default_tasks=2)
    with pytest.raises(OptionError, match="name the share group"):
        ShareOptions.parse({**given, "shareGroup": " "}, default_tasks=2)


class _FakeShareConsumer:
    def __init__(self) -> None:
        self.acks: list[tuple[int, int]] = []  # (offset, AcknowledgeType)
        self.commits = 0
        self.closed = False

    def acknowledge(self, msg: object, kind: int) -> None:
        self.acks.append((msg.offset(), int(kind)))  # type: ignore[attr-defined]

    def commit_sync(self, timeout: float) -> dict[object, object]:
        self.commits += 1
        return {}

    def close(self) -> None:
        self.closed = True


class _FakeMessage:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0


def test_share_settle_accepts_committed_releases_earlier_runs_and_leaves_siblings() -> None:
    """A task of batch 7 (batch 6 committed) of run "r2": what its worker's idle consumers hold from batches <= 6
    of r2 is accepted, from another run released, from batch 7 of r2 (a sibling task's) left alone; a busy
    consumer is not touched; one last used more than 3 batches ago is closed and dropped."""
    from confluent_kafka import AcknowledgeType

    from odradek.pipeline.share_source import ShareInputPartition, _Member, _settle

    def member(run: str, batch: int, offset: int, busy: bool = False) -> _Member:
        return _Member(_FakeShareConsumer(), [_FakeMessage(offset)], (run, batch), busy)

    committed, old_run, sibling, busy, older_committed = (
        member("r2", 6, 1), member("r1", 3, 2), member("r2", 7, 3), member("r2", 5, 4, busy=True), member("r2", 2, 5))
    members = [committed, old_run, sibling, busy, older_committed]
    _settle(members, ShareInputPartition(0, 7, 6, "r2"))
    accept, release = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)
    assert committed.consumer.acks == [(1, accept)] and committed.held == [] and committed.consumer.commits == 1
    assert older_committed.consumer.acks == [(5, accept)]
    assert old_run.consumer.acks == [(2, release)] and old_run.held == []
    assert sibling.consumer.acks == [] and len(sibling.held) == 1
    assert busy.consumer.acks == [] and len(busy.held) == 1
    assert older_committed.consumer.closed and members == [committed, old_run, sibling, busy]
    assert not committed.consumer.closed
