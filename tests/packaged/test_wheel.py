"""The package as a user gets it: ``python -m build`` makes an sdist and a wheel; the wheel, installed
with pip into a new virtual environment (its dependencies from the package index pip is configured
with), gives the ``odradek`` command and the pytest plugin; a small pytest project written here
(tests/embedded/sample_project.py) passes against it with confluent-kafka and aiokafka, including a
kill -9/restart test and a two-broker failover test. A wheel built without a C compiler works on the
pure-Python fallback.

Needs the package index (pip install) and Debian's ZooKeeper; either missing is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from embedded.sample_project import passed, run_project, write_project

import odradek

REPO = Path(__file__).resolve().parents[2]
VERSION = odradek.__version__


def run(cmd: list[str], timeout: float = 600, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                          env=env, cwd=cwd)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, f"{cmd} exited with {proc.returncode}:\n{out[-6000:]}"
    return out


def clean_env() -> dict[str, str]:
    """This process's environment without what points at the checkout or at coverage."""
    return {k: v for k, v in os.environ.items()
            if k != "PYTHONPATH" and not k.startswith("COVERAGE_") and k != "VIRTUAL_ENV"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """sdist and wheel built from a copy of the sources (no build output lands in the checkout)."""
    base = tmp_path_factory.mktemp("pkg")
    src = base / "src-copy"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "src", src / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info", "*.pyc"))
    out = base / "dist"
    run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], env=clean_env())
    yield out


def test_sdist_and_wheel_metadata(dist: Path) -> None:
    sdist = dist / f"odradek-{VERSION}.tar.gz"
    wheels = list(dist.glob(f"odradek-{VERSION}-*.whl"))
    assert sdist.is_file() and len(wheels) == 1
    with tarfile.open(sdist) as t:
        names = set(t.getnames())
    assert f"odradek-{VERSION}/src/odradek/_speedups.c" in names
    assert f"odradek-{VERSION}/LICENSE" in names
    with zipfile.ZipFile(wheels[0]) as z:
        meta = z.read(f"odradek-{VERSION}.dist-info/METADATA").decode()
        eps = z.read(f"odradek-{VERSION}.dist-info/entry_points.txt").decode()
        files = z.namelist()
    assert f"Version: {VERSION}" in meta.splitlines()
    assert "License-Expression: Apache-2.0" in meta.splitlines()
    assert "[pytest11]\nodradek = odradek.pytest_plugin" in eps
    assert "odradek = odradek.cli.main:main" in eps
    assert "odradek/pytest_plugin.py" in files and "odradek/embedded/broker.py" in files
    # the web console: its pages, stylesheet and script are modules of the package (no CDN, no build)
    assert {"odradek/console/app.py", "odradek/console/assets.py", "odradek/console/pages.py"} <= set(files)
    assert not any(f.endswith(".c") for f in files)
    assert "odradek/py.typed" in files  # PEP 561: type checkers read the package's annotations
    assert f"odradek-{VERSION}/src/odradek/py.typed" in names


@pytest.mark.timeout(900)  # pip install from the index, then a project with a cluster
def test_installed_wheel_runs_a_user_project(dist: Path, tmp_path: Path) -> None:
    wheel = next(dist.glob(f"odradek-{VERSION}-*.whl"))
    venv = tmp_path / "venv"
    env = clean_env()
    run([sys.executable, "-m", "venv", str(venv)], env=env)
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", str(wheel), "pytest", "aiokafka"], timeout=900, env=env)
    assert run([str(venv / "bin" / "odradek"), "--version"], env=env).strip() == f"odradek {VERSION}"
    where = run([py, "-c", "import odradek, odradek.pytest_plugin; print(odradek.__file__)"], env=env, cwd=tmp_path)
    assert where.strip().startswith(str(venv)), where

    project = tmp_path / "project"
    n = write_project(project, cluster=True)
    code, out = run_project(py, project, env)
    assert code == 0, out
    assert passed(out) == n, out


def test_wheel_without_a_compiler_uses_the_pure_python_fallback(dist: Path, tmp_path: Path) -> None:
    sdist = dist / f"odradek-{VERSION}.tar.gz"
    env = {**clean_env(), "CC": "false", "LDSHARED": "false"}
    out = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(sdist)], env=env)
    wheel = next(out.glob(f"odradek-{VERSION}-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        assert not any(".so" in f for f in z.namelist())
    target = tmp_path / "site"
    run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)], env=env)
    check = (
        "import odradek.protocol.records as r, odradek\n"
        f"assert odradek.__file__.startswith({str(target)!r}), odradek.__file__\n"
        "assert r._count_records.__module__ == 'odradek.protocol.records', r._count_records\n"
        "from odradek import EmbeddedBroker\n"
        "with EmbeddedBroker() as b:\n"
        "    b.create_topic('t')\n"
        "print('ok')\n"
    )
    # the dependencies come from this interpreter's environment; the package from the wheel
    assert run([sys.executable, "-c", check], env={**env, "PYTHONPATH": str(target)}, cwd=tmp_path).strip().endswith("ok")
