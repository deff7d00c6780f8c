"""Recovery time of an active segment with transactions after kill -9, compared with the same
amount of non-transactional data, in one run (not a test): prints figures.

    python bench/txn_recovery_bench.py [--mb 64] [--size 1024] [--per-txn 1000] [--abort-every 4] [--repeat 3]
        [--batch-bytes 1000000] [--flushed-mb 0]

Two fresh brokers, one per kind of data, each with a one-partition topic whose ``--mb`` MB of
``--size``-byte records all sit in the active segment (``segment.bytes`` 1 GiB, nothing flushed:
the recovery point stays at 0; ``--flushed-mb M``: the first M MB are written with the topic's
``flush.ms`` at 100, the broker's flusher moves the recovery point past them, ``flush.ms`` is deleted
again and the rest is written, so the recovery starts inside the segment):

- non-transactional: an idempotent producer (acks=all, ``batch.size`` ``--batch-bytes``: the number
  of batches, which the scan and the producer state replay pay per item, follows from it);
- transactional: transactions of ``--per-txn`` records, every ``--abort-every``-th aborted, and a
  last one left open (``transaction.timeout.ms`` longer than the run) holding half a transaction.

Each broker is then killed with SIGKILL and started again ``--repeat`` times (the phases of the two
kinds alternate). Per restart: the seconds until ApiVersions is answered (the broker opens its
listener after loading its logs: CRC check of the segment, offset/time indexes, producer state,
LSO and ``.txnindex`` rebuilt) and until ListOffsets answers the pre-kill log end offset
(read_uncommitted) and last stable offset (read_committed). Each restart is checked: the partition
was recovered (the broker logs it), the LSO is the open transaction's first offset, the
``.txnindex`` holds the same aborted transactions as before the kill, and DescribeProducers shows
the open transaction's producer with the same first offset.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import OdradekBroker  # noqa: E402

from odradek.client.wire import WireClient  # noqa: E402

TOPIC = "recovery"
SEGMENT_BYTES = 1 << 30


def _topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])[TOPIC].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
        if t is not None and t.error is None and t.partitions and t.partitions[0].leader >= 0:
            return
        time.sleep(0.05)


def _produce(p: Producer, n: int, value: bytes) -> None:
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)


def _never() -> None:
    return None


def flush_after(bootstrap: str) -> Callable[[], None]:
    """Moves the recovery point to the log end: flush.ms 100 on the topic, wait for the broker's flusher
    (every second), flush.ms deleted again."""
    def flush() -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def alter(op: AlterConfigOpType, value: str | None) -> None:
            res = ConfigResource(ResourceType.TOPIC, TOPIC,
                                 incremental_configs=[ConfigEntry("flush.ms", value, incremental_operation=op)])
            admin.incremental_alter_configs([res])[res].result(30)

        alter(AlterConfigOpType.SET, "100")
        time.sleep(3.5)  # the flusher and the recovery point checkpoint run every second
        alter(AlterConfigOpType.DELETE, None)
    return flush


def write_plain(bootstrap: str, n: int, value: bytes, batch_bytes: int, pause_after: int = 0,
                pause: Callable[[], None] = _never) -> None:
    """``n`` records; ``pause`` runs once the first ``pause_after`` are acknowledged (0: never)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                  "batch.size": batch_bytes})
    first = min(pause_after, n)
    _produce(p, first, value)
    assert p.flush(60) == 0
    if first:
        pause()
    _produce(p, n - first, value)
    assert p.flush(60) == 0


