"""Start-up checks of the broker's settings (issue 12, item 5): odradek.config_check."""

from __future__ import annotations

import pytest

from odradek import config as config_mod
from odradek.config import T_INT, BrokerConfig, ConfigDef, ConfigError
from odradek.config_check import (
    NOT_IMPLEMENTED,
    UNKNOWN,
    Unsupported,
    check_security,
    check_share_group_bounds,
    check_startup,
    security_protocol_map,
    unsupported_settings,
)


def test_unimplemented_kafka_settings_and_unknown_names() -> None:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "num.partitions": "3",
        "ssl.keystore.location": "/k.pem",  # implemented, also per listener and per mechanism
        "listener.name.internal.ssl.keystore.location": "/i.pem",
        "listener.name.client.scram-sha-256.sasl.jaas.config": "x required;",
        "listener.name.internal.sasl.kerberos.service.name": "kafka",
        "listener.name.internal.num.partitions": "6",  # implemented, but not per listener
        "listener.name.internal.max.connection.creation.rate": "10",
        "sasl.kerberos.service.name": "kafka",
        "num.network.threads": "8",
        "typo.retention.ms": "1",
        "retention.ms": "5",
    }
    assert unsupported_settings(props) == [
        Unsupported("listener.name.internal.num.partitions", NOT_IMPLEMENTED),
        Unsupported("listener.name.internal.sasl.kerberos.service.name", NOT_IMPLEMENTED),
        Unsupported("num.network.threads", NOT_IMPLEMENTED),
        Unsupported("retention.ms", UNKNOWN),
        Unsupported("sasl.kerberos.service.name", NOT_IMPLEMENTED),
        Unsupported("typo.retention.ms", UNKNOWN),
    ]
    messages = check_startup(props)
    assert len(messages) == 6
    assert "'sasl.kerberos.service.name'" in messages[-2] and "not implemented, ignored" in messages[-2]
    assert "'typo.retention.ms'" in messages[-1] and "unknown" in messages[-1]
    assert "log.retention.ms" in messages[3]  # the topic config's broker synonym is suggested


def test_a_setting_is_implemented_once_it_has_a_config_def(monkeypatch: pytest.MonkeyPatch) -> None:
    props = {"max.connections.per.ip": "10"}
    monkeypatch.delitem(config_mod.BROKER_CONFIGS, "max.connections.per.ip", raising=False)
    assert unsupported_settings(props) == [Unsupported("max.connections.per.ip", NOT_IMPLEMENTED)]
    monkeypatch.setitem(config_mod.BROKER_CONFIGS, "max.connections.per.ip",
                        ConfigDef("max.connections.per.ip", T_INT, str(2**31 - 1)))
    assert unsupported_settings(props) == []


def test_every_implemented_broker_config_is_not_warned_about() -> None:
    implemented = {name for name, d in config_mod.BROKER_CONFIGS.items() if d.implemented}
    assert unsupported_settings(dict.fromkeys(implemented, "")) == []
    # Kafka 4.4's configs odradek only accepts and describes are warned about, as not implemented
    accepted = sorted(set(config_mod.BROKER_CONFIGS) - implemented)
    assert "sasl.kerberos.min.time.before.relogin" in accepted
    assert unsupported_settings(dict.fromkeys(accepted, "")) == [Unsupported(n, NOT_IMPLEMENTED) for n in accepted]
    assert check_startup(BrokerConfig().static) == []


