"""Hostile names and a hostile file system against the pipeline (issue 12, item 11): identifier quoting,
the query socket's permissions and its stale-file handling, and the CLI without the pipeline extra.

Needs chDB (the pipeline extra) but neither Spark nor a broker."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.pipeline import server as qserver
from odradek.pipeline.config import ConfigError, parse
from odradek.pipeline.sink import SinkError, q
from odradek.pipeline.warehouse import parse as parse_dw

HOSTILE_NAMES = [
    "a\\` , 2 AS b --",  # with backticks doubled only, `a\`` closes after "a`" and ", 2 AS b" is SQL
    "a\\",  # a trailing backslash escaped the closing backtick
    "x`y",
    "x``y",
    "\\`\\`",
    "t; DROP DATABASE ods; --",
    "ünï cødé",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_quoted_identifier_is_exactly_the_name(name: str) -> None:
    import chdb

    out = chdb.query(f"SELECT 1 AS {q(name)}", "JSONEachRow").bytes()
    assert json.loads(out) == {name: 1}


def test_quoting_refuses_nul() -> None:
    with pytest.raises(SinkError):
        q("a\x00b")


def _cfg(dw: dict[str, Any]) -> dict[str, Any]:
    return {
        "broker": {"bootstrap_servers": "127.0.0.1:9092"},
        "warehouse": {"path": "wh", "checkpoint_dir": "ck"},
        "ods": [{"table": "orders", "topics": ["o"], "key": ["id"],
                 "columns": {"id": "Int64", "status": "String", "amount": "Float64"}}],
        "dw": dw,
    }


@pytest.mark.parametrize("dw", [
    {"history": [{"name": "h`) ENGINE=Memory --", "ods": "orders"}]},
    {"history": [{"name": "h", "ods": "orders"}],
     "summing": [{"name": "s\\", "history": "h", "key": {"day": "1"}, "sums": {"n": "sign"}}]},
    {"history": [{"name": "h", "ods": "orders"}],
     "summing": [{"name": "s", "history": "h", "key": {"d`ay": "1"}, "sums": {"n": "sign"}}]},
    {"history": [{"name": "h", "ods": "orders"}],
     "summing": [{"name": "s", "history": "h", "key": {"day": "1"}, "sums": {"n\\": "sign"}}]},
    {"entity": [{"name": "e e", "match": "id", "sources": [{"ods": "orders", "columns": {"s": "status"}}]}]},
    {"entity": [{"name": "e", "match": "id", "sources": [{"ods": "orders", "columns": {"s`": "status"}}]}]},
    {"entity": [{"name": "e", "match": "id", "sources": [{"ods": "orders", "columns": {"s": "nope`"}}]}]},
])
def test_warehouse_names_are_checked(tmp_path: Path, dw: dict[str, Any]) -> None:
    cfg = parse(_cfg(dw), tmp_path)
    with pytest.raises(ConfigError):
        parse_dw(cfg)


def test_good_warehouse_names_still_parse(tmp_path: Path) -> None:
    cfg = parse(_cfg({"history": [{"name": "order_history", "ods": "orders"}],
                      "summing": [{"name": "daily", "history": "order_history", "key": {"day": "1"},
                                   "sums": {"n": "sign"}}],
                      "entity": [{"name": "order_e", "match": "id",
                                  "sources": [{"ods": "orders", "columns": {"s": "status"}}]}]}), tmp_path)
    wh = parse_dw(cfg)
    assert [h.name for h in wh.histories] == ["order_history"]


# ---------------------------------------------------------------------------------------- the query socket


class _FakeSink:
    def query(self, sql: str, fmt: str = "table") -> bytes:
        return f"{fmt}:{sql}".encode()


def _long_warehouse(tmp_path: Path) -> Path:
    wh = tmp_path / ("w" * 120)  # too long for a socket path inside it: the fallback in the temp dir is used
    wh.mkdir()
    return wh


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # a short directory of its own under /tmp: tmp_path can be too long for a socket path in it (pytest-xdist
    # adds a per-worker level), which is exactly what the fallback must avoid
    t = Path(tempfile.mkdtemp(prefix="odr-", dir="/tmp"))
    monkeypatch.setattr("tempfile.tempdir", str(t))
    yield t
    shutil.rmtree(t, ignore_errors=True)


def _watch_modes(path_parent: Path, stop: threading.Event, seen: list[tuple[str, int]]) -> None:
    """Record the mode of every socket that appears under ``path_parent`` (polling as fast as it can)."""
    while not stop.is_set():
        for root, dirs, files in os.walk(path_parent):
            for n in dirs + files:
                p = os.path.join(root, n)
                try:
                    st = os.lstat(p)
                except FileNotFoundError:
                    continue
                if stat.S_ISSOCK(st.st_mode):
                    seen.append((p, st.st_mode & 0o777))


@pytest.mark.parametrize("long_path", [False, True])
def test_socket_is_never_reachable_by_others(tmp_path: Path, private_tmp: Path, long_path: bool) -> None:
    wh = _long_warehouse(tmp_path) if long_path else (tmp_path / "wh")
    wh.mkdir(exist_ok=True)
    old = os.umask(0)  # the worst umask: whatever is created without an explicit mode is world-writable
    try:
        seen: list[tuple[str, int]] = []
        stop = threading.Event()
        watcher = threading.Thread(target=_watch_modes, args=(private_tmp if long_path else wh, stop, seen))
        watcher.start()
        srv = qserver.QueryServer(_FakeSink(), wh)  # type: ignore[arg-type]
        try:
            srv.start()
            time.sleep(0.05)
        finally:
            stop.set()
            watcher.join()
        sock = Path(json.loads((wh / qserver.OWNER_FILE).read_text())["socket"])
        try:
            # every directory from the socket up to (not including) the shared parent is ours and 0700
            d = sock.parent
            assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700, oct(os.lstat(d).st_mode)
            assert os.lstat(d).st_uid == os.geteuid()
            assert qserver.run_query(wh, "SELECT 1", "csv") == b"csv:SELECT 1"
        finally:
            srv.stop()
        assert not sock.exists()
        assert not sock.parent.exists()  # the private directory goes with the socket (nothing left in /tmp)
    finally:
        os.umask(old)
    # while it existed, the socket was only ever in the private directory (whatever its own mode was)
    assert seen, "the watcher saw no socket"
    for p, _mode in seen:
        assert Path(p).parent == sock.parent, p


def _digest(wh: Path) -> str:
    return hashlib.sha1(str(wh).encode()).hexdigest()[:16]


def _foreign(p: Path) -> None:
    """Make ``p`` someone else's: another owner when we may chown (root), else world-writable."""
    if os.geteuid() == 0:
        os.chown(p, 65534, 65534, follow_symlinks=False)
    elif not p.is_symlink():
        os.chmod(p, 0o777)


