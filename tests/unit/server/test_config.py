import pytest

from odradek.config import (
    SRC_DEFAULT,
    SRC_DYNAMIC_TOPIC,
    SRC_STATIC_BROKER,
    BrokerConfig,
    ConfigError,
    parse_listeners,
    read_properties,
    validate_topic_configs,
)


def test_defaults() -> None:
    c = BrokerConfig()
    assert c.listeners == [("PLAINTEXT", "127.0.0.1", 9092)]
    assert [str(p) for p in c.log_dirs] == ["odradek-data"]
    assert c.get("num.partitions") == 1
    assert c.topic_value("retention.ms", {}) == (604800000, SRC_DEFAULT)
    assert c.topic_value("segment.ms", {}) == (604800000, SRC_DEFAULT)


def test_synonyms_and_units() -> None:
    c = BrokerConfig({"log.retention.hours": "1", "log.segment.bytes": "1000"})
    assert c.topic_value("retention.ms", {}) == (3600000, SRC_STATIC_BROKER)
    assert c.topic_value("segment.bytes", {}) == (1000, SRC_STATIC_BROKER)
    c2 = BrokerConfig({"log.retention.hours": "1", "log.retention.ms": "5000"})
    assert c2.topic_value("retention.ms", {})[0] == 5000
    assert c.topic_value("retention.ms", {"retention.ms": "7"}) == (7, SRC_DYNAMIC_TOPIC)
    c.set_dynamic(False, {"log.retention.ms": "99"})
    assert c.topic_value("retention.ms", {})[0] == 99


def test_topic_validation() -> None:
    assert validate_topic_configs({"cleanup.policy": "compact,delete"})["cleanup.policy"] == ["compact", "delete"]
    for bad in ({"nope": "1"}, {"retention.ms": "abc"}, {"cleanup.policy": "shred"}, {"segment.bytes": "1"}):
        with pytest.raises(ConfigError):
            validate_topic_configs(bad)


def test_listeners_and_properties(tmp_path) -> None:
    assert parse_listeners("PLAINTEXT://:9092,INTERNAL://10.0.0.1:9093") == [
        ("PLAINTEXT", "", 9092),
        ("INTERNAL", "10.0.0.1", 9093),
    ]
    with pytest.raises(ConfigError):
        parse_listeners("localhost:9092")
    f = tmp_path / "server.properties"
    f.write_text("# comment\nnode.id=3\nlog.dirs = /tmp/a,/tmp/b\n! other\nlisteners: PLAINTEXT://127.0.0.1:1\n")
    props = read_properties(f)
    assert props == {"node.id": "3", "log.dirs": "/tmp/a,/tmp/b", "listeners": "PLAINTEXT://127.0.0.1:1"}
    c = BrokerConfig(props)
    assert c.node_id == 3 and len(c.log_dirs) == 2
    with pytest.raises(ConfigError):
        BrokerConfig({"num.partitions": "zero"})