def write_transactional(bootstrap: str, n: int, value: bytes, per_txn: int, abort_every: int,
                        batch_bytes: int, pause_after: int = 0, pause: Callable[[], None] = _never) -> Producer:
    """Writes ``n`` records in transactions; returns the producer whose last transaction is open.
    ``pause`` runs once, inside the first transaction that reaches ``pause_after`` records (0: never)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": batch_bytes,
                  "transactional.id": f"recovery-{uuid.uuid4().hex[:8]}", "transaction.timeout.ms": 900_000})
    p.init_transactions(60)
    open_n = per_txn // 2
    done, k = 0, 0
    while done < n - open_n:
        k += 1
        m = min(per_txn, n - open_n - done)
        p.begin_transaction()
        if 0 < pause_after - done <= m:  # the recovery point lands inside an ongoing transaction
            _produce(p, pause_after - done, value)
            assert p.flush(60) == 0
            pause()
            _produce(p, m - (pause_after - done), value)
        else:
            _produce(p, m, value)
        if k % abort_every == 0:
            assert p.flush(60) == 0
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
        done += m
    p.begin_transaction()  # left open across the kills
    _produce(p, open_n, value)
    assert p.flush(60) == 0
    return p


def list_offset(w: WireClient, isolation: int) -> int:
    from kio.schema.list_offsets.v7 import request as lo

    r = w.request(2, 7, replica_id=-1, isolation_level=isolation,
                  topics=(lo.ListOffsetsTopic(name=TOPIC, partitions=(
                      lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    part = r.topics[0].partitions[0]
    return int(part.offset) if int(part.error_code) == 0 else -1


def active_producers(w: WireClient) -> list[tuple[int, int, int]]:
    from kio.schema.describe_producers.v0 import request as dp

    r = w.request(61, 0, topics=(dp.TopicRequest(name=TOPIC, partition_indexes=(0,)),))
    part = r.topics[0].partitions[0]
    return sorted((int(s.producer_id), int(s.last_sequence), int(s.current_txn_start_offset))
                  for s in part.active_producers)


def _count_batches(data: bytes) -> int:
    """Batches in a segment: base offset int64, batch length int32 (bytes after that field)."""
    pos, n = 0, 0
    while pos + 12 <= len(data):
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        n += 1
    return n


def snapshot(b: OdradekBroker) -> dict[str, Any]:
    """What recovery has to give back: LEO, LSO, the producers, the transaction index bytes."""
    with WireClient(b.bootstrap) as w:
        state = {"leo": list_offset(w, 0), "lso": list_offset(w, 1), "producers": active_producers(w)}
    d = b.logdir / f"{TOPIC}-0"
    state["txnindex"] = b"".join(f.read_bytes() for f in sorted(d.glob("*.txnindex")))
    state["log_bytes"] = sum(f.stat().st_size for f in d.glob("*.log"))
    state["segments"] = len(list(d.glob("*.log")))
    state["batches"] = sum(_count_batches(f.read_bytes()) for f in d.glob("*.log"))
    return state


def restart(b: OdradekBroker, expect: dict[str, Any]) -> tuple[float, float, float]:
    """kill -9, start; (seconds to ApiVersions, seconds to ListOffsets answering LEO and LSO, the
    broker's own start-up figure: from its entry point to serving, without the interpreter's start)."""
    b.kill()
    log_before = b.log_path.stat().st_size
    t0 = time.monotonic()
    b.start()
    serving = time.monotonic() - t0
    with WireClient(b.bootstrap) as w:
        deadline = time.monotonic() + 120
        while True:
            if list_offset(w, 0) == expect["leo"] and list_offset(w, 1) == expect["lso"]:
                break
            assert time.monotonic() < deadline, "LEO/LSO not back after 120 s"
            time.sleep(0.005)
    ready = time.monotonic() - t0
    with open(b.log_path, "rb") as f:
        f.seek(log_before)
        text = f.read().decode(errors="replace")
    assert f"Recovered partition {TOPIC}-0" in text, "the partition was not recovered"
    if not expect.get("shown"):  # the broker's line, once per kind
        print("  " + next(ln for ln in text.splitlines() if f"Recovered partition {TOPIC}-0" in ln).strip())
        expect["shown"] = True
    got = snapshot(b)
    for k in ("leo", "lso", "producers", "txnindex"):
        assert got[k] == expect[k], (k, got[k], expect[k])
    return serving, ready, b.reported_start_s() or -1.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--per-txn", type=int, default=1000)
    ap.add_argument("--abort-every", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch-bytes", type=int, default=1_000_000)
    ap.add_argument("--flushed-mb", type=int, default=0)
    args = ap.parse_args()
    value = b"x" * args.size
    n = args.mb * 1_000_000 // args.size
    flushed = min(args.flushed_mb * 1_000_000 // args.size, n - 1)
    overrides = {"transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4",
                 "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                 # the recovery point a restart reads is the last one checkpointed (Kafka's 60 s default)
                 "log.flush.offset.checkpoint.interval.ms": "1000"}
    kinds = ("non-transactional", "transactional")
    with tempfile.TemporaryDirectory(prefix="txn-recovery-bench-") as d:
        brokers = {k: OdradekBroker(Path(d) / k.replace("-", "_"), overrides) for k in kinds}
        expect: dict[str, dict[str, Any]] = {}
        keep: list[Producer] = []
        try:
            for kind, b in brokers.items():
                empty_start = b.start()
                _topic(b.bootstrap)
                t0 = time.monotonic()
                if kind == "transactional":
                    keep.append(write_transactional(b.bootstrap, n, value, args.per_txn, args.abort_every,
                                                     args.batch_bytes, flushed, flush_after(b.bootstrap)))
                else:
                    write_plain(b.bootstrap, n, value, args.batch_bytes, flushed, flush_after(b.bootstrap))
                write_s = time.monotonic() - t0
                expect[kind] = snapshot(b)
                e = expect[kind]
                assert e["segments"] == 1, "the data must sit in the active segment"
                if kind == "transactional":
                    assert e["lso"] < e["leo"] and e["txnindex"], "an open transaction and aborted ones expected"
                    assert any(start == e["lso"] for _, _, start in e["producers"])
                else:
                    assert e["lso"] == e["leo"] and not e["txnindex"]
                print(f"{kind}: wrote {n} records ({e['log_bytes'] / 1e6:.1f} MB in the segment, {e['batches']} batches) in {write_s:.1f} s; "
                      f"LEO {e['leo']}, LSO {e['lso']}, {len(e['txnindex']) // 34} aborted transactions indexed; "
                      f"start with an empty log dir {empty_start:.2f} s",
                      flush=True)
            runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
            for _ in range(args.repeat):
                for kind, b in brokers.items():
                    runs[kind].append(restart(b, expect[kind]))
        finally:
            for b in brokers.values():
                b.stop()
    print(f"recovery after kill -9, {args.mb} MB in the active segment ({args.flushed_mb} MB of it flushed), "
          f"{args.repeat} restarts each (median, runs):")
    med: dict[str, float] = {}
    for kind in kinds:
        serving = [s for s, _, _ in runs[kind]]
        ready = [r for _, r, _ in runs[kind]]
        own = [o for _, _, o in runs[kind]]
        med[kind] = statistics.median(ready)
        print(f"  {kind:18s} serving {statistics.median(serving):6.2f} s   LEO+LSO answered "
              f"{med[kind]:6.2f} s   runs {[round(r, 2) for r in ready]}   broker's own start-up "
              f"{statistics.median(own):5.2f} s")
    print(f"  ratio transactional / non-transactional: {med['transactional'] / med['non-transactional']:.2f}")


if __name__ == "__main__":
    main()
