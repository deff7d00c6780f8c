"""A produce load generator that costs the client almost nothing: pre-encoded ProduceRequests sent
back to back on one connection, so the broker's per-batch cost alone sets the rate.

Why: librdkafka (``rdkafka_performance``, ``odradek perf produce``) sends one partition per
ProduceRequest and its broker thread walks every partition with queued messages on each wake-up;
at 10,000 partitions on one broker it spends 2-3x the broker's CPU (bench/partitions_bench.py
reports both sides), so it, not the broker, sets the rate there. Kafka's Java producer sends one
request per broker holding every partition's ready batch; this tool sends requests shaped so:

- every request is about ``--request-bytes`` (1 MB) of 1 KB records (``--record-size``);
- a topic with ``P`` partitions gets ``min(P, request_bytes // record_size)`` batches per
  request, each with the records that fill the request: 6 partitions, 6 batches of ~170
  records; 10,000 partitions, 1,000 batches of one record, the requests going round all
  partitions in turn (every partition gets data);
- ``--in-flight`` requests (5, Kafka's max.in.flight.requests.per.connection) are outstanding;
  responses are read and every partition's error code checked.

The request layout is Produce v7 (request header v1): transactional_id null, acks, timeout_ms,
one topic, ``[partition index, records]``. Records are magic v2 batches with CRC-32C, no
producer id, the timestamp of when the requests were built.

    python bench/produce_flood.py --bootstrap 127.0.0.1:9092 --topic p10000 --partitions 10000
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from typing import Any

from odradek.protocol.records import build_batch

API_KEY_PRODUCE = 0
VERSION = 7
MB = 1024.0 * 1024.0
_HEADER = struct.Struct(">ihhih")  # size, api_key, api_version, correlation_id, client_id length
CLIENT_ID = b"odradek-flood"


def encode_request(topic: str, parts: list[tuple[int, bytes]], acks: int, timeout_ms: int) -> bytearray:
    """One Produce v7 request frame (size prefix included); correlation id 0, set when sent."""
    name = topic.encode()
    body = bytearray(struct.pack(">hhi", -1, acks, timeout_ms))
    body += struct.pack(">i", 1) + struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts))
    for index, records in parts:
        body += struct.pack(">ii", index, len(records)) + records
    size = _HEADER.size - 4 + len(CLIENT_ID) + len(body)
    return bytearray(_HEADER.pack(size, API_KEY_PRODUCE, VERSION, 0, len(CLIENT_ID)) + CLIENT_ID + body)


def batches_per_request(partitions: int, record_size: int, request_bytes: int, batch_records: int = 0) -> int:
    """One batch per partition, as many as fit ``request_bytes`` (at most ``partitions``)."""
    per_request = max(request_bytes // record_size, 1)
    if batch_records > 0:
        return min(partitions, max(per_request // min(batch_records, per_request), 1))
    return min(partitions, per_request)


def build_requests(topic: str, partitions: int, record_size: int, request_bytes: int, acks: int,
                   timeout_ms: int = 30_000, batch_records: int = 0) -> tuple[list[bytearray], int]:
    """The requests of one round over all partitions, and the records each request carries.
    ``batch_records`` > 0 fixes the records per batch (the producer's batch.size), one batch per
    partition per request and as many batches as fit ``request_bytes``; 0 fills the request."""
    batches = batches_per_request(partitions, record_size, request_bytes, batch_records)
    records_per_batch = max(max(request_bytes // record_size, 1) // batches, 1)
    if batch_records > 0:
        records_per_batch = min(batch_records, records_per_batch)
    now = int(time.time() * 1000)
    value = bytes(record_size)
    batch = build_batch([(None, value)] * records_per_batch, timestamp=now)
    requests = []
    for start in range(0, partitions, batches):
        parts = [(p % partitions, batch) for p in range(start, start + batches)]
        requests.append(encode_request(topic, parts, acks, timeout_ms))
    return requests, batches * records_per_batch


def _errors_in_response(frame: bytes) -> int:
    """Partitions with a non-zero error code in a Produce v7 response (after the size prefix)."""
    pos = 4  # correlation id
    errors = 0
    (topics,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    for _ in range(topics):
        (n,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + n
        (count,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        for _ in range(count):
            _, err = struct.unpack_from(">ih", frame, pos)
            pos += 4 + 2 + 8 + 8 + 8
            errors += err != 0
    return errors


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def frame(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf, 0)
                if len(self.buf) >= 4 + size:
                    out = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    return out
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk


def run(bootstrap: str, topic: str, partitions: int, records: int, *, record_size: int = 1024,
        request_bytes: int = 1 << 20, acks: int = -1, in_flight: int = 5,
        batch_records: int = 0) -> dict[str, Any]:
    """Produce at least ``records`` records; the result in ``odradek perf --json``'s shape."""
    requests, per_request = build_requests(topic, partitions, record_size, request_bytes, acks,
                                           batch_records=batch_records)
    total = -(-records // per_request)  # requests to send
    host, port = bootstrap.rsplit(":", 1)
    cpu0 = time.process_time()
    errors = 0
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = _Reader(sock)
        outstanding = 0
        t0 = time.monotonic()
        for i in range(total):
            req = requests[i % len(requests)]
            struct.pack_into(">i", req, 8, i)
            sock.sendall(req)
            outstanding += 1
            if outstanding >= in_flight:
                errors += _errors_in_response(reader.frame())
                outstanding -= 1
        while outstanding:
            errors += _errors_in_response(reader.frame())
            outstanding -= 1
        elapsed = time.monotonic() - t0
    sent = total * per_request
    result: dict[str, Any] = {
        "mode": "produce", "client": "flood", "record_size": record_size, "records": sent,
        "requests": total, "records_per_request": per_request,
        "batches_per_request": batches_per_request(partitions, record_size, request_bytes, batch_records),
        "elapsed_s": round(elapsed, 4), "records_per_sec": round(sent / elapsed, 1),
        "mb_per_sec": round(sent * record_size / MB / elapsed, 3), "errors": errors,
        "client_cpu_s": round(time.process_time() - cpu0, 3),
    }
    if errors:
        result["error"] = f"{errors} partitions answered with an error"
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--request-bytes", type=int, default=1 << 20)
    ap.add_argument("--acks", type=int, default=-1, choices=(-1, 0, 1))
    ap.add_argument("--in-flight", type=int, default=5)
    ap.add_argument("--batch-records", type=int, default=0,
                    help="records per batch (the producer's batch.size); 0: batches fill the request")
    args = ap.parse_args()
    if args.acks == 0:
        ap.error("acks=0 has no responses to pace the sender")
    r = run(args.bootstrap, args.topic, args.partitions, args.records, record_size=args.record_size,
            request_bytes=args.request_bytes, acks=args.acks, in_flight=args.in_flight,
            batch_records=args.batch_records)
    print(json.dumps(r))
    return 1 if r.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
