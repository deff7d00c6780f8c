"""``odradek log-dirs describe``: per partition, the local size and the tiered range; per topic, the remote size and
the copy lag (tiered storage, KIP-405), from what the brokers expose as Kafka's do.

Kafka has no request that carries remote sizes: DescribeLogDirs (what ``kafka-log-dirs.sh --describe`` sends)
reports the local log only, and the remote tier's bytes are the RemoteStorageMetrics gauges of BrokerTopicMetrics
(``RemoteLogSizeBytes``, ``RemoteCopyLagBytes``, ``RemoteCopyLagSegments``, KIP-963), kept per partition by the
leader but published per topic. So, as a Kafka operator would put them together:

- **local size** per partition: DescribeLogDirs (v4) sent to each partition's leader, its replica's size (as
  kafka-log-dirs.sh, which asks every broker);
- **tiered range** per partition: ListOffsets (v9) to the leader with KIP-1005's ``-4`` (earliest local offset: the
  local log starts there) and ``-5`` (latest tiered offset: the highest offset copied to the remote store; -1 for
  none), as ``kafka-get-offsets.sh --time -4 / -5`` asks;
- **remote size and copy lag** per topic: scraped from the brokers' ``/metrics`` (``--metrics-url``, one per
  broker: each broker reports the partitions it leads, so the values are summed over the URLs), the series
  ``kafka_server_brokertopicmetrics_remotelogsizebytes{topic}``, ``..._remotecopylagbytes{topic}`` and
  ``..._remotecopylagsegments{topic}`` (Strimzi's names for those MBeans; docs/metrics.md). Without
  ``--metrics-url`` these are left out, with a note. No broker exposes a partition's remote bytes.

Output, one line per partition then one per topic, tab-separated ``Key: value`` as kafka-topics.sh describes::

    Topic: t	Partition: 0	Leader: 0	LocalSize: 49152	LocalLogStartOffset: 80	HighestTieredOffset: 79
    Topic: t	LocalSize: 49152	RemoteSize: 65536	RemoteCopyLagBytes: 0	RemoteCopyLagSegments: 0
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REMOTE_SERIES = {  # the /metrics series (Kafka's BrokerTopicMetrics gauges) -> the column
    "kafka_server_brokertopicmetrics_remotelogsizebytes": "RemoteSize",
    "kafka_server_brokertopicmetrics_remotecopylagbytes": "RemoteCopyLagBytes",
    "kafka_server_brokertopicmetrics_remotecopylagsegments": "RemoteCopyLagSegments",
}
EARLIEST_LOCAL = -4  # KIP-1005
LATEST_TIERED = -5


@dataclass(frozen=True, slots=True)
class PartitionSizes:
    topic: str
    partition: int
    leader: int
    local_size: int | None  # None: the leader did not report it
    local_log_start: int | None
    highest_tiered: int | None


def add_parser(lsub: Any) -> None:
    d = lsub.add_parser("describe", help="local size and tiered range per partition, remote size and copy lag "
                                         "per topic (a running cluster)")
    d.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    d.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    d.add_argument("--topic-list", help="comma-separated topics (default: every topic but internal ones)")
    d.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                   help="a broker's /metrics (http.listeners), once per broker: the remote size and copy lag")
    d.add_argument("--command-timeout", type=float, default=30.0)
    d.set_defaults(func=run)


def parse_remote_metrics(texts: Iterable[str]) -> dict[str, dict[str, float]]:
    """topic -> column -> the sum over the scrapes of the topic's RemoteLogSizeBytes, RemoteCopyLagBytes and
    RemoteCopyLagSegments (the samples without a topic label, the all-topics ones, are left out)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for text in texts:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                column = REMOTE_SERIES.get(s.name)
                topic = s.labels.get("topic")
                if column is None or topic is None:
                    continue
                cols = out.setdefault(topic, {})
                cols[column] = cols.get(column, 0.0) + s.value
    return out


