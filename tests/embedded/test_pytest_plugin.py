"""odradek.pytest_plugin on a user's project (tests/embedded/sample_project.py), from this checkout.

The installed wheel runs the same project in tests/packaged/test_wheel.py, cluster test included."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

from odradek.pytest_plugin import parse_broker_config, topic_name

from .sample_project import passed, run_project, write_project


def plugin_args() -> list[str]:
    """``-p odradek.pytest_plugin`` unless the installed package already registers it (pytest11)."""
    registered = any(ep.value == "odradek.pytest_plugin" for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if registered else ["-p", "odradek.pytest_plugin"]


def test_sample_project_passes_with_the_plugin(tmp_path: Path) -> None:
    project = tmp_path / "project"
    n = write_project(project)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code, out = run_project(sys.executable, project, env, plugin_args())
    assert code == 0, out
    assert passed(out) == n, out


def test_a_failing_user_test_fails(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_project(project)
    (project / "test_wrong.py").write_text(
        "def test_wrong(kafka_broker, kafka_topic):\n    assert kafka_topic == 'not-the-name'\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code, out = run_project(sys.executable, project, env, [*plugin_args(), "test_wrong.py"])
    assert code == 1 and "1 failed" in out, out


def test_parse_broker_config() -> None:
    assert parse_broker_config(["a.b=1  c=2 # comment", "", "d=x=y"]) == {"a.b": "1", "c": "2", "d": "x=y"}
    with pytest.raises(pytest.UsageError):
        parse_broker_config(["novalue"])


def test_topic_names_are_legal_and_unique() -> None:
    a = topic_name("tests/test_x.py::test_y[param 1/π]")
    b = topic_name("tests/test_x.py::test_y[param 1/π]")
    assert a != b
    assert all(c.isalnum() or c in "._-" for c in a) and len(a) <= 249
