"""KIP-848's GROUP config resource: names, Kafka's validation messages, the store name, the cache."""

from __future__ import annotations

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.server import group_configs as gc


def cfg() -> BrokerConfig:
    return BrokerConfig({})


def test_defaults_come_from_the_broker() -> None:
    d = gc.defs(BrokerConfig({"group.consumer.session.timeout.ms": "50000"}))
    assert d["consumer.session.timeout.ms"].default == "50000"
    assert d["consumer.heartbeat.interval.ms"].default == "5000"
    assert set(d) == set(gc.NAMES)


@pytest.mark.parametrize(("configs", "message"), [
    ({"nope": "1"}, "Unknown group config name: nope"),
    ({"consumer.session.timeout.ms": "x"}, "Invalid value x for configuration consumer.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "1000"},
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "20000"},
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ({"share.record.lock.duration.ms": "1000"},
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"share.delivery.count.limit": "1"},
     "share.delivery.count.limit must be greater than or equal to group.share.min.delivery.count.limit"),
    ({"share.delivery.count.limit": "11"},
     "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
    ({"share.partition.max.record.locks": "99"},
     "share.partition.max.record.locks must be greater than or equal to group.share.min.partition.max.record.locks"),
    ({"share.partition.max.record.locks": "4001"},
     "share.partition.max.record.locks must be less than or equal to group.share.max.partition.max.record.locks"),
    ({"share.auto.offset.reset": "oldest"}, "Unknown auto offset reset strategy: oldest"),
    ({"share.auto.offset.reset": "by_duration:P"}, "Unable to parse duration string 'P'"),
    ({"share.isolation.level": "serializable"},
     "Invalid value serializable for configuration share.isolation.level: String must be one of"),
])
def test_refused_with_kafkas_messages(configs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        gc.validate(configs, cfg())


def test_share_partition_configs_per_group() -> None:
    """Kafka 4.4's GroupConfig share.delivery.count.limit and share.partition.max.record.locks: the broker's
    group.share.* values unless the group overrides them, within the broker's min / max."""
    broker = BrokerConfig({"group.share.delivery.count.limit": "4"})
    gc.validate({"share.delivery.count.limit": "10", "share.partition.max.record.locks": "100"}, broker)
    assert gc.defs(broker)["share.delivery.count.limit"].default == "4"
    v = gc.effective({"share.partition.max.record.locks": "150"}, broker)
    assert (v["share.delivery.count.limit"], v["share.partition.max.record.locks"]) == (4, 150)


def test_share_string_configs() -> None:
    gc.validate({"share.auto.offset.reset": "by_duration:PT1H", "share.isolation.level": "read_committed"}, cfg())
    d = gc.defs(cfg())
    assert (d["share.auto.offset.reset"].default, d["share.isolation.level"].default) == ("latest", "read_uncommitted")
    assert gc.effective_strings({"share.auto.offset.reset": " earliest "}) == {
        "share.auto.offset.reset": "earliest", "share.isolation.level": "read_uncommitted"}


def test_session_must_exceed_heartbeat() -> None:
    broker = BrokerConfig({"group.consumer.min.session.timeout.ms": "1000"})
    with pytest.raises(ConfigError, match="consumer.session.timeout.ms must be greater than consumer.heartbeat"):
        gc.validate({"consumer.session.timeout.ms": "5000", "consumer.heartbeat.interval.ms": "5000"}, broker)
    gc.validate({"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}, cfg())


def test_store_name_holds_any_group_id() -> None:
    assert gc.store_name("a/../b") != gc.store_name("a/..b")
    assert "/" not in gc.store_name("a/../b") and gc.store_name("..") not in (".", "..")
    with pytest.raises(ConfigError):
        gc.store_name("")
    with pytest.raises(ConfigError):
        gc.store_name("x" * (gc.MAX_GROUP_ID_BYTES + 1))


def test_cache_reads_once_until_invalidated_and_stays_bounded() -> None:
    reads: list[str] = []

    def read(g: str) -> dict[str, str]:
        reads.append(g)
        return {"consumer.session.timeout.ms": "50000"} if g == "a" else {}

    c = gc.GroupConfigCache(read)
    assert c.get("a") == {"consumer.session.timeout.ms": "50000"} and c.get("a") and reads == ["a"]
    c.invalidate("a")
    c.get("a")
    assert reads == ["a", "a"]
    for i in range(gc.CACHE_ENTRIES + 5):
        c.get(f"g{i}")
    assert len(c._cache) <= gc.CACHE_ENTRIES
