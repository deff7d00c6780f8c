"""The broker's own fetch ceiling: a raw-socket client that pipelines Fetch v12 requests
for every partition of a topic and discards the response bytes unparsed (beyond the
size prefix), so the client costs almost nothing. Prints MB/s served.

    python bench/fetch_ceiling.py --bootstrap-server 127.0.0.1:9092 --topic T [--seconds 5]
"""

from __future__ import annotations

import argparse
import datetime
import io
import socket
import struct
import time

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_writer
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from odradek.client.wire import WireClient


def fetch_frame(corr: int, topic: str, offsets: dict[int, int], max_bytes: int) -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=i16(1), request_api_version=i16(12),
                                                     correlation_id=i32(corr), client_id="ceiling"))
    req = FetchRequest(
        cluster_id=None, replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)), min_bytes=i32(1),
        max_bytes=i32(max_bytes), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=tuple(
            FetchPartition(partition=i32(p), current_leader_epoch=i32(-1), fetch_offset=i64(o),
                           last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20))
            for p, o in offsets.items())),),
        forgotten_topics_data=(), rack_id="",
    )
    entity_writer(FetchRequest)(buf, req)
    body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-bytes", type=int, default=50 << 20)
    args = ap.parse_args()
    with WireClient(args.bootstrap_server) as c:
        md = c.request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    parts = [p.partition_index for t in md.topics if t.name == args.topic for p in t.partitions]
    host, _, port = args.bootstrap_server.rpartition(":")
    s = socket.create_connection((host, int(port)))
    frame = fetch_frame(1, args.topic, {p: 0 for p in parts}, args.max_bytes)  # same offsets: re-reads the head
    buf = bytearray(64 << 20)
    view = memoryview(buf)
    total = 0
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        s.sendall(frame)
        got = 0
        while got < 4:
            got += s.recv_into(view[got:4])
        size = struct.unpack(">i", buf[:4])[0]
        left = size
        while left:
            r = s.recv_into(view[: min(left, len(buf))])
            left -= r
        total += size
        n += 1
    dt = time.perf_counter() - t0
    print(f"{n} fetches, {total / dt / 2**20:.0f} MB/s served ({total / n / 2**20:.1f} MB per fetch)")


if __name__ == "__main__":
    main()
