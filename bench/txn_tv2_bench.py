"""Small transactions with transaction.version 1 vs 2 (KIP-890 part 2) on one fresh Odradek broker,
in one run (not a test): prints figures.

    PYTHONPATH=$PWD/src python bench/txn_tv2_bench.py [--txns 300] [--records 10] [--size 100] [--repeat 3]

Both producers speak the wire protocol (kio requests; no Python client speaks TV2) on one
connection, acks=-1, ``--records`` records of ``--size`` bytes per transaction to a one-partition
topic, committed, ``--txns`` transactions per phase:

- TV1: AddPartitionsToTxn v3, Produce v11 (the leader verifies, KIP-890 part 1), EndTxn v4;
- TV2: Produce v12 (the leader adds the partition itself), EndTxn v5 (the epoch bumps).

The broker runs at transaction.version 2 for both (TV1 clients keep their versions). The next
transaction's first request is retried while the previous one's markers are being written
(CONCURRENT_TRANSACTIONS / NOT_ENOUGH_REPLICAS), as clients do; those retries are counted. Phases
alternate ``--repeat`` times; reported: transactions per second and the median time of one.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnTopic
from kio.schema.produce.v12 import request as preq

from odradek.client.wire import WireClient
from odradek.protocol.records import build_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import OdradekBroker  # noqa: E402

RETRIABLE = (14, 15, 16, 19, 51)


class Phase:
    def __init__(self, w: WireClient, topic: str, tv: int, records: int, size: int) -> None:
        self.w, self.topic, self.tv = w, topic, tv
        self.tid = f"bench-tv{tv}-{uuid.uuid4().hex[:8]}"
        self.values = [b"x" * size] * records
        self.retries = 0
        init = self._retry(lambda: self.w.request(22, 5, transactional_id=self.tid,
                                                  transaction_timeout=datetime.timedelta(seconds=60),
                                                  producer_id=-1, producer_epoch=-1), lambda r: int(r.error_code))
        self.pid, self.epoch, self.seq = int(init.producer_id), int(init.producer_epoch), 0

    def _retry(self, call: Any, code: Any) -> Any:
        while True:
            r = call()
            if code(r) not in RETRIABLE:
                assert code(r) == 0, code(r)
                return r
            self.retries += 1
            time.sleep(0.002)

    def one(self) -> None:
        if self.tv == 1:
            self._retry(lambda: self.w.request(
                24, 3, v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=(AddPartitionsToTxnTopic(name=self.topic, partitions=(0,)),)),
                lambda r: int(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code))
        batch = bytes(build_batch([(None, v) for v in self.values], timestamp=int(time.time() * 1000),
                                  producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
                                  transactional=True))
        version = 12 if self.tv == 2 else 11
        self._retry(lambda: self.w.request(0, version, transactional_id=self.tid, acks=-1,
                                           timeout=datetime.timedelta(seconds=30),
                                           topic_data=(preq.TopicProduceData(name=self.topic, partition_data=(
                                               preq.PartitionProduceData(index=0, records=batch),)),)),
                    lambda r: int(r.responses[0].partition_responses[0].error_code))
        self.seq += len(self.values)
        end = self._retry(lambda: self.w.request(26, 5 if self.tv == 2 else 4, transactional_id=self.tid,
                                                 producer_id=self.pid, producer_epoch=self.epoch, committed=True),
                          lambda r: int(r.error_code))
        if self.tv == 2:
            self.pid, self.epoch, self.seq = int(end.producer_id), int(end.producer_epoch), 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--txns", type=int, default=300)
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        b = OdradekBroker(Path(d))
        b.start()
        try:
            subprocess.run([sys.executable, "-m", "odradek", "features", "--bootstrap-server", b.bootstrap,
                            "upgrade", "--feature", "transaction.version=2"], check=True, capture_output=True)
            topic = "tv-bench"
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            time.sleep(1.0)
            best: dict[int, tuple[float, float, int]] = {}
            with WireClient(b.bootstrap) as w:
                for _ in range(a.repeat):
                    for tv in (1, 2):
                        ph = Phase(w, topic, tv, a.records, a.size)
                        ph.one()  # warm-up
                        times = []
                        t0 = time.monotonic()
                        for _ in range(a.txns):
                            s = time.monotonic()
                            ph.one()
                            times.append(time.monotonic() - s)
                        rate = a.txns / (time.monotonic() - t0)
                        if tv not in best or rate > best[tv][0]:
                            best[tv] = (rate, statistics.median(times) * 1000, ph.retries)
        finally:
            b.stop()
    for tv, (rate, med, retries) in sorted(best.items()):
        print(f"TV{tv}: {rate:8.1f} transactions/s  median {med:6.2f} ms  retries {retries}")
    print(f"TV2 / TV1 transactions per second: {best[2][0] / best[1][0]:.2f}")


if __name__ == "__main__":
    main()
