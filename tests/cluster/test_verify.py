"""``odradek verify run``: the Jepsen-style workload against a real 3-broker ZooKeeper cluster under
kill -9 and SIGSTOP faults gives a history the checker finds valid, and the same run against brokers
broken on purpose (odradek.server.fault_injection) gives the anomalies those faults make: the checker
can say no."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(420)


def verify_run(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "verify", "run", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=400)


def diagnosis(out: Path, r: subprocess.CompletedProcess[str]) -> str:
    """What a failed run leaves for the next reader (CI keeps no files): the checker's report, the
    nemesis schedule, and each broker's lines on leadership, ISR, truncation and markers."""
    parts = [r.stdout[-3000:], r.stderr[-3000:]]
    for name in ("report.txt", "nemesis.txt"):
        if (out / name).exists():
            parts.append(f"--- {name}\n" + (out / name).read_text()[-4000:])
    pattern = re.compile(r"marker|Truncating|became (leader|follower)|ISR of|refused|fenced|UNKNOWN", re.I)
    for log in sorted((out / "cluster").glob("broker*/broker.log")):
        lines = [line for line in log.read_text(errors="replace").splitlines() if pattern.search(line)]
        parts.append(f"--- {log.parent.name}\n" + "\n".join(lines[-80:]))
    return "\n".join(parts)


def counts(history: Path) -> Counter[tuple[str, str]]:
    c: Counter[tuple[str, str]] = Counter()
    for line in history.read_text().splitlines():
        d = json.loads(line)
        c[(d["f"], d["type"])] += 1
    return c


def test_history_under_process_faults_is_valid(tmp_path: Path) -> None:
    # seed 76 over 45 s: a pause, a kill of two brokers at once, a kill of the controller
    r = verify_run(tmp_path, "--duration", "45", "--nemesis", "kill,kill2,kill-controller,pause,zookeeper", "--seed", "76")
    assert r.returncode == 0, diagnosis(tmp_path, r)
    assert (tmp_path / "report.txt").read_text().startswith("valid")
    applied = (tmp_path / "nemesis.txt").read_text()
    assert "applied 0 of" not in applied and "applied" in applied, applied
    c = counts(tmp_path / "history.jsonl")
    assert c[("send", "ok")] >= 300, c
    assert c[("txn", "ok")] >= 10 and c[("txn", "fail")] >= 1, c  # aborted records sat in the log, unread
    assert c[("poll", "ok")] >= 20, c


def test_the_checker_finds_what_a_broken_broker_does(tmp_path: Path) -> None:
    r = verify_run(tmp_path, "--duration", "15", "--nemesis", "none", "--seed", "5",
                   "--inject-broker-fault", "expose-aborted,consumer-skip,duplicate-append,misreport-offset")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    found = {line.split(":")[0] for line in (tmp_path / "report.txt").read_text().splitlines()
             if line and not line.startswith(" ")}
    assert {"G1a", "lost-write", "duplicate", "inconsistent-offsets"} <= found, found
    assert found & {"poll-skip", "int-poll-skip"}, found
    broker_log = (tmp_path / "cluster" / "broker1" / "broker.log").read_text()
    assert "FAULT INJECTION expose-aborted is on" in broker_log


def test_a_broker_refuses_an_unknown_fault(tmp_path: Path) -> None:
    r = verify_run(tmp_path, "--duration", "5", "--inject-broker-fault", "nonsense")
    assert r.returncode == 2 and "unknown" in r.stderr


def test_history_under_network_partitions_is_valid(tmp_path: Path) -> None:
    """Each broker in its own network namespace; partitions, one-way cuts, bridges and isolation by
    nftables inside the namespaces (odradek.verify.netns). Needs root, as CI runs."""
    # seed 8 over 40 s: isolate, one-way, partition
    r = verify_run(tmp_path, "--duration", "40", "--nemesis", "partition,one-way,bridge,isolate", "--seed", "8")
    assert r.returncode == 0, diagnosis(tmp_path, r)
    applied = (tmp_path / "nemesis.txt").read_text()
    assert "applied 0 of" not in applied and "applied" in applied, applied
    c = counts(tmp_path / "history.jsonl")
    assert c[("send", "ok")] >= 300 and c[("poll", "ok")] >= 20, c
    # the brokers listened inside their namespaces, which are gone afterwards
    assert "listening on PLAINTEXT://10." in (tmp_path / "cluster" / "broker1" / "broker.log").read_text()
    [ns] = [line.split()[2] for line in (tmp_path / "run.log").read_text().splitlines()
            if line.split()[1:3] and line.split()[1] == "network"]
    prefix = ns.rsplit("-", 1)[0]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [line for line in left.splitlines() if line.startswith(prefix)], left


