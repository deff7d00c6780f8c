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
        assert f"### `{d.name}`" in text
        assert d.dynamic in (config.READ_ONLY, config.PER_BROKER, config.CLUSTER_WIDE), d.name


def test_not_implemented_names_are_the_warned_ones() -> None:
    from odradek.config_check import NOT_IMPLEMENTED, unsupported_settings

    names = config_doc.not_implemented()
    assert "num.io.threads" in names and "log.retention.ms" not in names
    warned = unsupported_settings(dict.fromkeys(names, "1"))
    assert [u.name for u in warned] == names and {u.kind for u in warned} == {NOT_IMPLEMENTED}


def test_dynamic_mode_is_what_alter_accepts() -> None:
    BrokerConfig.validate_dynamic("leader.replication.throttled.rate", "1000")
    BrokerConfig.validate_dynamic("log.retention.ms", "1000")
    assert config.BROKER_CONFIGS["listeners"].dynamic == config.READ_ONLY
    with pytest.raises(ConfigError, match="dynamically"):
        BrokerConfig.validate_dynamic("listeners", "PLAINTEXT://:9092")


def test_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(config_doc.render().replace("segment.bytes", "segment.bites", 1))
    run = subprocess.run([sys.executable, "-m", "odradek.config_doc", "--check", str(stale)],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "stale" in run.stderr
    config_doc.main(["--write", str(stale)])
    assert config_doc.main(["--check", str(stale)]) == 0
