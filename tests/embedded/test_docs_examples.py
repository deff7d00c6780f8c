"""The example tests of docs/testing.md (confluent-kafka, kafka-python, aiokafka, PySpark, a
two-broker failover), run as written in a project of their own with the odradek plugin."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from .sample_project import passed, run_project
from .test_pytest_plugin import plugin_args

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
EXAMPLE = re.compile(r"<!-- example: (\S+) -->\n```python\n(.*?)```", re.S)


def examples() -> dict[str, str]:
    return dict(EXAMPLE.findall(DOC.read_text()))


@pytest.mark.timeout(600)  # Spark's JVM and a ZooKeeper cluster
def test_docs_examples_pass(tmp_path: Path) -> None:
    files = examples()
    assert {"test_confluent_example.py", "test_kafka_python_example.py", "test_aiokafka_example.py",
            "test_pyspark_example.py", "test_failover_example.py"} <= set(files)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\nodradek_cluster_size = 2\n")
    n_tests = sum(len(re.findall(r"^def test_", text, re.M)) for text in files.values())
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code, out = run_project(sys.executable, tmp_path, env, plugin_args())
    assert code == 0, out
    assert passed(out) == n_tests, out
