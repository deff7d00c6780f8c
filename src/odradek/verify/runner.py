"""``odradek verify run``: a verification run end to end. It starts a ZooKeeper-mode cluster of three
brokers on this machine (odradek.devcluster), creates the workload's topic (RF=3,
min.insync.replicas=2), runs the workload (odradek.verify.workload) while the nemesis injects its
seeded faults (odradek.verify.nemesis), heals everything, lets the consumers read to the end, stops
the cluster and checks the history (odradek.verify.checker).

Everything lands in ``--out DIR``: ``history.jsonl`` (the history), ``nemesis.txt`` (the schedule and
what was applied), ``report.txt`` (the checker's report), ``run.log`` (the clients' notes), and
``cluster/`` (ZooKeeper's and each broker's data and log). The exit code is the checker's: 0 when the
history shows no anomaly, 1 when it does, 2 when the run itself failed.

``--java-clients N`` runs N Java client programs (kafka-clients 4.4: an idempotent producer and a
read_committed consumer each; odradek.verify.java_clients) next to the Python clients. Then the Python clients record to ``history-python.jsonl``, each Java program to
``history-java-<n>.jsonl`` (its log in ``java-client-<n>.log``), and ``history.jsonl`` is their merge
by time (odradek.verify.history.merge).

``--inject-broker-fault`` starts the brokers broken on purpose (odradek.server.fault_injection), to
show that the checker finds what such a broker does.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from odradek.verify import checker, history, nemesis
from odradek.verify.clock import BrokerClockProbe, Clocks, find_library
from odradek.verify.disks import DiskError, Disks
from odradek.verify.disks import cleanup_stale as cleanup_stale_disks
from odradek.verify.java_clients import JavaClientError, JavaClients
from odradek.verify.netns import Net, NetError, cleanup_stale
from odradek.verify.workload import SafeRecorder, Workload, WorkloadConfig

TOPIC = "jepsen"
CLUSTER_OVERRIDES = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "zookeeper.session.timeout.ms": "6000",
    # a follower cut off or stopped for a few seconds leaves the ISR (Kafka's default is 30 s, longer
    # than most faults of a run)
    "replica.lag.time.max.ms": "3000",
}


@dataclass
class RunConfig:
    duration_s: float
    families: tuple[str, ...]
    seed: int
    out: Path
    brokers: int = 3
    partitions: int = 4
    recovery_s: float = 10.0
    broker_faults: tuple[str, ...] = ()  # odradek.server.fault_injection: a broker broken on purpose
    java_clients: int = 0  # Java client programs beside the Python clients (odradek.verify.java_clients)


class ClusterTarget:
    """The nemesis's hands on a DevCluster's broker processes (ids 1..N).

    Restarted brokers are started from one thread that lives until :meth:`close`, after the cluster
    has stopped: a child's parent-death signal (PR_SET_PDEATHSIG, odradek.devcluster) fires when the
    *thread* that started it exits, and the nemesis thread exits before the run's recovery and drain."""

    def __init__(self, cluster: Any, log: Callable[[str], None], net: Net | None = None,
                 disks: Disks | None = None, clocks: Clocks | None = None) -> None:
        self.cluster = cluster
        self.log = log
        self.net = net
        self.disks = disks
        self.clocks = clocks
        self.clock_probe: BrokerClockProbe | None = None  # set once the cluster is up
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-spawner")

    def partition(self, kind: str, brokers: tuple[int, ...]) -> None:
        if self.net is None:
            raise RuntimeError("network faults need the brokers in network namespaces")
        self.net.partition(kind, brokers)

    def heal_network(self) -> None:
        if self.net is not None:
            self.net.heal()

    def controller(self) -> int | None:
        return self.cluster.current_controller()  # type: ignore[no-any-return]

    def kill_store(self) -> None:
        zk = self.cluster.zk
        if zk is not None and zk.proc is not None and zk.proc.poll() is None:
            zk.proc.kill()
            zk.proc.wait()

    def restart_store(self) -> None:
        zk = self.cluster.zk
        if zk is not None and (zk.proc is None or zk.proc.poll() is not None):
            self._spawner.submit(lambda: zk.start(wait=True, new_session=True, tie_to_parent=True)).result(60)

    def fill_disk(self, b: int) -> str:
        if self.disks is None:
            raise RuntimeError("disk faults need the log dirs on their own file systems")
        return self.disks.fill(b)

    def free_disk(self, b: int) -> str:
        """Remove the filler; restart the broker if it stopped (it halts when its last log dir fails)."""
        assert self.disks is not None
        self.disks.free(b)
        p = self._proc(b)
        if p.proc is not None and p.proc.poll() is None:
            return f"disk-full: broker {b}'s filler removed; the broker was still running"
        code = p.proc.returncode if p.proc is not None else None
        self.restart(b)
        return f"disk-full: broker {b}'s filler removed; the broker had stopped (exit code {code}): restarted"

    def shift_clock(self, b: int, offset_s: float, observe: bool) -> str:
        if self.clocks is None:
            raise RuntimeError("clock faults need the brokers under libfaketime")
        self.clocks.set(b, offset_s)
        if not observe:
            return ""
        p = self._proc(b)
        seen = self.clocks.observe(b, p.prefix, p.proc.pid if p.proc is not None and p.proc.poll() is None else None)
        if self.clock_probe is not None:
            offset = self.clock_probe.offset(b, timeout_s=30.0)  # a broker just restarted may still be loading
            seen += (f"; broker {b} stamped a record {offset:+.1f}s" if offset is not None
                     else f"; broker {b} did not answer the clock probe ({self.clock_probe.last_error})")
        return seen

    def reset_clocks(self) -> None:
        if self.clocks is not None:
            self.clocks.reset()

    def close(self) -> None:
        self._spawner.shutdown(wait=True)

    def _proc(self, b: int) -> Any:
        return self.cluster.brokers[b - 1]

    def kill(self, b: int) -> None:
        p = self._proc(b)
        if p.proc is not None and p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()

    def restart(self, b: int) -> None:
        p = self._proc(b)
        if p.proc is None or p.proc.poll() is not None:
            self._spawner.submit(p.start).result(60)

    def pause(self, b: int) -> None:
        p = self._proc(b)
        if p.proc is not None and p.proc.poll() is None:
            p.proc.send_signal(signal.SIGSTOP)

    def resume(self, b: int) -> None:
        p = self._proc(b)
        if p.proc is not None and p.proc.poll() is None:
            p.proc.send_signal(signal.SIGCONT)


