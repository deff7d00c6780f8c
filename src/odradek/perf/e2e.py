"""``odradek perf e2e``: produce→consume latency, in the spirit of Kafka's EndToEndLatency.

A sender thread produces records at ``--throughput`` records/s (or, without it, one at a time: the next
record is sent once the previous one has been consumed, like EndToEndLatency); the main thread consumes
them. Each record carries a run id, its sequence number and its send time (``perf_counter_ns``, which
both threads share), so the latency is measured in nanoseconds, not in the record timestamp's ms.
The consumer is assigned every partition at its current end offset, read before the first send, so no
record can be missed and stale records are ignored.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from typing import Any

from odradek.perf.common import (
    MB,
    LatencyRecorder,
    PerfError,
    PerfOptions,
    Throttler,
    check_reachable,
    ensure_topic,
    make_payload,
    summary_line,
)
from odradek.perf.consume import consumer_config
from odradek.perf.produce import producer_config

HEADER = struct.Struct(">8sqq")  # run id, sequence, send time (perf_counter_ns)


class _Sender(threading.Thread):
    def __init__(self, opts: PerfOptions, producer: Any, run_id: bytes, filler: bytes, start_at: float,
                 acked: threading.Semaphore | None) -> None:
        super().__init__(name="perf-e2e-sender", daemon=True)
        self.opts = opts
        self.producer = producer
        self.run_id = run_id
        self.filler = filler
        self.start_at = start_at
        self.acked = acked
        self.stop = threading.Event()
        self.sent = 0
        self.errors = 0
        self.first_error: str | None = None
        self.done = threading.Event()

    def on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = str(err)

    def run(self) -> None:
        try:
            self._run()
        finally:
            self.done.set()

    def _run(self) -> None:
        produce = self.producer.produce
        poll = self.producer.poll
        pack = HEADER.pack
        run_id, filler, topic = self.run_id, self.filler, self.opts.topic
        throttler = Throttler(self.opts.throughput, self.start_at)
        for seq in range(self.opts.num_records):
            if self.acked is not None:
                while not self.acked.acquire(timeout=0.1):
                    if self.stop.is_set():
                        return
            elif throttler.rate > 0:
                throttler.pause(seq)
            if self.stop.is_set():
                return
            value = pack(run_id, seq, time.perf_counter_ns()) + filler
            while True:
                try:
                    produce(topic, value, on_delivery=self.on_delivery)
                    break
                except BufferError:
                    poll(0.001)
            self.sent += 1
            poll(0)
        while len(self.producer) > 0 and not self.stop.is_set():
            poll(0.05)


def run_e2e(opts: PerfOptions) -> tuple[dict[str, Any], int]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    if opts.record_size < HEADER.size:
        raise PerfError(f"--record-size must be at least {HEADER.size} bytes for e2e (send time and sequence)")
    admin = check_reachable(opts)
    partitions = ensure_topic(admin, opts)
    consumer = Consumer(consumer_config(opts))
    consumer.list_topics(opts.topic, timeout=10)
    tps = []
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(opts.topic, p), timeout=10)
        tps.append(TopicPartition(opts.topic, p, high))
    consumer.assign(tps)
    consumer.poll(0.2)  # connect and start fetching before the first record is sent

    producer = Producer(producer_config(opts))
    producer.list_topics(opts.topic, timeout=10)
    run_id = os.urandom(8)
    filler = make_payload(opts.record_size - HEADER.size)
    sync = opts.throughput <= 0
    acked = threading.Semaphore(1) if sync else None
    recorder = LatencyRecorder(opts.out, opts.record_size, "received", opts.report_interval, scale=1.0)
    start = time.monotonic()
    recorder.window_start = start
    recorder.next_report = start + opts.report_interval
    sender = _Sender(opts, producer, run_id, filler, start, acked)
    deadline = start + opts.timeout
    sender.start()

    n = opts.num_records
    received = stale = duplicates = 0
    seen = bytearray(n)
    append = recorder.values.append
    unpack = HEADER.unpack_from
    last_progress = start
    timed_out = idle = False
    try:
        while received < n:
            msg = consumer.poll(0.05)
            now_ns = time.perf_counter_ns()
            now = time.monotonic()
            if msg is not None and msg.error() is None:
                value = msg.value()
                if value is not None and len(value) >= HEADER.size:
                    rid, seq, sent_ns = unpack(value)
                    if rid != run_id or not 0 <= seq < n:
                        stale += 1
                    elif seen[seq]:
                        duplicates += 1
                    else:
                        seen[seq] = 1
                        append((now_ns - sent_ns) / 1e6)
                        received += 1
                        last_progress = now
                        if acked is not None:
                            acked.release()
            if now >= recorder.next_report:
                recorder.report(now)
            if now >= deadline:
                timed_out = True
                break
            if sender.done.is_set() and now - max(last_progress, start) >= opts.idle_timeout:
                idle = True
                break
            if sender.sent and now - last_progress >= max(opts.idle_timeout, 1.0) * 3:
                idle = True
                break
    finally:
        sender.stop.set()
        sender.join(5)
        consumer.close()
    end = time.monotonic()
    elapsed = end - start
    lat = recorder.summary_ms()
    result: dict[str, Any] = {
        "mode": "e2e",
        "topic": opts.topic,
        "partitions": partitions,
        "record_size": opts.record_size,
        "records": received,
        "records_requested": n,
        "records_sent": sender.sent,
        "lost": sender.sent - received,
        "stale": stale,
        "duplicates": duplicates,
        "elapsed_s": round(elapsed, 4),
        "records_per_sec": round(received / elapsed, 1) if elapsed > 0 else 0.0,
        "mb_per_sec": round(received * opts.record_size / MB / elapsed, 3) if elapsed > 0 else 0.0,
        "throughput_target": opts.throughput,
        "latency_ms": lat,
        "errors": sender.errors,
        "timed_out": timed_out,
        "idle_timed_out": idle,
    }
    problems = []
    if sender.errors:
        problems.append(f"{sender.errors} records failed to produce (first error: {sender.first_error})")
    if timed_out:
        problems.append(f"timed out after {opts.timeout:.0f} s with {received} of {n} records")
    elif idle:
        problems.append(f"records stopped arriving; got {received} of {n}")
    if problems:
        result["error"] = "; ".join(problems)
    if not opts.json:
        print(summary_line(received, elapsed, opts.record_size, lat, "received"), file=opts.out, flush=True)
        if sender.sent != received:
            print(f"{sender.sent - received} records sent but not received.", file=sys.stderr)
    return result, 1 if problems else 0