def test_security_protocol_map() -> None:
    assert security_protocol_map(None) == {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    assert security_protocol_map("client:plaintext, REPL:PLAINTEXT") == {"CLIENT": "PLAINTEXT", "REPL": "PLAINTEXT"}
    for bad in ("CLIENT", "CLIENT:TLS", ":PLAINTEXT"):
        with pytest.raises(ConfigError, match="listener.security.protocol.map"):
            security_protocol_map(bad)


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"listeners": "PLAINTEXT://:9092"},
        {"listeners": "CLIENT://:9092,REPL://:9093", "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPL:PLAINTEXT",
         "inter.broker.listener.name": "REPL"},
        {"security.inter.broker.protocol": "plaintext"},
        {"authorizer.class.name": ""},
        # clients may use every protocol; an embedded broker has no inter-broker traffic
        {"listeners": "SSL://:9093"},
        {"listeners": "PLAINTEXT://:9092,SASL_SSL://:9094"},
        {"advertised.listeners": "SASL_PLAINTEXT://h:9092"},
        {"listeners": "CLIENT://:9092", "listener.security.protocol.map": "CLIENT:SSL"},
        {"security.inter.broker.protocol": "SASL_SSL"},
        {"zookeeper.connect": "zk:2181", "listeners": "PLAINTEXT://:9092,SSL://:9093",
         "inter.broker.listener.name": "PLAINTEXT"},
        # brokers speak TLS and SASL to each other too (odradek.security.inter_broker)
        {"zookeeper.connect": "zk:2181", "security.inter.broker.protocol": "SASL_SSL"},
        {"zookeeper.connect": "zk:2181", "listeners": "PLAINTEXT://:9092,SSL://:9093",
         "inter.broker.listener.name": "SSL"},
    ],
)
def test_plaintext_is_accepted(props: dict[str, str]) -> None:
    check_security(props)


@pytest.mark.parametrize(
    ("props", "match"),
    [
        ({"listeners": "CLIENT://:9092"}, "No security protocol defined for listener CLIENT"),
        ({"security.inter.broker.protocol": "PLAINTEXT", "inter.broker.listener.name": "PLAINTEXT"},
         "Only one of inter.broker.listener.name and security.inter.broker.protocol"),
        ({"authorizer.class.name": "com.example.MyAuthorizer"}, "authorizer.class.name="),
    ],
)
def test_security_that_is_not_built_is_refused(props: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        check_startup(props)


def test_per_listener_settings_are_broker_settings() -> None:
    """Every setting read per listener is one the broker implements (a typo here would warn for a
    setting that is applied)."""
    from odradek.config import BROKER_CONFIGS
    from odradek.config_check import PER_LISTENER_SETTINGS

    assert set(BROKER_CONFIGS) >= PER_LISTENER_SETTINGS


@pytest.mark.parametrize(("props", "message"), [
    ({"group.share.delivery.count.limit": "10", "group.share.max.delivery.count.limit": "5"},
     "group.share.max.delivery.count.limit must be greater than or equal to group.share.delivery.count.limit"),
    ({"group.share.delivery.count.limit": "2", "group.share.min.delivery.count.limit": "3"},
     "group.share.delivery.count.limit must be greater than or equal to group.share.min.delivery.count.limit"),
    ({"group.share.partition.max.record.locks": "5000"},
     "group.share.max.partition.max.record.locks must be greater than or equal to "
     "group.share.partition.max.record.locks"),
    ({"group.share.partition.max.record.locks": "100", "group.share.min.partition.max.record.locks": "200"},
     "group.share.partition.max.record.locks must be greater than or equal to "
     "group.share.min.partition.max.record.locks"),
    ({"group.share.record.lock.duration.ms": "10000"},
     "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"group.share.record.lock.duration.ms": "70000"},
     "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms"),
    ({"group.share.max.size": "1000", "group.share.max.share.sessions": "999"},
     "group.share.max.share.sessions must be greater than or equal to group.share.max.size"),
])
def test_share_group_bounds_refused_with_kafkas_messages(props: dict[str, str], message: str) -> None:
    """Kafka 4.4's ShareGroupConfig.validate: a broker whose share-group settings lie outside their bounds does
    not start."""
    with pytest.raises(ConfigError, match=f"^{message}$"):
        check_share_group_bounds(BrokerConfig(props).get)


def test_share_group_bounds_default_and_at_the_edges() -> None:
    check_share_group_bounds(BrokerConfig({}).get)
    check_share_group_bounds(BrokerConfig({"group.share.delivery.count.limit": "10",
                                           "group.share.max.delivery.count.limit": "10"}).get)