def _free_base_port(n: int, rnd: random.Random) -> int:
    from odradek.devcluster.cluster import port_free

    for _ in range(200):
        base = rnd.randrange(20000, 40000)
        if all(port_free(base + i) for i in range(n)):
            return base
    raise RuntimeError("no free range of ports for the brokers")


def _create_topic(bootstrap: str, partitions: int, timeout_s: float = 120.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while True:
        fut = admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})])[TOPIC]
        try:
            fut.result(30)
            break
        except Exception as e:
            if "already exists" in str(e).lower():
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    while time.monotonic() < deadline:
        md = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if md is not None and len(md.partitions) == partitions and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.5)
    raise RuntimeError(f"topic {TOPIC} has no leaders after {timeout_s:.0f} s")


def run(cfg: RunConfig) -> int:
    from odradek.verify.workload import CLIENT_LOG

    cfg.out.mkdir(parents=True, exist_ok=True)
    with open(cfg.out / "run.log", "a", encoding="utf-8") as run_log:
        handler = logging.StreamHandler(run_log)
        handler.setFormatter(logging.Formatter("%(asctime)s client %(message)s"))
        CLIENT_LOG.addHandler(handler)
        CLIENT_LOG.propagate = False
        try:
            return _run(cfg, run_log)
        finally:
            CLIENT_LOG.removeHandler(handler)