def test_history_under_full_disks_and_clock_jumps_is_valid(tmp_path: Path) -> None:
    """Each log dir on its own 96 MiB tmpfs (odradek.verify.disks; needs root, as CI runs) and each
    broker under libfaketime (odradek.verify.clock). The run's nemesis.txt records what the faults did:
    the filler's ENOSPC, the brokers that halted on it (their only log dir failed) and were restarted,
    the wall-clock offset a process in a broker's environment saw, and the LogAppendTime the brokers
    themselves gave a record of their own probe partition."""
    # seed 50 over 35 s: broker 3's wall clock 230.3 s ahead (probed while every broker is up), then brokers 1
    # and 2's disks full at once for 11.4 s (the partitions lose their ISR majority; two checkpoint intervals, so
    # each broker meets its full disk). Seed 14 put the clock after the restarts, and a broker restarted on a
    # loaded machine was not yet leading its probe partition when probed.
    r = verify_run(tmp_path, "--duration", "35", "--nemesis", "disk-full,clock", "--seed", "50")
    assert r.returncode == 0, diagnosis(tmp_path, r)
    assert (tmp_path / "report.txt").read_text().startswith("valid")
    nem = (tmp_path / "nemesis.txt").read_text()
    assert "applied 2 of 2" in nem, nem
    assert "disk-full: broker 1's log dir filled" in nem and "got ENOSPC; 0 bytes left" in nem, nem
    assert "disk-full: broker 2's log dir filled" in nem, nem
    assert nem.count("had stopped (exit code 1): restarted") == 2, nem  # Odradek halts, as Kafka does
    seen = re.findall(r"clock: broker (\d) set to ([-+.\d]+)s, observed ([-+.\d]+)s \(libfaketime in broker pid \d+: yes\)", nem)
    assert [(b, float(want)) for b, want, _ in seen] == [("3", 230.3)], nem
    assert all(abs(float(got) - 230.3) < 5 for _, _, got in seen), nem
    # and the broker itself: the LogAppendTime it gave a record of its own probe partition
    stamped = re.findall(r"broker (\d) stamped a record ([-+.\d]+)s", nem)
    assert [b for b, _ in stamped] == ["3"] and all(abs(float(t) - 230.3) < 5 for _, t in stamped), nem
    halted = (tmp_path / "cluster" / "broker1" / "broker.log").read_text() + \
        (tmp_path / "cluster" / "broker2" / "broker.log").read_text()
    assert "No space left on device" in halted and "halting broker" in halted
    c = counts(tmp_path / "history.jsonl")
    # 9,000-11,000 sends on a quiet machine; 22 (8 on CI) while libfaketime broke CPython's GIL wait
    assert c[("send", "ok")] >= 1000 and c[("poll", "ok")] >= 20 and c[("txn", "ok")] >= 10, c
    # the file systems are unmounted, the log dirs copied out of them first
    assert str(tmp_path) not in Path("/proc/self/mounts").read_text()
    assert (tmp_path / "cluster" / "broker1" / "data" / "jepsen-0").is_dir()


def test_a_killed_runs_file_systems_are_unmounted_by_the_next(tmp_path: Path) -> None:
    """The disks a run mounted outlive it when it is killed; the next run's cleanup_stale unmounts those
    whose owner (the pid written before mounting) is gone, and leaves a live run's alone."""
    from odradek.verify import disks

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = disks.Disks("dea1", {1: tmp_path / "stale"}, size_mb=4)
    stale.setup()
    (disks.OWNERS / "dea1").write_text(f"{dead.pid}\n")  # as if the run that mounted it had died
    live = disks.Disks("dea2", {1: tmp_path / "live"}, size_mb=4)
    live.setup()  # this process's pid: alive
    try:
        mounted = {point for _, point in disks.mounts()}
        assert {str(stale.mount_point(1)), str(live.mount_point(1))} <= mounted
        seen: list[str] = []
        disks.cleanup_stale(seen.append)
        mounted = {point for _, point in disks.mounts()}
        assert str(stale.mount_point(1)) not in mounted and str(live.mount_point(1)) in mounted, seen
        assert not (disks.OWNERS / "dea1").exists()
    finally:
        live.teardown()
        stale.teardown()
    assert str(tmp_path) not in Path("/proc/self/mounts").read_text()


def test_history_with_java_clients_under_kills_is_valid(tmp_path: Path) -> None:
    """``--java-clients 1``: Kafka 4.4's Java client (the harness's VerifyWorkload: an idempotent producer, a
    read_committed consumer) runs beside the Python clients under broker kills; its history, merged with
    theirs by time, has its sends acknowledged and its polls answered, and the checker finds it valid.
    peers/kafka_peer.py builds the harness (once) when the jars are not yet in place."""
    from odradek.verify.java_clients import PROCESS_BASE, VALUE_BASE

    # seed 4 over 30 s: broker 2 killed at 6.7 s for 9.8 s, broker 3 at 22.5 s for 4.2 s
    r = verify_run(tmp_path, "--duration", "30", "--nemesis", "kill", "--seed", "4", "--java-clients", "1")
    assert r.returncode == 0, diagnosis(tmp_path, r) + "\n" + (tmp_path / "java-client-0.log").read_text()[-3000:]
    assert (tmp_path / "report.txt").read_text().startswith("valid")
    assert "applied 0 of" not in (tmp_path / "nemesis.txt").read_text()
    java: Counter[tuple[str, str]] = Counter()
    java_values_read = 0
    indexes = []
    for line in (tmp_path / "history.jsonl").read_text().splitlines():
        d = json.loads(line)
        indexes.append(d["index"])
        if d["process"] >= PROCESS_BASE:
            java[(d["f"], d["type"])] += 1
        elif d["f"] == "poll" and d["type"] == "ok":  # the Python consumers read the Java producer's records
            java_values_read += sum(1 for recs in d["value"][0][1].values() for _, v in recs if v > VALUE_BASE)
    assert indexes == list(range(len(indexes)))
    assert java[("send", "ok")] >= 50 and java[("poll", "ok")] >= 20, java
    assert java[("assign", "ok")] >= 1 and not java[("txn", "ok")], java
    assert java_values_read >= 50
    python = counts(tmp_path / "history-python.jsonl")
    assert python[("send", "ok")] >= 50, python