def test_stale_socket_of_a_dead_job_is_removed(tmp_path: Path, private_tmp: Path) -> None:
    wh = _long_warehouse(tmp_path)
    first = qserver.QueryServer(_FakeSink(), wh)  # type: ignore[arg-type]
    first.start()
    sock = first.path
    # the job dies without stop(): its socket file stays behind, nobody listens on it
    assert first.server is not None
    first.server.shutdown()
    first.server.server_close()
    assert sock.exists()
    second = qserver.QueryServer(_FakeSink(), wh)  # type: ignore[arg-type]
    second.start()
    try:
        assert second.path == sock
        assert qserver.run_query(wh, "SELECT 2", "tsv") == b"tsv:SELECT 2"
    finally:
        second.stop()


@pytest.mark.parametrize("kind", ["legacy-file", "symlinked-dir", "foreign-dir", "open-dir", "live-socket"])
def test_foreign_thing_at_the_fallback_path_is_never_used_or_followed(
        tmp_path: Path, private_tmp: Path, kind: str) -> None:
    wh = _long_warehouse(tmp_path)
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    legacy = private_tmp / f"odradek-query-{_digest(wh)}.sock"  # where the socket used to be
    fallback = private_tmp / f"odradek-query-{os.geteuid()}-{_digest(wh)}"  # the private directory now
    listener = None
    if kind == "legacy-file":
        legacy.write_text("left here by someone")
        _foreign(legacy)
    elif kind == "symlinked-dir":
        fallback.symlink_to(attacker)
    elif kind == "foreign-dir":
        fallback.mkdir()
        _foreign(fallback)
    elif kind == "open-dir":  # ours, but others could have put things in it
        fallback.mkdir()
        os.chmod(fallback, 0o777)
        (fallback / "sock").symlink_to(victim)
    else:  # another process of ours serves on it: not to be unlinked
        fallback.mkdir(mode=0o700)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(fallback / "sock"))
        listener.listen()
    srv = qserver.QueryServer(_FakeSink(), wh)  # type: ignore[arg-type]
    try:
        srv.start()  # the job starts whatever is there
        try:
            assert qserver.run_query(wh, "SELECT 3", "csv") == b"csv:SELECT 3"
            d = srv.path.parent
            st = os.lstat(d)
            assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
            assert attacker not in srv.path.resolve().parents
        finally:
            srv.stop()
        if listener is not None:  # the other server's socket is still there and still answers
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.connect(str(fallback / "sock"))
    finally:
        if listener is not None:
            listener.close()
    assert victim.read_text() == "precious"
    assert list(attacker.iterdir()) == []
    if kind == "legacy-file":
        assert legacy.read_text() == "left here by someone"
    if kind == "open-dir":
        assert (fallback / "sock").is_symlink()


# ---------------------------------------------------------------------------------------- the CLI without the extra

_BLOCKER = """
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


@pytest.mark.parametrize("blocked,argv", [
    (("pyspark",), ["pipeline", "run", "--config", "CFG", "--available-now"]),
    (("pyspark", "chdb", "pyarrow", "pandas"), ["pipeline", "run", "--config", "CFG"]),
    (("chdb",), ["pipeline", "query", "--config", "CFG", "SELECT 1"]),
    (("pyarrow",), ["pipeline", "query", "--config", "CFG", "SELECT 1"]),
    (("pyspark",), ["pipeline", "demo", "--dir", "DIR"]),
])
def test_cli_without_the_pipeline_extra_says_what_to_install(
        tmp_path: Path, blocked: tuple[str, ...], argv: list[str]) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCKER.format(blocked=set(blocked)))
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(textwrap.dedent("""
        [broker]
        bootstrap_servers = "127.0.0.1:1"
        [warehouse]
        path = "wh"
        checkpoint_dir = "ck"
        [[ods]]
        table = "t"
        topics = ["t"]
        key = ["id"]
        [ods.columns]
        id = "Int64"
    """))
    argv = [a.replace("CFG", str(cfg)).replace("DIR", str(tmp_path / "demo")) for a in argv]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    # the blocker works: the module really cannot be imported in that environment
    probe = subprocess.run([sys.executable, "-c", f"import {blocked[0]}"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr
    res = subprocess.run([sys.executable, "-m", "odradek", *argv], env=env, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    assert "pip install 'odradek[pipeline]'" in res.stderr, res.stderr
    assert any(m in res.stderr for m in blocked), res.stderr
