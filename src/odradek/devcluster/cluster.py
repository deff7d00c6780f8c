"""A ZooKeeper-mode cluster of N broker processes on this machine, with Debian's ZooKeeper: what
``odradek dev-cluster`` (odradek.cli.dev_cluster_cmd) and ``odradek verify run``
(odradek.verify.runner) start. The layout and ports are described in the command's module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
DEFAULT_CHROOT = "/odradek"


class DevClusterError(Exception):
    """A start-up failure reported as ``Error: ...`` with exit code 1."""


# ---------------------------------------------------------------------------- pure helpers

def parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise DevClusterError(f"--override expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def split_zookeeper(raw: str | None, chroot: str | None) -> tuple[str | None, str]:
    """``host:port[,host:port][/chroot]`` → (hosts, chroot); ``--chroot`` wins over a path."""
    hosts: str | None = None
    path = ""
    if raw:
        hosts, sep, rest = raw.partition("/")
        path = sep + rest if sep else ""
    root = chroot or path or DEFAULT_CHROOT
    root = "/" + root.strip("/")
    if root == "/":
        raise DevClusterError("the chroot must not be / (brokers of other clusters may live there)")
    return hosts, root


def broker_overrides(broker_id: int, port: int, log_dir: Path, zk_connect: str, n: int,
                     user: dict[str, str], internal_port: int | None = None,
                     http_port: int | None = None) -> dict[str, str]:
    """The overrides of broker ``broker_id``: listeners, log.dirs, broker.id, zookeeper.connect,
    internal topics' replication capped at N, a short controlled-shutdown back-off, its own HTTP listener
    (``http_port``; None turns it off); then ``user``.
    With ``internal_port``: EXTERNAL and INTERNAL listeners, INTERNAL the inter-broker one."""
    split = {
        "listeners": f"EXTERNAL://{HOST}:{port},INTERNAL://{HOST}:{internal_port}",
        "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    } if internal_port is not None else {"listeners": f"PLAINTEXT://{HOST}:{port}"}
    ov = {
        "broker.id": str(broker_id),
        **split,
        "log.dirs": str(log_dir),
        "zookeeper.connect": zk_connect,
        "offsets.topic.replication.factor": str(min(3, n)),
        "transaction.state.log.replication.factor": str(min(3, n)),
        "controlled.shutdown.retry.backoff.ms": "1000",
        "http.listeners": f"http://{HOST}:{http_port}" if http_port else "",
    }
    ov.update(user)
    return ov


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker's listener does
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


# ---------------------------------------------------------------------------- processes

@dataclass
class BrokerProc:
    broker_id: int
    port: int
    dir: Path
    overrides: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    reported_exit: bool = False
    host: str = HOST  # the address it listens on and clients reach it at
    prefix: list[str] = field(default_factory=list)  # runs the broker through it (e.g. ip netns exec NS)
    env: dict[str, str] = field(default_factory=dict)  # added to the environment (e.g. libfaketime's)
    module: str = "odradek"  # python -m MODULE broker ... (odradek.verify.faketime_boot under libfaketime)

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        args = [*self.prefix, sys.executable, "-m", self.module, "broker"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        return args

    def start(self) -> None:
        from odradek.devcluster.zookeeper import tied_to_parent

        cmd, preexec = tied_to_parent(self.command())

        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.dir,
                start_new_session=True, preexec_fn=preexec, env={**os.environ, **self.env} if self.env else None,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout: float) -> tuple[int | None, bool]:
        """SIGTERM and wait: (exit code, killed) — SIGKILL after ``timeout`` seconds."""
        if self.proc is None:
            return None, False
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout), False
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):  # its threads' stacks into its log
                    self.proc.send_signal(signal.SIGUSR1)  # (odradek.cli.broker_cmd's faulthandler)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(2)
                self.proc.kill()
                self.proc.wait()
                return self.proc.returncode, True
        return self.proc.returncode, False


@dataclass
class DevCluster:
    args: argparse.Namespace
    data_dir: Path
    zk_hosts: str
    chroot: str
    brokers: list[BrokerProc] = field(default_factory=list)
    zk: Any = None  # ZooKeeperServer when started here
    stop_requested: threading.Event = field(default_factory=threading.Event)
    zk_reported: bool = False

    @property
    def zk_connect(self) -> str:
        return self.zk_hosts + self.chroot

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    # -- ZooKeeper reads (kazoo, short-lived sessions)
    def _kazoo(self, hosts: str, timeout: float = 15.0) -> Any:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=hosts, timeout=10.0, connection_retry={"max_tries": -1, "max_delay": 1})
        try:
            zk.start(timeout=timeout)
        except Exception as e:
            with contextlib.suppress(Exception):
                zk.stop()
                zk.close()
            raise DevClusterError(f"cannot connect to ZooKeeper at {hosts}: {e or type(e).__name__}") from None
        return zk

    def prepare_chroot(self) -> dict[int, int]:
        """Create the chroot; the czxid of registrations of our ids already there (a previous run's,
        not yet expired: the brokers wait for them to expire)."""
        zk = self._kazoo(self.zk_hosts)
        try:
            zk.ensure_path_async(self.chroot).get(timeout=15)
            stale: dict[int, int] = {}
            for b in self.brokers:
                stat = zk.exists_async(f"{self.chroot}/brokers/ids/{b.broker_id}").get(timeout=15)
                if stat is not None:
                    stale[b.broker_id] = int(stat.czxid)
            return stale
        finally:
            zk.stop()
            zk.close()

    def registration(self, zk: Any) -> tuple[dict[int, int], int | None]:
        """Registered broker ids with the czxid of their znodes, and the controller's id."""
        ids: dict[int, int] = {}
        for b in self.brokers:
            try:
                stat = zk.exists_async(f"/brokers/ids/{b.broker_id}").get(timeout=5)
            except Exception:
                stat = None
            if stat is not None:
                ids[b.broker_id] = int(stat.czxid)
        controller: int | None = None
        try:
            data, _ = zk.get_async("/controller").get(timeout=5)
            controller = int(json.loads(data)["brokerid"]) if data else None
        except Exception:
            controller = None
        return ids, controller

    def current_controller(self) -> int | None:
        if self.zk is not None and (self.zk.proc is None or self.zk.proc.poll() is not None):
            return None
        try:
            zk = self._kazoo(self.zk_connect, timeout=5.0)
        except DevClusterError:
            return None
        try:
            return self.registration(zk)[1]
        finally:
            zk.stop()
            zk.close()

    # -- lifecycle
    def start(self) -> int | None:
        """Start everything and wait for registration: the controller's id (None when a signal
        interrupted the start)."""
        if self.zk is not None:
            print(f"Starting ZooKeeper on {self.zk.connect} ...", flush=True)
            self.zk.start(wait=False, new_session=True, tie_to_parent=True)
            self._wait_zookeeper()
        if self.stop_requested.is_set():
            return None
        stale = self.prepare_chroot()
        if stale:
            print(f"Broker id(s) {','.join(map(str, sorted(stale)))} still registered under {self.zk_connect} "
                  "(a previous run?): the brokers wait for those registrations to expire.", flush=True)
        print(f"Starting {len(self.brokers)} brokers ...", flush=True)
        for b in self.brokers:
            b.start()
        return self._wait_registered(stale)

    def _wait_zookeeper(self) -> None:
        from odradek.devcluster.zookeeper import ZooKeeperError

        deadline = time.monotonic() + 60.0
        while not self.stop_requested.is_set():
            try:
                self.zk.wait_serving(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
                return
            except ZooKeeperError as e:
                if self.zk.proc is not None and self.zk.proc.poll() is not None:
                    raise DevClusterError(f"ZooKeeper failed to start (see {self.zk.dir}):\n{e}") from None
                if time.monotonic() >= deadline:
                    raise DevClusterError(str(e)) from None

    def _wait_registered(self, stale: dict[int, int]) -> int | None:
        zk = self._kazoo(self.zk_connect)
        try:
            deadline = time.monotonic() + self.args.start_timeout
            while not self.stop_requested.is_set():
                for b in self.brokers:
                    if not b.alive():
                        code = b.proc.returncode if b.proc is not None else None
                        raise DevClusterError(
                            f"broker {b.broker_id} exited with code {code} during start-up "
                            f"(log: {b.log_path}):\n{b.log_tail()}")
                ids, controller = self.registration(zk)
                fresh = [bid for bid, czxid in ids.items() if stale.get(bid) != czxid]
                if len(fresh) == len(self.brokers) and controller in ids:
                    return controller
                if time.monotonic() >= deadline:
                    raise DevClusterError(
                        f"after {self.args.start_timeout:.0f}s: {len(fresh)} of {len(self.brokers)} brokers "
                        f"registered, controller {controller}; logs under {self.data_dir}")
                self.stop_requested.wait(0.2)
            return None
        finally:
            zk.stop()
            zk.close()

    def watch(self) -> None:
        """Until SIGINT/SIGTERM: report brokers that die."""
        while not self.stop_requested.wait(0.5):
            for b in self.brokers:
                if b.proc is not None and not b.alive() and not b.reported_exit:
                    b.reported_exit = True
                    print(f"Broker {b.broker_id} (pid {b.proc.pid}) exited with code {b.proc.returncode}; "
                          f"see {b.log_path}", file=sys.stderr, flush=True)
            if self.zk is not None and self.zk.proc is not None and self.zk.proc.poll() is not None \
                    and not self.zk_reported:
                self.zk_reported = True
                print(f"ZooKeeper exited with code {self.zk.proc.returncode}; see {self.zk.dir}",
                      file=sys.stderr, flush=True)

    def stop(self) -> bool:
        """Brokers (controller last), then ZooKeeper. True when every broker exited 0 in time."""
        ok = True
        running = [b for b in self.brokers if b.alive()]
        controller = self.current_controller() if running else None
        order = [b for b in running if b.broker_id != controller] + [b for b in running if b.broker_id == controller]
        for b in order:
            print(f"Stopping broker {b.broker_id} (pid {b.proc.pid if b.proc else '?'}) ...", flush=True)
            code, killed = b.stop(self.args.stop_timeout)
            if killed:
                ok = False
                print(f"Broker {b.broker_id} did not stop within {self.args.stop_timeout:.0f}s: killed; "
                      f"see {b.log_path}", file=sys.stderr, flush=True)
            elif code not in (0, None):
                ok = False
                print(f"Broker {b.broker_id} exited with code {code}; see {b.log_path}", file=sys.stderr, flush=True)
        for b in self.brokers:  # anything started but not running any more: reap
            if b.proc is not None and b.proc.poll() is None:
                b.stop(self.args.stop_timeout)
        if self.zk is not None and self.zk.proc is not None:
            print("Stopping ZooKeeper ...", flush=True)
            self.zk.stop()
        return ok


def prepare(args: argparse.Namespace) -> DevCluster:
    if args.brokers < 1:
        raise DevClusterError("--brokers must be at least 1")
    if args.base_port <= 0 or args.base_port + args.brokers - 1 > 65535:
        raise DevClusterError(f"--base-port {args.base_port} leaves no room for {args.brokers} brokers")
    from odradek.devcluster.zookeeper import ZooKeeperError, ZooKeeperServer, find_java, free_port

    internal = getattr(args, "internal_base_port", None)
    if internal is not None and (internal <= 0 or internal + args.brokers - 1 > 65535):
        raise DevClusterError(f"--internal-base-port {internal} leaves no room for {args.brokers} brokers")
    user = parse_overrides(args.override)
    for key in ("broker.id", "listeners", "log.dirs", "zookeeper.connect", "http.listeners"):
        if key in user:
            raise DevClusterError(f"--override {key}=... is set by dev-cluster itself")
    hosts, chroot = split_zookeeper(args.zookeeper, args.chroot)
    ports = [args.base_port + i for i in range(args.brokers)]
    internal_ports = [internal + i for i in range(args.brokers)] if internal is not None else []
    if set(ports) & set(internal_ports):
        raise DevClusterError("the EXTERNAL and INTERNAL port ranges overlap")
    http_base = getattr(args, "http_base_port", 0) or 0
    if http_base < 0 or http_base + args.brokers - 1 > 65535:
        raise DevClusterError(f"--http-base-port {http_base} leaves no room for {args.brokers} brokers")
    http_ports = [http_base + i for i in range(args.brokers)] if http_base else []
    if set(http_ports) & set(ports + internal_ports):
        raise DevClusterError("the HTTP port range overlaps the brokers' Kafka ports")
    zk_port = 0
    if hosts is None:
        try:
            find_java()
        except ZooKeeperError as e:
            raise DevClusterError(f"{e}, or pass --zookeeper HOST:PORT") from None
        cluster_ports = set(ports) | set(internal_ports) | set(http_ports)
        zk_port = args.zookeeper_port
        if zk_port and zk_port in cluster_ports:
            raise DevClusterError(f"ZooKeeper port {zk_port} is one of the brokers' ports")
        while not zk_port or zk_port in cluster_ports:  # a free port now may be one the brokers bind next
            zk_port = free_port()
        if not port_free(zk_port):
            raise DevClusterError(f"port {zk_port} (ZooKeeper) is already in use")
    taken = [p for p in ports + internal_ports + http_ports if not port_free(p)]
    if taken:
        raise DevClusterError(f"port(s) {','.join(map(str, taken))} already in use (choose another --base-port)")
    if args.data_dir:
        data_dir = Path(args.data_dir).resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
    else:
        data_dir = Path(tempfile.mkdtemp(prefix="odradek-dev-cluster-"))
    zk = None
    if hosts is None:
        zk = ZooKeeperServer(data_dir, 1, zk_port)
        hosts = zk.connect
    cluster = DevCluster(args, data_dir, hosts, chroot, zk=zk)
    for i, port in enumerate(ports):
        bid = i + 1
        bdir = data_dir / f"broker{bid}"
        cluster.brokers.append(BrokerProc(bid, port, bdir, broker_overrides(
            bid, port, bdir / "data", cluster.zk_connect, args.brokers, user,
            internal_ports[i] if internal_ports else None, http_ports[i] if http_ports else None)))
    return cluster


