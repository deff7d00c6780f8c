"""Querying a warehouse that a running job holds.

chDB lets one process open a database directory. While ``odradek pipeline run`` holds the warehouse it
writes ``<warehouse>/.odradek-owner.json`` (its pid and a Unix socket path) and answers SQL on that
socket, through its own chDB session. The socket lives in a private (0700) directory of its own (see
``_socket_path``): it is never reachable by another user, not even between ``bind`` and ``chmod``. ``odradek pipeline query`` reads the file: when the owner is alive
it sends the query there, otherwise it opens the directory itself.

Protocol (one request per connection): the client sends one JSON line ``{"sql": ..., "format": ...}``;
the server answers one JSON line ``{"ok": true, "size": N}`` followed by N bytes of output, or
``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import socketserver
import stat
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.pipeline.sink import ChdbSink, SinkError

OWNER_FILE = ".odradek-owner.json"


SOCKET_NAME = "sock"
_SUN_PATH_MAX = 100  # sockaddr_un's sun_path holds 108 bytes on Linux (104 on the BSDs)


class SocketPathError(SinkError):
    pass


def _socket_path(warehouse: Path) -> Path:
    """``<warehouse>/.odradek-query/sock``; when that is too long for a socket address, a directory of
    this user's in the temp directory, named after the warehouse (``odradek-query-<uid>-<digest>``).
    Either directory is private (0700): the socket is never reachable by anyone else, whatever its own
    mode and the umask are at ``bind`` time."""
    p = warehouse / ".odradek-query" / SOCKET_NAME
    if len(str(p)) < _SUN_PATH_MAX:
        return p
    digest = hashlib.sha1(str(warehouse).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"odradek-query-{os.geteuid()}-{digest}" / SOCKET_NAME


def _private_dir(d: Path) -> None:
    """Create ``d`` with mode 0700, or check that the existing ``d`` is a real directory (not a symlink)
    of ours with mode 0700; raise SocketPathError saying what is wrong otherwise. Nothing found there
    is changed or followed."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o700)  # the umask can only take bits away
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise SocketPathError(f"{d} exists and is not a directory (a symlink or a file?): not using it")
    if st.st_uid != os.geteuid():
        raise SocketPathError(f"{d} belongs to uid {st.st_uid}, not to us: not using it")
    if stat.S_IMODE(st.st_mode) != 0o700:
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise SocketPathError(
                f"{d} is accessible to others (mode {stat.S_IMODE(st.st_mode):o}): not using it; remove it")
        os.chmod(d, 0o700)  # ours and closed to others, only missing owner bits


def _clear_stale_socket(p: Path) -> None:
    """A socket left at ``p`` by a job that died is removed; anything else there (a live socket, a file,
    a symlink, a socket of someone else's) raises SocketPathError and is left alone."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        raise SocketPathError(f"{p} exists and is not a socket of ours: not touching it")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(p))
        except ConnectionRefusedError:
            pass  # nobody listens: a dead job's
        except OSError as e:
            raise SocketPathError(f"{p}: cannot tell whether it is in use ({e}): not touching it") from e
        else:
            raise SocketPathError(f"{p} is in use by another process: not touching it")
    os.unlink(p)


def _prepare_socket_path(warehouse: Path) -> tuple[Path, str | None]:
    """(socket path, why the usual path was not used or None). The usual path (``_socket_path``) is used when it is safe; otherwise a fresh
    ``mkdtemp`` directory (0700, unpredictable name): a stray file cannot stop the job from starting."""
    p = _socket_path(warehouse)
    try:
        _private_dir(p.parent)
        _clear_stale_socket(p)
        return p, None
    except (SocketPathError, OSError) as e:
        why = str(e)
    d = Path(tempfile.mkdtemp(prefix="odradek-query-"))  # 0700, O_EXCL-created
    return d / SOCKET_NAME, why


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner(warehouse: Path) -> dict[str, Any] | None:
    """The running job that holds ``warehouse``, or None."""
    try:
        data = json.loads((warehouse / OWNER_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pid = int(data.get("pid", 0))
    if pid <= 0 or not _pid_alive(pid):
        return None
    return dict(data)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        sink: ChdbSink = self.server.sink  # type: ignore[attr-defined]
        try:
            req = json.loads(self.rfile.readline())
            out = sink.query(str(req["sql"]), str(req.get("format", "table")))
        except (SinkError, ValueError, KeyError) as e:
            self.wfile.write(json.dumps({"ok": False, "error": str(e)}).encode() + b"\n")
            return
        self.wfile.write(json.dumps({"ok": True, "size": len(out)}).encode() + b"\n")
        self.wfile.write(out)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class QueryServer:
    """Serves queries on the job's chDB session; records the owner file while it runs."""

    def __init__(self, sink: ChdbSink, warehouse: Path, warn: Callable[[str], None] | None = None) -> None:
        self.sink = sink
        self.warehouse = warehouse
        self.path = _socket_path(warehouse)
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None
        self.warn = warn or (lambda msg: print(msg, file=sys.stderr))

    def start(self) -> None:
        self.path, why = _prepare_socket_path(self.warehouse)
        if why is not None:
            self.warn(f"pipeline: {why}; serving queries on {self.path} instead")
        self.server = _Server(str(self.path), _Handler)  # in a 0700 directory: private from the start
        self.server.sink = self.sink  # type: ignore[attr-defined]
        os.chmod(self.path, 0o600)
        self.thread = threading.Thread(target=self.server.serve_forever, name="odradek-query", daemon=True)
        self.thread.start()
        tmp = self.warehouse / (OWNER_FILE + ".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "socket": str(self.path)}))
        os.replace(tmp, self.warehouse / OWNER_FILE)

    def stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.warehouse / OWNER_FILE).unlink()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        # the private directory the socket was in, now empty (anything else found there stays):
        # a job's temp-directory socket leaves nothing behind in /tmp
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()


def remote_query(sock_path: str, sql: str, fmt: str, timeout: float = 300.0) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(json.dumps({"sql": sql, "format": fmt}).encode() + b"\n")
        f = s.makefile("rb")
        head = json.loads(f.readline())
        if not head.get("ok"):
            raise SinkError(str(head.get("error")))
        return f.read(int(head["size"]))


def run_query(warehouse: Path, sql: str, fmt: str = "table") -> bytes:
    """Through the running job when there is one, else by opening the warehouse."""
    info = owner(warehouse)
    if info is not None:
        try:
            return remote_query(str(info["socket"]), sql, fmt)
        except OSError as e:
            raise SinkError(
                f"the warehouse {warehouse} is held by a running job (pid {info['pid']}) whose query socket "
                f"{info['socket']} does not answer: {e}"
            ) from e
    sink = ChdbSink(warehouse)
    sink.open()
    try:
        return sink.query(sql, fmt)
    finally:
        sink.close()
