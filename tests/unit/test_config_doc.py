"""docs/configuration.md is what odradek.config_doc renders from the config definitions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odradek import config, config_doc
from odradek.config import BrokerConfig, ConfigError

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_committed_reference_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == config_doc.render(), (
        "docs/configuration.md is stale: run python -m odradek.config_doc --write docs/configuration.md"
    )


def test_every_definition_is_documented() -> None:
    text = config_doc.render()
    for d in [*config.BROKER_CONFIGS.values(), *config.TOPIC_CONFIGS.values()]:
        assert len(d.doc) > 20, d.name  # a sentence, not a placeholder
        # an implemented config has its own entry, one odradek only accepts a row of its table
        assert (f"### `{d.name}`" if d.implemented else f"`{d.name}`") in text
        assert d.dynamic in (config.READ_ONLY, config.PER_BROKER, config.CLUSTER_WIDE), d.name


def test_not_implemented_names_are_the_warned_ones() -> None:
    from odradek.config_check import NOT_IMPLEMENTED, unsupported_settings

    names = config_doc.not_implemented()
    assert "zookeeper.ssl.protocol" in names and "log.retention.ms" not in names
    # Kafka 4.4's configs odradek does not act on have a ConfigDef, and are warned about all the same
    accepted = sorted(n for n, d in config.BROKER_CONFIGS.items() if not d.implemented)
    assert "num.io.threads" in accepted and "num.io.threads" not in names
    warned = unsupported_settings(dict.fromkeys(names + accepted, "1"))
    assert [u.name for u in warned] == sorted(names + accepted) and {u.kind for u in warned} == {NOT_IMPLEMENTED}


def test_dynamic_mode_is_what_alter_accepts() -> None:
    BrokerConfig.validate_dynamic({"leader.replication.throttled.rate": "1000"}, per_broker=False)
    BrokerConfig.validate_dynamic({"log.retention.ms": "1000"}, per_broker=False)
    assert config.BROKER_CONFIGS["listeners"].dynamic == config.READ_ONLY
    with pytest.raises(ConfigError, match=r"^Cannot update these configs dynamically: \[listeners\]$"):
        BrokerConfig.validate_dynamic({"listeners": "PLAINTEXT://:9092"}, per_broker=True)


def test_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(config_doc.render().replace("segment.bytes", "segment.bites", 1))
    run = subprocess.run([sys.executable, "-m", "odradek.config_doc", "--check", str(stale)],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "stale" in run.stderr
    config_doc.main(["--write", str(stale)])
    assert config_doc.main(["--check", str(stale)]) == 0
