"""Garbage-collection pauses of a broker holding many partitions (issue 33).

One broker process (fresh log directory, ``http.listeners`` on a free port). Steps:
  1. create topic ``pN`` with ``--partitions`` partitions (confluent-kafka's AdminClient), wait until
     every partition's log directory exists;
  2. a steady produce load for ``--seconds`` (bench/produce_flood.py: 1 KB records, one 16-record batch per
     partition per request, acks=all, all partitions in turn);
  3. with ``--churn K``: K times, create ``--churn-partitions`` more partitions in a new topic, produce to
     them for 2 s, delete the topic; RSS after each round; then the produce load again for half as long.

The pauses are the broker's own ``odradek_gc_pause_seconds`` histogram and ``odradek_gc_pause_max_seconds``
(server/gc_tuning.py GcPauses) scraped from ``/metrics`` before and after each step: per step the number of
collections of each generation, their total time, and the longest full (generation-2) pause.

  python bench/gc_pause_bench.py --partitions 10000 --seconds 30 --churn 3 --churn-partitions 2000 --json
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import produce_flood  # noqa: E402
from brokers import OdradekBroker, free_port  # noqa: E402

Scrape = dict[tuple[str, str, str], float]  # (metric, generation, le) -> value


def scrape(http_port: int) -> Scrape:
    text = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=60).read().decode()
    out: Scrape = {}
    for line in text.splitlines():
        if not line.startswith(("odradek_gc_pause", "odradek_gc_collected")):
            continue
        name, value = line.rsplit(" ", 1)
        metric, _, labels = name.partition("{")
        fields = dict(kv.split("=", 1) for kv in labels.rstrip("}").split(",") if kv)
        out[(metric, fields.get("generation", "").strip('"'), fields.get("le", "").strip('"'))] = float(value)
    return out


def step(before: Scrape, after: Scrape) -> dict[str, Any]:
    """Collections, their seconds, and the longest generation-2 pause between two scrapes (the gauge when it
    grew; else an upper bound: the histogram's bucket holding them all, or the gauge's longest so far)."""
    out: dict[str, Any] = {}
    for gen in "012":
        n = after[("odradek_gc_pause_seconds_count", gen, "")] - before[("odradek_gc_pause_seconds_count", gen, "")]
        s = after[("odradek_gc_pause_seconds_sum", gen, "")] - before[("odradek_gc_pause_seconds_sum", gen, "")]
        out[f"gen{gen}_collections"] = int(n)
        out[f"gen{gen}_ms"] = round(s * 1000, 1)
        out[f"gen{gen}_collected"] = int(after[("odradek_gc_collected_objects_total", gen, "")]
                                         - before[("odradek_gc_collected_objects_total", gen, "")])
    longest = after[("odradek_gc_pause_max_seconds", "2", "")]
    if longest > before[("odradek_gc_pause_max_seconds", "2", "")]:
        out["gen2_longest_ms"] = round(longest * 1000, 1)
    else:
        bounds = sorted((float(le), v - before[(m, g, le)]) for (m, g, le), v in after.items()
                        if m == "odradek_gc_pause_seconds_bucket" and g == "2")
        top = min(next((b for b, n in bounds if n == out["gen2_collections"]), 0.0), longest)
        out["gen2_longest_ms"] = f"<= {top * 1000:g}" if out["gen2_collections"] else 0
    return out


def produce_for(bootstrap: str, topic: str, partitions: int, seconds: float) -> dict[str, Any]:
    """Produce v7 requests of 64 batches of 16 records (acks=all), five in flight, going round all partitions
    until ``seconds`` have passed (bench/produce_flood.py's requests, sent here on one connection)."""
    requests, per_request = produce_flood.build_requests(topic, partitions, 1024, 1 << 20, -1, batch_records=16)
    host, port = bootstrap.rsplit(":", 1)
    sent = errors = 0
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = produce_flood._Reader(sock)
        outstanding = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            req = requests[sent % len(requests)]
            struct.pack_into(">i", req, 8, sent)
            sock.sendall(req)
            sent += 1
            outstanding += 1
            if outstanding >= 5:
                errors += produce_flood._errors_in_response(reader.frame())
                outstanding -= 1
        while outstanding:
            errors += produce_flood._errors_in_response(reader.frame())
            outstanding -= 1
        elapsed = time.monotonic() - t0
    if errors:
        raise RuntimeError(f"{errors} partitions answered with an error")
    return {"records": sent * per_request, "records_per_sec": round(sent * per_request / elapsed)}


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 600.0) -> float:
    """Seconds until CreateTopics for ``partitions`` partitions is answered."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": min(int(timeout * 1000), 300_000)})
    admin.list_topics(timeout=30)
    t0 = time.monotonic()
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                        operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)
    return time.monotonic() - t0


def delete_topic(bootstrap: str, topic: str, timeout: float = 300.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": min(int(timeout * 1000), 300_000)})
    admin.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout)


def run(workdir: Path, partitions: int, seconds: float, churn: int, churn_partitions: int) -> dict[str, Any]:
    http_port = free_port()
    # a deleted partition's files stay open until file.delete.delay.ms (60 s by default): released within a second
    # or two here, so that the next round's 10,000 partitions do not run the broker out of descriptors
    broker = OdradekBroker(workdir, {"http.listeners": f"http://127.0.0.1:{http_port}",
                                     "log.segment.delete.delay.ms": "1000", "log.retention.check.interval.ms": "1000"})
    broker.start()
    result: dict[str, Any] = {"partitions": partitions}
    try:
        s0 = scrape(http_port)
        topic = f"p{partitions}"
        create_s = create_topic(broker.bootstrap, topic, partitions, timeout=600)
        broker.wait_partitions_on_disk(topic, partitions)
        s1 = scrape(http_port)
        result["create"] = {"seconds": round(create_s, 2), **step(s0, s1)}
        print("create:", result["create"], file=sys.stderr, flush=True)
        time.sleep(2.0)
        s1 = scrape(http_port)
        result["produce"] = {**produce_for(broker.bootstrap, topic, partitions, seconds), **step(s1, scrape(http_port))}
        result["rss_mb"] = [round(broker.rss_mb())]
        print("produce:", result["produce"], result["rss_mb"], file=sys.stderr, flush=True)
        for i in range(churn):
            t = f"churn{i}"
            s2 = scrape(http_port)
            create_topic(broker.bootstrap, t, churn_partitions, timeout=600)
            broker.wait_partitions_on_disk(t, churn_partitions)
            produce_for(broker.bootstrap, t, churn_partitions, 2.0)
            delete_topic(broker.bootstrap, t)
            time.sleep(3.0)
            result.setdefault("churn", []).append(step(s2, scrape(http_port)))
            result["rss_mb"].append(round(broker.rss_mb()))
            print("churn:", result["churn"][-1], result["rss_mb"], file=sys.stderr, flush=True)
        s3 = scrape(http_port)
        result["produce_after"] = {**produce_for(broker.bootstrap, topic, partitions, seconds / 2),
                                   **step(s3, scrape(http_port))}
    finally:
        broker.stop()
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=30.0, help="of steady produce load")
    ap.add_argument("--churn", type=int, default=0, help="create and delete --partitions more this many times")
    ap.add_argument("--churn-partitions", type=int, default=2000, help="partitions of each churn topic")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gcpause-") as tmp:
        r = run(args.workdir or Path(tmp), args.partitions, args.seconds, args.churn, args.churn_partitions)
    print(json.dumps(r) if args.json else json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
