"""``odradek perf consume``: the counterpart of kafka-consumer-perf-test.sh.

By default the consumer assigns itself every partition of the topic from the beginning (no group
rebalance); ``--group`` subscribes through a consumer group instead. Besides throughput it reports fetch
statistics from librdkafka's own statistics: Fetch requests sent, bytes per fetch, and the broker
round-trip time percentiles (librdkafka's rolling histogram, per statistics window).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any

from odradek.perf.common import MB, PerfOptions, base_config, check_reachable, ensure_topic

STATS_INTERVAL_MS = 1000


class FetchStats:
    """Accumulates librdkafka statistics callbacks (``stats_cb``)."""

    def __init__(self) -> None:
        self.fetch_requests = 0
        self.rx_bytes = 0
        self.windows: list[dict[str, float]] = []

    def __call__(self, raw: str) -> None:
        try:
            stats = json.loads(raw)
        except ValueError:
            return
        fetches = rx = 0
        for b in stats.get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:  # bootstrap and coordinator pseudo-brokers
                continue
            fetches += int(b.get("req", {}).get("Fetch", 0))
            rx += int(b.get("rxbytes", 0))
            rtt = b.get("rtt") or {}
            if rtt.get("cnt", 0) > 0:
                self.windows.append({k: float(rtt.get(k, 0)) / 1000.0 for k in
                                     ("cnt", "avg", "p50", "p95", "p99", "p99_99", "max")} | {"cnt": rtt["cnt"]})
        self.fetch_requests = max(self.fetch_requests, fetches)
        self.rx_bytes = max(self.rx_bytes, rx)

    def summary(self) -> dict[str, Any]:
        """Round-trip times in ms: count-weighted means of the windows' avg/p50/p95 and the worst window's
        p99/p99.99/max (librdkafka keeps no histogram across windows)."""
        out: dict[str, Any] = {
            "fetch_requests": self.fetch_requests,
            "rx_bytes": self.rx_bytes,
            "bytes_per_fetch": round(self.rx_bytes / self.fetch_requests, 1) if self.fetch_requests else 0.0,
        }
        ws = self.windows
        total = sum(w["cnt"] for w in ws)
        if total:
            rtt = {k: round(sum(w[k] * w["cnt"] for w in ws) / total, 3) for k in ("avg", "p50", "p95")}
            rtt |= {k: round(max(w[k] for w in ws), 3) for k in ("p99", "p99_99", "max")}
            rtt["requests"] = int(total)
        else:
            rtt = {}
        out["rtt_ms"] = rtt
        return out


def consumer_config(opts: PerfOptions, stats: FetchStats | None = None) -> dict[str, Any]:
    conf = base_config(opts)
    conf.update({
        "group.id": opts.group or f"odradek-perf-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        # librdkafka's default of 1000 ms idles the fetcher after every fetch that filled its queue
        "fetch.queue.backoff.ms": 1,
    })
    if stats is not None:
        conf["statistics.interval.ms"] = STATS_INTERVAL_MS
        conf["stats_cb"] = stats
    conf.update(opts.consumer_props)
    return conf


def run_consume(opts: PerfOptions) -> tuple[dict[str, Any], int]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

    admin = check_reachable(opts)
    partitions = ensure_topic(admin, opts)
    stats = FetchStats()
    consumer = Consumer(consumer_config(opts, stats))
    # learn the partition leaders first: an assignment without them waits for librdkafka's offset query timer
    consumer.list_topics(opts.topic, timeout=10)
    out = opts.out
    n = opts.num_records
    start = time.monotonic()
    deadline = start + opts.timeout
    assigned_at: list[float] = []
    if opts.group:
        consumer.subscribe([opts.topic], on_assign=lambda c, ps: assigned_at.append(time.monotonic()))
    else:
        consumer.assign([TopicPartition(opts.topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        assigned_at.append(start)

    records = nbytes = 0
    first_record_at: float | None = None
    last_record_at = start
    window_start, window_records, window_bytes = start, 0, 0
    next_report = start + opts.report_interval
    errors = 0
    first_error: str | None = None
    timed_out = idle = False
    consume = consumer.consume
    message_error, message_key = Message.error, Message.key
    bar = opts.progress_line("consume")
    try:
        while records < n:
            msgs = consume(num_messages=min(10_000, n - records), timeout=0.2)
            now = time.monotonic()
            if bar.show:
                bar.update(records)
            if msgs:
                # per-message work stays in C (map/filter/sum over the Message methods): a Python
                # loop over each record costs this client a third of its CPU at 1 KB records
                failed = list(filter(None, map(message_error, msgs)))
                got = len(msgs)
                nbytes += sum(map(len, msgs)) + sum(map(len, filter(None, map(message_key, msgs))))
                if failed:
                    bad = [m for m in msgs if m.error() is not None]
                    got -= len(bad)
                    nbytes -= sum(map(len, bad)) + sum(len(m.key() or b"") for m in bad)
                    errors += len(failed)
                    if first_error is None:
                        first_error = str(failed[0])
                records += got
                window_records += got
                if got:
                    if first_record_at is None:
                        first_record_at = now
                    last_record_at = now
            if now >= next_report:
                el = now - window_start
                wb = nbytes - window_bytes
                print(f"{window_records} records received, {window_records / el:.1f} records/sec "
                      f"({wb / MB / el:.2f} MB/sec).", file=out, flush=True)
                window_start, window_records, window_bytes = now, 0, nbytes
                next_report = now + opts.report_interval
            if now >= deadline:
                timed_out = True
                break
            if now - last_record_at >= opts.idle_timeout:
                idle = True
                break
        end = last_record_at if records else time.monotonic()
        bar.update(records, force=True)
        bar.done()
        # one more statistics window so the summary covers the whole run (paused: no idle long-polls in it)
        with contextlib.suppress(Exception):
            consumer.pause(consumer.assignment())
        stats_deadline = time.monotonic() + STATS_INTERVAL_MS / 1000 + 0.2
        seen = len(stats.windows)
        while time.monotonic() < stats_deadline and len(stats.windows) == seen:
            consumer.poll(0.05)
    finally:
        consumer.close()

    elapsed = end - start
    first = first_record_at if first_record_at is not None else end
    rebalance = (assigned_at[0] - start) if assigned_at else 0.0
    fetch_elapsed = end - (assigned_at[0] if assigned_at else start)
    result: dict[str, Any] = {
        "mode": "consume",
        "topic": opts.topic,
        "partitions": partitions,
        "records": records,
        "records_requested": n,
        "bytes": nbytes,
        "elapsed_s": round(elapsed, 4),
        "records_per_sec": round(records / elapsed, 1) if elapsed > 0 else 0.0,
        "mb_per_sec": round(nbytes / MB / elapsed, 3) if elapsed > 0 else 0.0,
        "rebalance_ms": round(rebalance * 1000, 1),
        "first_record_ms": round((first - start) * 1000, 1),
        "fetch_mb_per_sec": round(nbytes / MB / fetch_elapsed, 3) if fetch_elapsed > 0 else 0.0,
        "fetch_records_per_sec": round(records / fetch_elapsed, 1) if fetch_elapsed > 0 else 0.0,
        "fetch": stats.summary(),
        "errors": errors,
        "timed_out": timed_out,
        "idle_timed_out": idle,
    }
    problems = []
    if errors:
        problems.append(f"{errors} consume errors (first: {first_error})")
    if timed_out:
        problems.append(f"timed out after {opts.timeout:.0f} s with {records} of {n} records")
    if idle:
        problems.append(f"no records for {opts.idle_timeout:.0f} s; got {records} of {n}")
    if problems:
        result["error"] = "; ".join(problems)
    if not opts.json:
        rtt = result["fetch"]["rtt_ms"]
        print(f"{records} records received, {result['records_per_sec']:.1f} records/sec "
              f"({result['mb_per_sec']:.2f} MB/sec), {nbytes / MB:.2f} MB in {elapsed:.2f} s, "
              f"rebalance {result['rebalance_ms']:.0f} ms, first record after {result['first_record_ms']:.0f} ms, "
              f"{result['fetch']['fetch_requests']} fetches ({result['fetch']['bytes_per_fetch'] / 1024:.1f} KB avg), "
              f"fetch rtt {rtt.get('avg', 0):.2f} ms avg, {rtt.get('p50', 0):.2f} ms 50th, "
              f"{rtt.get('p95', 0):.2f} ms 95th, {rtt.get('p99', 0):.2f} ms 99th, "
              f"{rtt.get('p99_99', 0):.2f} ms 99.99th, {rtt.get('max', 0):.2f} ms max.", file=out, flush=True)
    return result, 1 if problems else 0

