"""Config values parsed once per raw text (odradek.config.parse_value): a scalar's value is kept and
returned again, a list is parsed afresh for every caller, an invalid text is refused every time, and a
dynamic change is seen at once."""

from __future__ import annotations

import pytest

from odradek import config as config_mod
from odradek.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigError, parse_value


def test_a_scalar_is_parsed_once_per_raw_text(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str | None] = []
    real = config_mod._parse

    def counting(d: config_mod.ConfigDef, raw: str | None) -> object:
        calls.append(raw)
        return real(d, raw)

    monkeypatch.setattr(config_mod, "_parse", counting)
    config_mod._PARSED.clear()
    d = BROKER_CONFIGS["replica.fetch.max.bytes"]
    assert [parse_value(d, " 2048 ") for _ in range(3)] == [2048, 2048, 2048]
    assert calls == [" 2048 "]
    assert parse_value(d, "4096") == 4096 and calls == [" 2048 ", "4096"]
    assert parse_value(d, None) is None


def test_a_list_is_a_new_list_for_every_caller() -> None:
    d = TOPIC_CONFIGS["follower.replication.throttled.replicas"]
    first = parse_value(d, "0:1, 1:2")
    first.append("changed by a caller")
    assert parse_value(d, "0:1, 1:2") == ["0:1", "1:2"]


def test_an_invalid_value_is_refused_every_time() -> None:
    d = BROKER_CONFIGS["replica.fetch.max.bytes"]
    for _ in range(2):
        with pytest.raises(ConfigError):
            parse_value(d, "lots")


def test_a_dynamic_change_is_read_at_once() -> None:
    c = BrokerConfig({"broker.id": "1"})
    assert c.get("follower.replication.throttled.rate") == int(BROKER_CONFIGS["follower.replication.throttled.rate"].default or 0)
    c.set_dynamic(True, {"follower.replication.throttled.rate": "1000"})
    assert c.get("follower.replication.throttled.rate") == 1000
    c.set_dynamic(True, {})
    c.set_dynamic(False, {"follower.replication.throttled.rate": "2000"})
    assert c.get("follower.replication.throttled.rate") == 2000
