"""Connection floods against a fresh Odradek broker: its RSS and CPU while many connections sit idle
(each on a partial request) and while more connections than ``max.connections`` knock.

    python bench/conn_flood.py [--idle 1000] [--flood 300] [--max-connections 100] [--seconds 10]

Prints, per scenario, the connections opened, how many the broker answered, its RSS (from
/proc/<pid>/status) and the CPU seconds it used over the measuring window (utime + stime). The
process's open-file limit must allow the connections (``ulimit -n``); both ends are on loopback.
"""

from __future__ import annotations

import argparse
import os
import resource
import selectors
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import HOST, OdradekBroker  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
# ApiVersions v0, correlation id 7, no client id
API_VERSIONS = struct.pack(">ihhih", 10, 18, 0, 7, -1)
PARTIAL = struct.pack(">i", 100) + b"\x00\x12\x00\x00"  # 4 bytes of a 100-byte request


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def connect(port: int, n: int, first: bytes) -> list[socket.socket]:
    socks = []
    sel = selectors.DefaultSelector()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((HOST, port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE)
    pending = set(socks)
    deadline = time.monotonic() + 30
    while pending and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            pending.discard(key.fileobj)  # type: ignore[arg-type]
            sel.unregister(key.fileobj)
    sel.close()
    for s in socks:
        s.send(first)
    return socks


def answered(socks: list[socket.socket]) -> int:
    n = 0
    for s in socks:
        try:
            if len(s.recv(64)) > 0:
                n += 1
        except (BlockingIOError, ConnectionResetError):
            pass
    return n


def scenario(name: str, overrides: dict[str, str], n: int, first: bytes, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        b = OdradekBroker(Path(tmp), overrides)
        b.start()
        try:
            pid = b.pid
            rss0 = rss_mib(pid)
            socks = connect(b.port, n, first)
            time.sleep(1.0)
            cpu0 = cpu_s(pid)
            time.sleep(seconds)
            cpu = cpu_s(pid) - cpu0
            served = answered(socks)
            print(f"{name:<34} conns={n:<5} answered={served:<5} rss={rss_mib(pid):6.1f} MiB "
                  f"(idle broker {rss0:.1f}) cpu={cpu:.3f} s over {seconds:.0f} s "
                  f"({100 * cpu / seconds:.2f} %)")
            for s in socks:
                s.close()
        finally:
            b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--flood", type=int, default=300)
    ap.add_argument("--max-connections", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.idle + args.flood + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))  # inherited by the broker
    scenario("idle, partial requests", {}, args.idle, PARTIAL, args.seconds)
    scenario(f"flood vs max.connections={args.max_connections}", {"max.connections": str(args.max_connections)},
             args.flood, API_VERSIONS, args.seconds)


if __name__ == "__main__":
    main()
