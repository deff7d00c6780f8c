"""Loopback TCP bandwidth between two processes: the ceiling for a consumer on this machine."""

from __future__ import annotations

import multiprocessing
import socket
import time

CHUNK = 1 << 20
MB = 1024.0 * 1024.0


def _blast(port: int, seconds: float) -> None:
    buf = bytes(CHUNK)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * CHUNK)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s.sendall(buf)


def loopback_mb_per_sec(seconds: float = 1.0, tries: int = 3) -> float:
    """MB/s (2**20 bytes) one process pushes to another over 127.0.0.1 with 1 MB send() calls: the best
    of ``tries`` runs, since a busy machine only ever lowers the figure."""
    return max(_loopback_once(seconds) for _ in range(tries))


def _loopback_once(seconds: float) -> float:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        proc = multiprocessing.get_context("fork").Process(target=_blast, args=(port, seconds), daemon=True)
        proc.start()
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * CHUNK)
            view = memoryview(bytearray(CHUNK))
            total = 0
            n = conn.recv_into(view)
            t0 = time.monotonic()
            while n:
                total += n
                n = conn.recv_into(view)
            dt = time.monotonic() - t0
        proc.join(10)
    return total / MB / dt if dt > 0 else 0.0


if __name__ == "__main__":
    print(f"loopback: {loopback_mb_per_sec():.0f} MB/s")
