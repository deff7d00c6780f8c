"""``odradek log-dirs describe``'s output from what it gathered: the partitions' lines, then each topic's totals
with the remote size and copy lag summed over the brokers' /metrics scrapes (the all-topics samples left out)."""

from __future__ import annotations

from odradek.cli.log_dirs_describe import PartitionSizes, describe_lines, parse_remote_metrics

BROKER_0 = """# TYPE kafka_server_brokertopicmetrics_remotelogsizebytes gauge
kafka_server_brokertopicmetrics_remotelogsizebytes{topic="t"} 65536.0
kafka_server_brokertopicmetrics_remotelogsizebytes 65536.0
# TYPE kafka_server_brokertopicmetrics_remotecopylagbytes gauge
kafka_server_brokertopicmetrics_remotecopylagbytes{topic="t"} 100.0
kafka_server_brokertopicmetrics_remotecopylagbytes 100.0
# TYPE kafka_server_brokertopicmetrics_remotecopylagsegments gauge
kafka_server_brokertopicmetrics_remotecopylagsegments{topic="t"} 1.0
# TYPE kafka_log_log_size gauge
kafka_log_log_size{topic="t",partition="0"} 4096.0
"""
BROKER_1 = """# TYPE kafka_server_brokertopicmetrics_remotelogsizebytes gauge
kafka_server_brokertopicmetrics_remotelogsizebytes{topic="t"} 1000.0
"""


def test_remote_values_are_summed_over_the_brokers_per_topic() -> None:
    got = parse_remote_metrics([BROKER_0, BROKER_1])
    assert got == {"t": {"RemoteSize": 66536.0, "RemoteCopyLagBytes": 100.0, "RemoteCopyLagSegments": 1.0}}


def test_lines() -> None:
    parts = [PartitionSizes("t", 1, 1, 2000, 50, 49), PartitionSizes("t", 0, 0, 4096, 80, 79),
             PartitionSizes("plain", 0, 0, 10, 0, -1), PartitionSizes("gone", 0, -1, None, None, None)]
    remote = parse_remote_metrics([BROKER_0, BROKER_1])
    assert describe_lines(parts, remote) == [
        "Topic: gone\tPartition: 0\tLeader: none\tLocalSize: ?\tLocalLogStartOffset: ?\tHighestTieredOffset: ?",
        "Topic: gone\tLocalSize: ?\tRemoteSize: 0\tRemoteCopyLagBytes: 0\tRemoteCopyLagSegments: 0",
        "Topic: plain\tPartition: 0\tLeader: 0\tLocalSize: 10\tLocalLogStartOffset: 0\tHighestTieredOffset: -1",
        "Topic: plain\tLocalSize: 10\tRemoteSize: 0\tRemoteCopyLagBytes: 0\tRemoteCopyLagSegments: 0",
        "Topic: t\tPartition: 0\tLeader: 0\tLocalSize: 4096\tLocalLogStartOffset: 80\tHighestTieredOffset: 79",
        "Topic: t\tPartition: 1\tLeader: 1\tLocalSize: 2000\tLocalLogStartOffset: 50\tHighestTieredOffset: 49",
        "Topic: t\tLocalSize: 6096\tRemoteSize: 66536\tRemoteCopyLagBytes: 100\tRemoteCopyLagSegments: 1",
    ]
    # no metrics scraped: the remote columns are left out
    assert describe_lines(parts[:1], None) == [
        "Topic: t\tPartition: 1\tLeader: 1\tLocalSize: 2000\tLocalLogStartOffset: 50\tHighestTieredOffset: 49",
        "Topic: t\tLocalSize: 2000",
    ]
