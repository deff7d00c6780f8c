"""Tiered storage's configs (KIP-405): Kafka's names, defaults and LogConfig checks with Kafka's messages."""

from __future__ import annotations

import pytest

from odradek.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    check_remote_storage_configs,
)
from odradek.log.config import LogConfig


def _check(topic: dict[str, str], broker: dict[str, str] | None = None, *, was: bool = False) -> None:
    cfg = BrokerConfig(broker or {})
    check_remote_storage_configs(
        lambda n: cfg.topic_value(n, topic)[0],
        system_enabled=bool(cfg.get("remote.log.storage.system.enable")), was_enabled=was,
    )


def test_kafkas_defaults() -> None:
    assert BROKER_CONFIGS["remote.log.storage.system.enable"].default == "false"
    assert BROKER_CONFIGS["remote.log.manager.task.interval.ms"].default == "30000"
    assert BROKER_CONFIGS["remote.log.storage.manager.impl.prefix"].default == "rsm.config."
    assert BROKER_CONFIGS["rlmm.config.remote.log.metadata.topic.num.partitions"].default == "50"
    for name in ("remote.storage.enable", "local.retention.ms", "local.retention.bytes", "remote.log.copy.disable",
                 "remote.log.delete.on.disable"):
        assert TOPIC_CONFIGS[name].implemented
    assert TOPIC_CONFIGS["local.retention.bytes"].default == "-2"
    assert BrokerConfig({"log.local.retention.bytes": "100"}).topic_value("local.retention.bytes", {})[0] == 100


def test_store_names_are_short() -> None:
    BrokerConfig({"remote.log.storage.manager.class.name": "s3"})
    with pytest.raises(ConfigError, match="filesystem and s3"):
        BrokerConfig({"remote.log.storage.manager.class.name": "org.example.Rsm"})


def test_refused_when_the_broker_has_it_off() -> None:
    with pytest.raises(ConfigError) as e:
        _check({"remote.storage.enable": "true"})
    assert str(e.value) == ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                            "with remote log storage.")
    _check({"remote.storage.enable": "true"}, {"remote.log.storage.system.enable": "true"})
    _check({"remote.storage.enable": "false"})


def test_refused_unless_the_cleanup_policy_is_delete() -> None:
    on = {"remote.log.storage.system.enable": "true"}
    for policy in ("compact,delete", "compact", "delete,compact"):  # Kafka 4.4's message
        with pytest.raises(ConfigError, match="^Remote log storage only supports topics with cleanup.policy=delete "
                                              "or cleanup.policy being an empty list.$"):
            _check({"remote.storage.enable": "true", "cleanup.policy": policy}, on)
    _check({"remote.storage.enable": "true", "cleanup.policy": "delete"}, on)


def test_remote_copy_lag_within_local_retention() -> None:
    """Kafka 4.4's validateRemoteCopyLagSize / validateRemoteCopyLagTime: at most the effective local retention."""
    on = {"remote.log.storage.system.enable": "true"}
    with pytest.raises(ConfigError) as e:
        _check({"remote.storage.enable": "true", "local.retention.bytes": "100", "remote.copy.lag.bytes": "101"}, on)
    assert str(e.value) == ("Invalid value 101 for configuration remote.copy.lag.bytes: Value must not exceed "
                            "local.retention.bytes (effective value: 100)")
    with pytest.raises(ConfigError, match="Value must not exceed local.retention.ms \\(effective value: 500\\)"):
        _check({"remote.storage.enable": "true", "retention.ms": "500", "remote.copy.lag.ms": "600"}, on)
    _check({"remote.storage.enable": "true", "local.retention.bytes": "100", "remote.copy.lag.bytes": "100"}, on)
    _check({"remote.storage.enable": "true", "remote.copy.lag.bytes": "1000000"}, on)  # unlimited retention


def test_copy_disabled_needs_local_retention_equal_to_retention() -> None:
    """Kafka 4.4's validateRetentionConfigsWhenRemoteCopyDisabled (KIP-950)."""
    on = {"remote.log.storage.system.enable": "true"}
    with pytest.raises(ConfigError) as e:
        _check({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "retention.bytes": "200",
                "local.retention.bytes": "100"}, on)
    assert str(e.value) == ("When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and "
                            "`retention.bytes` must be set to the identical value because there will be no more "
                            "logs copied to the remote storage.")
    with pytest.raises(ConfigError, match="the `local.retention.ms` and `retention.ms` must be set"):
        _check({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "retention.ms": "2000",
                "local.retention.ms": "1000"}, on)
    _check({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "retention.bytes": "200",
            "local.retention.bytes": "200"}, on)
    _check({"remote.storage.enable": "true", "remote.log.copy.disable": "true", "retention.bytes": "200"}, on)


def test_local_retention_within_retention() -> None:
    on = {"remote.log.storage.system.enable": "true"}
    with pytest.raises(ConfigError) as e:
        _check({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "200"}, on)
    assert str(e.value) == ("Invalid value 200 for configuration local.retention.bytes: Value must not be more "
                            "than retention.bytes property value: 100")
    with pytest.raises(ConfigError, match="Value must not be -1 as retention.ms value is set as 1000"):
        _check({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "-1"}, on)
    _check({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "100"}, on)
    _check({"remote.storage.enable": "true", "retention.bytes": "-1", "local.retention.bytes": "5"}, on)
    # the broker's default counts as the topic's value (Kafka validates the merged configs)
    with pytest.raises(ConfigError, match="local.retention.bytes"):
        _check({"remote.storage.enable": "true", "local.retention.bytes": "200"}, {**on, "log.retention.bytes": "50"})


def test_turning_it_off_needs_delete_on_disable() -> None:
    with pytest.raises(ConfigError, match="^It is invalid to disable remote storage without deleting remote data"):
        _check({"remote.storage.enable": "false"}, was=True)
    _check({"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}, was=True)


def test_effective_local_retention() -> None:
    cfg = LogConfig(retention_ms=1000, retention_bytes=500)
    assert (cfg.local_retention_ms_effective, cfg.local_retention_bytes_effective) == (1000, 500)
    cfg = cfg.replace(local_retention_ms=10, local_retention_bytes=20)
    assert (cfg.local_retention_ms_effective, cfg.local_retention_bytes_effective) == (10, 20)