def _run(cfg: RunConfig, run_log: TextIO) -> int:
    from odradek.devcluster.cluster import DevClusterError, prepare

    def log(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        run_log.write(line + "\n")
        run_log.flush()

    rnd = random.Random(cfg.seed)
    faults = nemesis.schedule(cfg.families, list(range(1, cfg.brokers + 1)), cfg.duration_s, cfg.seed)
    (cfg.out / "nemesis.txt").write_text(
        f"seed {cfg.seed}, families {','.join(cfg.families) or 'none'}, duration {cfg.duration_s:.0f} s\n"
        + "".join(f"{f}\n" for f in faults))
    print(f"verify: seed {cfg.seed}; {len(faults)} faults planned ({cfg.out / 'nemesis.txt'})", flush=True)
    args = argparse.Namespace(
        brokers=cfg.brokers, zookeeper=None, zookeeper_port=0, chroot=None,
        base_port=_free_base_port(cfg.brokers, rnd), internal_base_port=None, http_base_port=0,
        data_dir=str(cfg.out / "cluster"), override=[f"{k}={v}" for k, v in CLUSTER_OVERRIDES.items()],
        start_timeout=120.0, stop_timeout=30.0,
    )
    lib = find_library() if any(f in nemesis.CLOCK_FAMILIES for f in cfg.families) else None
    if lib is None and any(f in nemesis.CLOCK_FAMILIES for f in cfg.families):
        print("verify: error: clock faults need libfaketime (apt-get install libfaketime)", flush=True)
        return 2
    if os.geteuid() != 0 and any(f in nemesis.DISK_FAMILIES for f in cfg.families):
        print("verify: error: disk faults mount a file system for each log dir: run as root", flush=True)
        return 2
    net: Net | None = None
    if any(f in nemesis.NETWORK_FAMILIES for f in cfg.families):
        if os.geteuid() != 0:
            print("verify: error: network faults put each broker in a network namespace: run as root", flush=True)
            return 2
        cleanup_stale(log)
        net = Net(f"{rnd.randrange(16**4):04x}", cfg.brokers, log)
    try:
        cluster = prepare(args)
    except DevClusterError as e:
        print(f"verify: error: {e}", flush=True)
        return 2
    if net is not None:
        log(f"network namespaces {net.ns(1)} to {net.ns(cfg.brokers)}, subnet 10.{net.subnet}.0.0/16")
        try:
            net.setup()
        except NetError as e:
            net.teardown()
            print(f"verify: error: network namespaces: {e}", flush=True)
            return 2
        assert cluster.zk is not None
        cluster.zk.client_address = "0.0.0.0"  # reached from each namespace through its veth's host side
        for b in cluster.brokers:
            i = b.broker_id
            b.host = net.broker_ip(i)
            b.prefix = net.exec_prefix(i)
            b.overrides["listeners"] = f"PLAINTEXT://{b.host}:{b.port}"
            b.overrides["zookeeper.connect"] = f"{net.host_ip(i)}:{cluster.zk.port}{cluster.chroot}"
    disks: Disks | None = None
    if any(f in nemesis.DISK_FAMILIES for f in cfg.families):
        cleanup_stale_disks(log)
        disks = Disks(f"{rnd.randrange(16**4):04x}", {b.broker_id: b.dir for b in cluster.brokers}, log=log)
        try:
            disks.setup()
        except DiskError as e:
            disks.teardown()
            if net is not None:
                net.teardown()
            print(f"verify: error: log dir file systems: {e}", flush=True)
            return 2
        log(f"log dirs on tmpfs of {disks.size_mb} MiB each: {', '.join(str(disks.log_dir(i)) for i in sorted(disks.roots))}")
        for b in cluster.brokers:
            b.overrides["log.dirs"] = str(disks.log_dir(b.broker_id))
    clocks: Clocks | None = None
    if any(f in nemesis.CLOCK_FAMILIES for f in cfg.families):
        assert lib is not None
        clocks = Clocks(lib, cfg.out / "clocks", cfg.brokers)
        clocks.setup()
        log(f"brokers under {lib}, offsets in {clocks.dir}")
        for b in cluster.brokers:
            b.env = clocks.env(b.broker_id)
            b.module = "odradek.verify.faketime_boot"
    from odradek.server.fault_injection import ENV

    if cfg.broker_faults:
        os.environ[ENV] = ",".join(cfg.broker_faults)  # the brokers inherit it; the clients ignore it
        print(f"verify: the brokers are broken on purpose: {ENV}={os.environ[ENV]}", flush=True)
    else:
        os.environ.pop(ENV, None)
    nem: nemesis.Nemesis | None = None
    target = ClusterTarget(cluster, log, net, disks, clocks)
    work: Workload | None = None
    rec: SafeRecorder | None = None
    java: JavaClients | None = None
    java_failed: list[str] = []
    hist_path = cfg.out / "history.jsonl"
    python_path = cfg.out / "history-python.jsonl" if cfg.java_clients else hist_path
    try:
        with contextlib.redirect_stdout(run_log):
            controller = cluster.start()
        if controller is None:
            print("verify: error: the cluster did not start", flush=True)
            return 2
        _create_topic(cluster.bootstrap, cfg.partitions)
        if clocks is not None:
            probe = BrokerClockProbe(cluster.bootstrap, cfg.brokers)
            try:
                probe.setup()
                target.clock_probe = probe
            except Exception as e:  # the evidence is then the probe process's only
                log(f"clock probe topic not created: {e}")
        with open(python_path, "w", encoding="utf-8") as out:
            rec = SafeRecorder(out)
            work = Workload(WorkloadConfig(cluster.bootstrap, TOPIC, cfg.partitions, seed=cfg.seed), rec, log)
            if cfg.java_clients:
                java = JavaClients(cfg.out, cluster.bootstrap, TOPIC, cfg.partitions, cfg.java_clients, cfg.seed,
                                   op_timeout_ms=int(work.cfg.op_timeout_s * 1000))
                java.start()
                log(f"{cfg.java_clients} Java client(s) started: {', '.join(str(h) for h in java.histories)}")
            work.start()
            nem = nemesis.Nemesis(target, faults, log)
            nem.start()
            time.sleep(cfg.duration_s)
            nem.stop()
            with open(cfg.out / "nemesis.txt", "a") as f:
                f.write(f"applied {len(nem.applied)} of {len(faults)}\n" + "".join(f"{e}\n" for e in nem.evidence))
            time.sleep(cfg.recovery_s)  # the workload goes on against a healed cluster
            if java is not None:
                java.stop()  # the Java clients stop and drain alongside the Python ones
            work.finish(timeout_s=120)
            if java is not None:
                java_failed = java.finish(timeout_s=60)
                for problem in java.killed + java_failed:
                    log(problem)
            rec.close()
    except JavaClientError as e:
        print(f"verify: error: the Java clients: {e}", flush=True)
        return 2
    except Exception as e:
        print(f"verify: error: {type(e).__name__}: {e}", flush=True)
        return 2
    finally:
        if nem is not None:
            nem.stop()
        if rec is not None:
            rec.close()
        if java is not None:
            java.kill()
        with contextlib.redirect_stdout(run_log):
            cluster.stop()
        target.close()
        if target.clock_probe is not None:
            target.clock_probe.close()
        if net is not None:
            net.teardown()
        if disks is not None:
            disks.teardown()
    if work is not None and work.errors:
        print("verify: error: a client failed: " + "; ".join(work.errors), flush=True)
        return 2
    if java_failed:
        print("verify: error: " + "; ".join(java_failed), flush=True)
        return 2
    if java is not None:
        try:
            n = history.merge_files([python_path, *java.histories], hist_path)
        except (OSError, history.HistoryError) as e:
            print(f"verify: error: merging the histories: {e}", flush=True)
            return 2
        log(f"history: {n} events of the Python and {cfg.java_clients} Java client(s) merged into {hist_path}")
    report = checker.check(history.read(hist_path))
    text = report.summary(10)
    (cfg.out / "report.txt").write_text(text + "\n")
    print(text, flush=True)
    return 0 if report.valid else 1