def describe_lines(partitions: Sequence[PartitionSizes], remote: Mapping[str, Mapping[str, float]] | None) -> list[str]:
    """The output: each topic's partitions in order, then its totals (``remote`` None: no metrics scraped)."""

    def num(v: int | float | None) -> str:
        return "?" if v is None else str(int(v))

    lines: list[str] = []
    by_topic: dict[str, list[PartitionSizes]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    for topic in sorted(by_topic):
        parts = sorted(by_topic[topic], key=lambda p: p.partition)
        for p in parts:
            lines.append(f"Topic: {topic}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}"
                         f"\tLocalSize: {num(p.local_size)}\tLocalLogStartOffset: {num(p.local_log_start)}"
                         f"\tHighestTieredOffset: {num(p.highest_tiered)}")
        sizes = [p.local_size for p in parts]
        total = None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)
        line = f"Topic: {topic}\tLocalSize: {num(total)}"
        if remote is not None:
            cols = remote.get(topic, {})  # a topic no broker tiers has no series: 0 in the remote tier
            line += "".join(f"\t{c}: {num(cols.get(c, 0))}" for c in REMOTE_SERIES.values())
        lines.append(line)
    return lines


def _scrape(url: str, timeout: float) -> str:
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (an operator's URL)
        return bytes(r.read()).decode()


def gather(args: argparse.Namespace) -> list[PartitionSizes]:
    """Metadata from the bootstrap broker, then DescribeLogDirs and ListOffsets (-4, -5) to each leader."""
    from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic
    from kio.schema.list_offsets.v9 import request as lo
    from kio.schema.metadata.v12.request import MetadataRequestTopic
    from kio.schema.types import TopicName
    from kio.static.primitive import i32, i64

    from odradek.client.command_config import client_security
    from odradek.client.wire import WireClient

    security = client_security(args.command_config)
    timeout = args.command_timeout
    wanted = [t.strip() for t in (args.topic_list or "").split(",") if t.strip()]
    with WireClient(args.bootstrap_server, timeout=timeout, security=security) as w:
        asked = tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in wanted)
        md = w.request(3, 12, topics=asked or None, allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)
    brokers = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in md.brokers}
    leaders: dict[int, list[tuple[str, int]]] = {}
    known: list[tuple[str, int, int]] = []
    for t in md.topics:
        if int(t.error_code) != 0:
            raise ValueError(f"topic {t.name}: error {int(t.error_code)}")
        if not wanted and t.is_internal:
            continue
        for p in t.partitions:
            known.append((str(t.name), int(p.partition_index), int(p.leader_id)))
            leaders.setdefault(int(p.leader_id), []).append((str(t.name), int(p.partition_index)))
    sizes: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int, int], int] = {}
    for leader, tps in leaders.items():
        if leader not in brokers:
            continue
        topics: dict[str, list[int]] = {}
        for name, p in tps:
            topics.setdefault(name, []).append(p)
        with WireClient(brokers[leader], timeout=timeout, security=security) as c:
            r = c.request(35, 4, topics=tuple(
                DescribableLogDirTopic(topic=TopicName(n), partitions=tuple(map(i32, ps))) for n, ps in topics.items()))
            for result in r.results:
                for t in result.topics:
                    for p in t.partitions:
                        if not p.is_future_key:
                            sizes[(str(t.name), int(p.partition_index))] = int(p.partition_size)
            for spec in (EARLIEST_LOCAL, LATEST_TIERED):
                r = c.request(2, 9, replica_id=-1, isolation_level=0, topics=tuple(
                    lo.ListOffsetsTopic(name=TopicName(n), partitions=tuple(
                        lo.ListOffsetsPartition(partition_index=i32(p), current_leader_epoch=i32(-1),
                                                timestamp=i64(spec))
                        for p in ps)) for n, ps in topics.items()))
                for t in r.topics:
                    for p in t.partitions:
                        if int(p.error_code) == 0:
                            offsets[(str(t.name), int(p.partition_index), spec)] = int(p.offset)
    return [PartitionSizes(t, p, leader, sizes.get((t, p)), offsets.get((t, p, EARLIEST_LOCAL)),
                           offsets.get((t, p, LATEST_TIERED))) for t, p, leader in known]


def run(args: argparse.Namespace) -> int:
    try:
        partitions = gather(args)
        remote = (parse_remote_metrics(_scrape(u, args.command_timeout) for u in args.metrics_url)
                  if args.metrics_url else None)
    except (OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    for line in describe_lines(partitions, remote):
        print(line)
    if remote is None:
        print("note: the remote size and copy lag are the brokers' RemoteLogSizeBytes and RemoteCopyLagBytes "
              "metrics (no Kafka request carries them): give each broker's /metrics with --metrics-url",
              file=sys.stderr)
    return 0
