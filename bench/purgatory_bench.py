"""Purgatory micro-benchmark (not a test): prints microseconds per operation.

    PYTHONPATH=src python bench/purgatory_bench.py [--n 20000]

Times are CPU time of this process (the best of five runs), so other load on the machine
skews them less. Runs on an asyncio loop, as the broker does, against real logs in a temporary directory:

1. fetch, answered at once: the Fetch handler end to end (decode done; session context, read,
   encode) for one partition with data;
2. fetch, delayed: the handler parks the fetch (min.bytes not met), an append lands, the
   wake-up after the batch completes it and its future is answered;
3. acks=all, delayed: an append on a two-replica partition, the DelayedProduce parked, the
   follower's fetch moves the high watermark and completes it;
4. acks=all, already replicated (lone leader): the outcome without a purgatory.

It also runs against the tree before the purgatory (commit 762d829, extracted with ``git archive``
onto PYTHONPATH), whose handlers and ReplicaManager have the older API: the figures compare.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import inspect
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from odradek.log import Log, LogConfig
from odradek.protocol.records import build_batch
from odradek.replication.partition import Partition
from odradek.server.fetch_session import FetchSessionCache
from odradek.server.handlers import fetch as fetch_handler
from odradek.server.replica_manager import ReplicaManager

NOW = 1_700_000_000_000
TP = ("t", 0)
NEW_API = hasattr(ReplicaManager, "fetch")


class _Broker:
    def __init__(self, root: Path) -> None:
        self.node_id = 0
        self.validate_records = True
        self.topics = SimpleNamespace(
            get=lambda name: self.meta if name == "t" else None, by_id={}
        )
        self.meta = SimpleNamespace(name="t", topic_id=uuid.uuid4(), partitions=[None])
        self.logs = {TP: Log.create(root, "t", 0, LogConfig(segment_bytes=1 << 30), time_ms=NOW)}
        self.log_manager = self
        self.cluster = SimpleNamespace(cluster_listeners={"REPLICATION"}, write_isr=lambda *a: None)
        self.fetch_sessions = FetchSessionCache()
        if "node_id" in inspect.signature(ReplicaManager).parameters:  # narrow edges, not the broker
            self.replica_manager = ReplicaManager(
                0, self, self.topics, self.now_ms, isr_writer=SimpleNamespace(submit=lambda *a: None)  # type: ignore[arg-type]
            )
        else:  # earlier trees: ReplicaManager(broker)
            self.replica_manager = ReplicaManager(self)  # type: ignore[arg-type,call-arg]

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)


def _lead(broker: _Broker, replicas: list[int]) -> Partition:
    rm = broker.replica_manager
    part = Partition("t", 0, replicas, 0, 1, list(replicas), 0, 1)
    rm.partitions[TP] = part
    rm.make_leader(part, broker.logs[TP], NOW)
    return part


def _ctx(broker: _Broker) -> Any:
    conn = SimpleNamespace(listener="PLAINTEXT", park=lambda fut, cancel: None, peer="bench")
    # handlers take a RequestContext (services, listener, park); the older tree's took ctx.broker
    return SimpleNamespace(api_version=12, broker=broker, services=broker, connection=conn,
                           listener=conn.listener, park=conn.park)


def _request(offset: int, min_bytes: int, max_wait_ms: int, replica_id: int = -1) -> Any:
    fp = SimpleNamespace(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1)
    return SimpleNamespace(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes, max_bytes=50 << 20,
        isolation_level=0, topics=[SimpleNamespace(topic="t", partitions=[fp])], forgotten_topics_data=[],
        session_id=0, session_epoch=-1, replica_id=replica_id,
    )


def _per_op(fn: Any, n: int) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n * 1e6


async def _fetch_now(root: Path, n: int) -> float:
    broker = _Broker(root / "fetch_now")
    _lead(broker, [0])
    broker.replica_manager.append("t", 0, build_batch([(None, b"v" * 100)], timestamp=NOW), NOW)
    ctx, req = _ctx(broker), _request(0, 1, 500)
    return _per_op(lambda: fetch_handler.handle(ctx, req), n)


async def _fetch_delayed(root: Path, n: int) -> float:
    broker = _Broker(root / "fetch_delayed")
    _lead(broker, [0])
    rm = broker.replica_manager
    ctx = _ctx(broker)
    batch = build_batch([(None, b"v" * 100)], timestamp=NOW)
    t0 = time.process_time()
    for i in range(n):
        fut = fetch_handler.handle(ctx, _request(i, 1, 500))
        rm.append("t", 0, batch, NOW)
        await fut  # the wake-up runs after this "batch"
    return (time.process_time() - t0) / n * 1e6


async def _produce_delayed(root: Path, n: int) -> float:
    broker = _Broker(root / "produce_delayed")
    _lead(broker, [0, 1])
    rm = broker.replica_manager
    batch = build_batch([(None, b"v" * 100)], timestamp=NOW)
    t0 = time.process_time()
    for i in range(n):
        rm.append("t", 0, batch, NOW, acks=-1)
        if NEW_API:
            from odradek.purgatory import future_of

            op = rm.wait_for_replication({TP: i + 1}, 30_000)
            fut = future_of(op, lambda codes: codes)  # type: ignore[arg-type]
        else:  # the old produce handler asked replicated_now first
            assert rm.replicated_now({TP: i + 1}) is None  # type: ignore[attr-defined]
            op = rm.wait_for_replication({TP: i + 1}, 30_000, lambda codes: codes)  # type: ignore[call-arg]
            fut = op.future  # type: ignore[union-attr]
        rm.on_follower_fetch("t", 0, 1, i + 1, NOW)  # the follower's next fetch
        await fut
    return (time.process_time() - t0) / n * 1e6


async def _produce_now(root: Path, n: int) -> float:
    broker = _Broker(root / "produce_now")
    _lead(broker, [0])
    rm = broker.replica_manager
    rm.append("t", 0, build_batch([(None, b"v")], timestamp=NOW), NOW, acks=-1)
    if NEW_API:
        return _per_op(lambda: rm.wait_for_replication({TP: 1}, 30_000), n)
    return _per_op(lambda: rm.replicated_now({TP: 1}), n)  # type: ignore[attr-defined]


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        print(f"{'new' if NEW_API else 'old'} API, {n} operations each, microseconds per operation:")
        for name, fn in [
            ("fetch answered at once (handler)", _fetch_now),
            ("fetch delayed, woken by an append", _fetch_delayed),
            ("acks=all delayed, completed by a follower fetch", _produce_delayed),
            ("acks=all already replicated", _produce_now),
        ]:
            best = min([await fn(root / f"{name[:5]}{i}", n) for i in range(5)])
            print(f"  {name:50s} {best:8.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    asyncio.run(main(ap.parse_args().n))
