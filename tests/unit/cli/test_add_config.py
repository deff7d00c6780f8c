"""--add-config's argument, read as kafka-configs.sh reads it (cli.add_config, shared by configs_cmd,
quota_configs and scram_direct)."""

from __future__ import annotations

import pytest

from odradek.cli.add_config import parse_add_config


def test_pairs_split_on_commas_outside_brackets() -> None:
    assert parse_add_config("a=1, b = [x,y],SCRAM-SHA-256=[iterations=4096,password=p]") == {
        "a": "1",
        "b": "x,y",
        "SCRAM-SHA-256": "iterations=4096,password=p",
    }


def test_an_item_without_equals_is_refused() -> None:
    with pytest.raises(ValueError, match="k=v pairs"):
        parse_add_config("a=1,oops")
