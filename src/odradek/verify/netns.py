"""Network partitions for verification runs: each broker in its own Linux network namespace, joined
to this host by a veth pair, with nftables rules inside a namespace cutting its traffic.

Layout for run tag ``T`` (4 hex digits) and broker ``i`` (1..N)::

    namespace  odvT-b<i>            veth odvTh<i> (host side, 10.S.<i>.1/24) <-> odvTn<i> (10.S.<i>.2/24)
    the broker listens on 10.S.<i>.2; its default route is 10.S.<i>.1, so it reaches ZooKeeper (on the
    host, bound to every address) and the other brokers through this host (net.ipv4.ip_forward=1)

``S`` is derived from the tag (100-199), so two runs at once use different subnets. A cut is an
``inet odv`` table in a namespace: an input chain and an output chain dropping the addresses cut off.
Kinds of cut (``partition``):

- ``partition``: the victim and the other brokers cannot reach each other (a minority of one; it
  still reaches ZooKeeper and the clients);
- ``one-way``: the victim receives nothing from the other brokers, which still receive from it;
- ``bridge``: two brokers cannot reach each other, the third reaches both;
- ``isolate``: the victim reaches nothing and nothing reaches it (brokers, ZooKeeper, clients).

Needs root. Each run writes its pid under ``<tmp>/odradek-verify-netns/<tag>`` before it makes its
namespaces; :func:`cleanup_stale` removes the namespaces of runs whose pid is gone and that no process
is in (so two runs at once leave each other alone); :meth:`Net.teardown` removes this run's (the veth
pairs go with them).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "odv"


class NetError(RuntimeError):
    pass


def _run(args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise NetError(f"{' '.join(args)}: {r.stderr.strip() or r.returncode}")
    return r


def namespaces() -> list[str]:
    r = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


OWNERS = Path(tempfile.gettempdir()) / "odradek-verify-netns"  # <tag> holds the pid of the run that made it


def _owner_alive(tag: str) -> bool:
    try:
        pid = int((OWNERS / tag).read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale(log: Callable[[str], None] = print) -> None:
    """Remove the namespaces of runs that died: their owner's pid is gone and no process is in them
    (a run that is setting its namespaces up has none yet, but its pid file is written first)."""
    for ns in namespaces():
        if not (ns.startswith(PREFIX) and "-b" in ns):
            continue
        tag = ns[len(PREFIX):].split("-", 1)[0]
        if _owner_alive(tag) or _run(["ip", "netns", "pids", ns], check=False).stdout.strip():
            continue
        _run(["ip", "netns", "del", ns], check=False)
        with contextlib.suppress(OSError):
            (OWNERS / tag).unlink()
        log(f"removed the stale network namespace {ns}")


@dataclass
class Net:
    tag: str  # 4 hex digits
    brokers: int
    log: Callable[[str], None] = print
    made: list[str] = field(default_factory=list)
    cut: set[int] = field(default_factory=set)

    @property
    def subnet(self) -> int:
        return 100 + int(self.tag, 16) % 100

    def ns(self, i: int) -> str:
        return f"{PREFIX}{self.tag}-b{i}"

    def broker_ip(self, i: int) -> str:
        return f"10.{self.subnet}.{i}.2"

    def host_ip(self, i: int) -> str:
        return f"10.{self.subnet}.{i}.1"

    def exec_prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(i)]

    def setup(self) -> None:
        OWNERS.mkdir(exist_ok=True)
        (OWNERS / self.tag).write_text(f"{os.getpid()}\n")
        _run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        for i in range(1, self.brokers + 1):
            ns, h, n = self.ns(i), f"{PREFIX}{self.tag}h{i}", f"{PREFIX}{self.tag}n{i}"
            _run(["ip", "netns", "add", ns])
            self.made.append(ns)
            _run(["ip", "link", "add", h, "type", "veth", "peer", "name", n])
            _run(["ip", "link", "set", n, "netns", ns])
            _run(["ip", "addr", "add", f"{self.host_ip(i)}/24", "dev", h])
            _run(["ip", "link", "set", h, "up"])
            inside = self.exec_prefix(i)
            _run([*inside, "ip", "addr", "add", f"{self.broker_ip(i)}/24", "dev", n])
            _run([*inside, "ip", "link", "set", n, "up"])
            _run([*inside, "ip", "link", "set", "lo", "up"])
            _run([*inside, "ip", "route", "add", "default", "via", self.host_ip(i)])

    def _drop(self, i: int, inbound: Sequence[str], outbound: Sequence[str]) -> None:
        inside = self.exec_prefix(i)
        _run([*inside, "nft", "add", "table", "inet", "odv"])
        _run([*inside, "nft", "add", "chain", "inet", "odv", "in", "{ type filter hook input priority 0 ; }"])
        _run([*inside, "nft", "add", "chain", "inet", "odv", "out", "{ type filter hook output priority 0 ; }"])
        for a in inbound:
            _run([*inside, "nft", "add", "rule", "inet", "odv", "in", "ip", "saddr", a, "drop"])
        for a in outbound:
            _run([*inside, "nft", "add", "rule", "inet", "odv", "out", "ip", "daddr", a, "drop"])
        self.cut.add(i)

    def partition(self, kind: str, victims: Sequence[int]) -> None:
        """Cut the network as ``kind`` says (see the module docstring); ``victims`` are broker ids:
        one for partition / one-way / isolate, two (the ones that lose each other) for bridge."""
        everyone = range(1, self.brokers + 1)
        if kind == "partition":
            (v,) = victims
            others = [self.broker_ip(j) for j in everyone if j != v]
            self._drop(v, others, others)
        elif kind == "one-way":
            (v,) = victims
            self._drop(v, [self.broker_ip(j) for j in everyone if j != v], [])
        elif kind == "isolate":
            (v,) = victims
            self._drop(v, ["0.0.0.0/0"], ["0.0.0.0/0"])
        elif kind == "bridge":
            a, b = victims
            self._drop(a, [self.broker_ip(b)], [self.broker_ip(b)])
            self._drop(b, [self.broker_ip(a)], [self.broker_ip(a)])
        else:
            raise ValueError(kind)

    def heal(self) -> None:
        for i in sorted(self.cut):
            _run([*self.exec_prefix(i), "nft", "delete", "table", "inet", "odv"], check=False)
        self.cut.clear()

    def teardown(self) -> None:
        self.heal()
        for ns in self.made:
            _run(["ip", "netns", "del", ns], check=False)
        self.made.clear()
        with contextlib.suppress(OSError):
            (OWNERS / self.tag).unlink()
