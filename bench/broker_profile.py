"""Profile a fresh Odradek broker under one benchmark workload with py-spy and list the hotspots.

    python bench/broker_profile.py [--workload W1] [--records N] [--native] [--top 25] [--out DIR]

py-spy (``pip install py-spy``) attaches to the broker by pid (``record --pid``; its ``dump`` cannot
identify pyenv's interpreter here, ``record`` can), samples the threads that are running (not idle
ones), and writes collapsed stacks. The report gives each function's share of the broker's busy
samples: "self" (where the CPU was) and "total" (including callees), plus the broker's CPU seconds
over the same interval, so a percentage converts to seconds.

With ``--cprofile`` the broker runs under ``python -m cProfile`` instead and is stopped with SIGTERM; the
pstats file is written to the output directory (deterministic, but slower broker).
"""

from __future__ import annotations

import argparse
import collections
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import OdradekBroker  # noqa: E402
from run import Bench, workloads  # noqa: E402


def _is_own(frame: str) -> bool:
    return "odradek/" in frame and "odradek/__main__" not in frame and "odradek/cli/" not in frame


def parse_collapsed(
    path: Path,
) -> tuple[int, collections.Counter[str], collections.Counter[str], collections.Counter[str]]:
    """Busy samples; self counts per leaf frame; inclusive counts; counts per deepest odradek frame (where
    native and library time is charged to the broker code that called it)."""
    total = 0
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    own_counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        for f in set(frames):
            incl_counts[f] += count
        own = [f for f in frames if _is_own(f)]
        leaf = frames[-1]
        if own:
            own_counts[own[-1] if own[-1] == leaf else f"{own[-1]} -> {leaf}"] += count
        else:
            own_counts[f"(event loop) {leaf}"] += count
    return total, self_counts, incl_counts, own_counts


def shorten(frame: str) -> str:
    # "name (/long/path/src/odradek/x/y.py:12)" -> "name (odradek/x/y.py:12)"
    for marker in ("/src/", "/site-packages/", "/lib/python3.11/"):
        if marker in frame:
            head, _, tail = frame.partition("(")
            return f"{head}({tail.split(marker, 1)[1]}" if marker in tail else frame
    return frame


def report(path: Path, top: int, cpu_s: float) -> str:
    total, self_c, incl_c, own_c = parse_collapsed(path)
    if not total:
        return "no samples"
    lines = [f"{total} busy samples; broker CPU over the run {cpu_s:.2f} s", "",
             "%       deepest odradek function -> leaf (native/library time charged to its caller)"]
    for f, n in own_c.most_common(top):
        lines.append(f"{100.0 * n / total:6.1f}  {' -> '.join(shorten(x) for x in f.split(' -> '))}")
    lines += ["", "self %  function"]
    for f, n in self_c.most_common(top):
        lines.append(f"{100.0 * n / total:6.1f}  {shorten(f)}")
    lines += ["", "total % function (inclusive)"]
    for f, n in incl_c.most_common(top):
        lines.append(f"{100.0 * n / total:6.1f}  {shorten(f)}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="W1", choices=["W1", "W2", "W3", "W4", "W5"])
    ap.add_argument("--records", type=int, default=None, help="override the workload's record count")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    ap.add_argument("--cprofile", action="store_true", help="run the broker under cProfile instead of py-spy")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, default=Path("."), help="where to write the profile files")
    args = ap.parse_args()

    defs = workloads(quick=False)
    w = defs[args.workload]
    if args.records:
        w.records = args.records
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="odradek-profile-"))
    stem = f"profile-{w.name.lower()}"
    prof_path = (args.out / f"{stem}.prof").resolve()
    extra = ["-m", "cProfile", "-o", str(prof_path)] if args.cprofile else None
    broker = OdradekBroker(workdir / "odradek", extra_args=extra)
    bench_args = argparse.Namespace(quick=False, dir=None, timeout=600.0, keep=False)
    bench = Bench(bench_args)
    spy: subprocess.Popen[bytes] | None = None
    raw = (args.out / f"{stem}.collapsed").resolve()
    try:
        broker.start()
        topic = f"profile-{w.name.lower()}"
        bench.create_topic(broker, topic, w.partitions)
        if w.topic_from:
            bench.measure(defs[w.topic_from], broker, "odradek", 0, topic, record=False)
        if not args.cprofile:
            if shutil.which("py-spy") is None:
                print("py-spy is not installed: pip install py-spy", file=sys.stderr)
                return 2
            cmd = ["py-spy", "record", "--pid", str(broker.pid), "--rate", str(args.rate), "--format", "raw",
                   "--function", "-o", str(raw)]
            # --native needs py-spy to pause the broker while it samples; without it, don't pause it
            cmd.append("--native" if args.native else "--nonblocking")
            spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1.0)  # let py-spy attach
        cpu0 = broker.cpu_seconds()
        run = bench.measure(w, broker, "odradek", 1, topic)
        cpu = broker.cpu_seconds() - cpu0
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            _, err = spy.communicate(timeout=60)
            if spy.returncode not in (0, None) and not raw.exists():
                print(err.decode(errors="replace"), file=sys.stderr)
                return 1
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(bench.workdir, ignore_errors=True)
    print(f"{w.name}: {run['metric']} {w.unit}; broker {run['broker_cpu_s']} CPU s, "
          f"{run['broker_cores']} cores; client {run['client_cpu_s']} CPU s")
    if args.cprofile:
        print(f"cProfile output: {prof_path}")
        pstats.Stats(str(prof_path)).sort_stats("tottime").print_stats(args.top)
    else:
        print(f"py-spy collapsed stacks: {raw}\n")
        print(report(raw, args.top, cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
