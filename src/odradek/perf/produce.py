"""``odradek perf produce``: the counterpart of kafka-producer-perf-test.sh."""

from __future__ import annotations

import time
from typing import Any

from odradek.perf.common import (
    MB,
    LatencyRecorder,
    PerfOptions,
    Throttler,
    base_config,
    check_reachable,
    ensure_topic,
    make_payload,
    summary_line,
)


class _Deliveries:
    """The producer-wide delivery callback: one array append per record (latency as librdkafka measured it,
    from produce() to the delivery report)."""

    def __init__(self, recorder: LatencyRecorder) -> None:
        self.append = recorder.values.append
        self.errors = 0
        self.first_error: str | None = None

    def __call__(self, err: Any, msg: Any) -> None:
        if err is None:
            self.append(msg.latency())
        else:
            self.errors += 1
            if self.first_error is None:
                self.first_error = str(err)


def producer_config(opts: PerfOptions) -> dict[str, Any]:
    conf = base_config(opts)
    conf["acks"] = opts.acks
    # room for a full second of small records in flight: BufferError otherwise stalls the loop
    conf["queue.buffering.max.messages"] = 1_000_000
    conf.update(opts.producer_props)
    return conf


def run_produce(opts: PerfOptions) -> tuple[dict[str, Any], int]:
    from confluent_kafka import Producer

    admin = check_reachable(opts)
    partitions = ensure_topic(admin, opts)
    recorder = LatencyRecorder(opts.out, opts.record_size, "sent", opts.report_interval)
    deliveries = _Deliveries(recorder)
    conf = producer_config(opts)
    conf["on_delivery"] = deliveries
    producer = Producer(conf)
    # connect and learn the partition leaders before the clock starts
    producer.list_topics(opts.topic, timeout=10)

    payload = make_payload(opts.record_size)
    topic = opts.topic
    n = opts.num_records
    produce = producer.produce
    poll = producer.poll
    start = time.monotonic()
    deadline = start + opts.timeout
    throttler = Throttler(opts.throughput, start)
    every = throttler.check_every()
    recorder.window_start = start
    recorder.next_report = start + opts.report_interval
    sent = 0
    timed_out = False
    countdown = every
    bar = opts.progress_line("produce")
    while sent < n:
        try:
            produce(topic, payload)
        except BufferError:  # local queue full: serve delivery reports until there is room
            poll(0.001)
            continue
        sent += 1
        countdown -= 1
        if countdown == 0:
            countdown = every
            poll(0)
            now = time.monotonic()
            if now >= recorder.next_report:
                recorder.report(now)
            if bar.show:
                bar.update(sent, f"{len(producer)} awaiting delivery")
            if now >= deadline:
                timed_out = True
                break
            if throttler.rate > 0:
                throttler.pause(sent, now)
    # wait for the outstanding delivery reports
    while len(producer) > 0:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        poll(min(0.1, deadline - now))
        recorder.maybe_report(time.monotonic())
    end = time.monotonic()
    bar.done(f"{len(producer)} awaiting delivery")
    undelivered = len(producer)
    if undelivered:
        producer.purge()
        producer.poll(0)

    delivered = len(recorder.values)
    elapsed = end - start
    lat = recorder.summary_ms()
    result: dict[str, Any] = {
        "mode": "produce",
        "topic": topic,
        "partitions": partitions,
        "acks": conf.get("acks"),
        "record_size": opts.record_size,
        "records": delivered,
        "records_requested": n,
        "records_sent": sent,
        "bytes": delivered * opts.record_size,
        "elapsed_s": round(elapsed, 4),
        "records_per_sec": round(delivered / elapsed, 1) if elapsed > 0 else 0.0,
        "mb_per_sec": round(delivered * opts.record_size / MB / elapsed, 3) if elapsed > 0 else 0.0,
        "latency_ms": lat,
        "errors": deliveries.errors,
        "undelivered": undelivered,
        "timed_out": timed_out,
        "throughput_target": opts.throughput,
    }
    problems = []
    if deliveries.errors:
        problems.append(f"{deliveries.errors} records failed (first error: {deliveries.first_error})")
    if timed_out:
        problems.append(f"timed out after {opts.timeout:.0f} s with {n - delivered} of {n} records not delivered")
    if problems:
        result["error"] = "; ".join(problems)
    if not opts.json:
        print(summary_line(delivered, elapsed, opts.record_size, lat, "sent"), file=opts.out, flush=True)
    return result, 1 if problems else 0
