"""Querying a warehouse that a running job holds.

chDB lets one process open a database directory. While ``odradek pipeline run`` holds the warehouse it
writes ``<warehouse>/.odradek-owner.json`` (its pid and a Unix socket path) and answers SQL on that
socket, through its own chDB session. ``odradek pipeline query`` reads the file: when the owner is alive
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
import tempfile
import threading
from pathlib import Path
from typing import Any

from odradek.pipeline.sink import ChdbSink, SinkError

OWNER_FILE = ".odradek-owner.json"


def _socket_path(warehouse: Path) -> Path:
    p = warehouse / ".odradek-query.sock"
    if len(str(p)) < 100:
        return p
    digest = hashlib.sha1(str(warehouse).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"odradek-query-{digest}.sock"


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

    def __init__(self, sink: ChdbSink, warehouse: Path) -> None:
        self.sink = sink
        self.warehouse = warehouse
        self.path = _socket_path(warehouse)
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.server = _Server(str(self.path), _Handler)
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
