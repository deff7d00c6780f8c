"""What each odradek pytest fixture costs, in seconds (median of ``--rounds``; cold start once).

    python bench/embedded_fixtures.py [--rounds 5] [--cluster-size 2] [--no-cluster]

- cold start: ``EmbeddedBroker().start()`` in a fresh interpreter, broker modules not yet imported
  (a ``kafka_broker`` session's first cost), to the first served request (ApiVersions);
- warm start: another broker in the same process;
- per-test topic: ``create_topic`` (CreateTopics + Metadata until the leader is known), the cost of
  ``kafka_topic``;
- restart: clean stop + start, to the first served request;
- kill + start: ``kill()`` (thread mode: abrupt stop; process mode: SIGKILL) and start with
  crash recovery of the ``--records`` records written since the last checkpoint;
- cluster: ZooKeeper + N brokers registered with a controller; a broker's SIGKILL + start; the
  time from a leader's SIGKILL to a new leader in the metadata (``zookeeper.session.timeout.ms``
  of :data:`odradek.embedded.cluster.CLUSTER_DEFAULTS` dominates it).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

COLD = """
import time
t0 = time.monotonic()
from odradek import EmbeddedBroker
b = EmbeddedBroker(mode=%r)
b.start()
print(time.monotonic() - t0, b.startup_seconds)
b.close()
"""


def median(fn: Callable[[], float], rounds: int) -> float:
    return statistics.median(fn() for _ in range(rounds))


def timed(fn: Callable[[], object]) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def fill(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"x" * 100, key=b"%d" % i)
    assert p.flush(60) == 0


def broker_figures(mode: str, rounds: int, records: int) -> dict[str, float]:
    from odradek import EmbeddedBroker

    cold = subprocess.run([sys.executable, "-c", COLD % mode], capture_output=True, text=True, check=True)
    cold_total, cold_served = (float(x) for x in cold.stdout.split())
    out = {"cold start (import + start to first served request)": cold_total,
           "  of which start to first served request": cold_served}
    starts: list[float] = []

    def warm() -> float:
        with EmbeddedBroker(mode=mode) as b:  # type: ignore[arg-type]
            assert b.startup_seconds is not None
            starts.append(b.startup_seconds)
            return b.startup_seconds

    out["warm start"] = median(warm, rounds)
    with EmbeddedBroker(mode=mode) as b:  # type: ignore[arg-type]
        b.create_topic("warmup")
        counter = iter(range(10**6))
        out["per-test topic (create_topic)"] = median(lambda: timed(lambda: b.create_topic(f"t{next(counter)}")), rounds)
        b.create_topic("data")
        fill(b.bootstrap_servers, "data", records)
        out["restart (clean stop + start)"] = median(lambda: timed(b.restart), rounds)

        def crash() -> float:
            fill(b.bootstrap_servers, "data", records)  # past the recovery point: recovered at start
            t0 = time.monotonic()
            b.kill()
            b.start()
            return time.monotonic() - t0

        out[f"kill + start ({records} records past the recovery point)"] = median(crash, rounds)
    return out


def cluster_figures(n: int, rounds: int) -> dict[str, float]:
    from odradek import EmbeddedCluster

    out: dict[str, float] = {}
    t0 = time.monotonic()
    with EmbeddedCluster(n) as c:
        out[f"cluster start (ZooKeeper + {n} brokers)"] = time.monotonic() - t0
        out["cluster per-test topic (create_topic, rf=min(3,N))"] = median(
            lambda: timed(lambda: c.create_topic(f"t{time.monotonic_ns()}")), rounds)
        c.create_topic("f")
        leader = c.leader("f")
        t1 = time.monotonic()
        c.kill(leader)
        while c.leader("f") in (leader, -1):
            time.sleep(0.05)
        out["leader SIGKILL to new leader in metadata"] = time.monotonic() - t1
        out["killed broker start (to first served request)"] = timed(lambda: c.start(leader))
        t2 = time.monotonic()
    out["cluster close"] = time.monotonic() - t2
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--cluster-size", type=int, default=2)
    ap.add_argument("--no-cluster", action="store_true")
    args = ap.parse_args()
    for mode in ("thread", "process"):
        print(f"== EmbeddedBroker(mode={mode!r})")
        for k, v in broker_figures(mode, args.rounds, args.records).items():
            print(f"  {k:55s} {v * 1000:8.1f} ms")
    if not args.no_cluster:
        print(f"== EmbeddedCluster({args.cluster_size})")
        for k, v in cluster_figures(args.cluster_size, args.rounds).items():
            print(f"  {k:55s} {v * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
