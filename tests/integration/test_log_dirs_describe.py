"""``odradek log-dirs describe`` against a real tiered broker process (filesystem store) after real clients
(confluent-kafka) produced: per partition the local size DescribeLogDirs gives (the bytes of the local segment
files) and the tiered range (KIP-1005's earliest local and latest tiered offsets); per topic the remote size and
copy lag from the broker's /metrics, equal to the bytes of the segments in the store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from .broker import BrokerFactory
from .clients import check_acks_contiguous, create_topic, make_messages, produce, unique
from .test_tiered_broker import (
    LOCAL_RETENTION,
    SEGMENT,
    SMALL_BATCHES,
    list_offset,
    remote_segments,
    tiered_overrides,
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "log-dirs", "describe", *args], capture_output=True,
                          text=True, timeout=90)


@pytest.mark.timeout(180)
def test_describe_shows_local_and_remote_sizes(make_broker: BrokerFactory, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    b = make_broker(tiered_overrides(remote))
    topic, plain = unique("tdescribe"), unique("plain")
    create_topic(b.bootstrap, topic, 1, {"remote.storage.enable": "true", "segment.bytes": SEGMENT,
                                         "local.retention.bytes": LOCAL_RETENTION})
    create_topic(b.bootstrap, plain, 1)
    acks = produce("confluent", b.bootstrap, topic, make_messages(1000, "tdescribe", value_size=150), partition=0,
                   conf=SMALL_BATCHES)
    check_acks_contiguous(acks)
    produce("confluent", b.bootstrap, plain, make_messages(10, "plain", value_size=10), partition=0)
    last_closed = int(b.segment_files(topic, 0)[-1].name[:20]) - 1

    def local_start() -> int:
        return list_offset(b.bootstrap, topic, -4)

    # every closed segment copied, local retention applied (the local log starts past offset 0)
    wait_until(lambda: list_offset(b.bootstrap, topic, -5) >= last_closed and local_start() > 0, 90,
               "copied and trimmed locally", interval=0.3)

    def settled() -> bool:  # the gauges recorded after the last copy, the local files no longer moving
        out = _cli("--bootstrap-server", b.bootstrap, "--topic-list", f"{topic},{plain}",
                   "--metrics-url", f"http://{b.host}:{b.http_port}")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        local = sum(f.stat().st_size for f in b.segment_files(topic, 0))
        plain_size = sum(f.stat().st_size for f in b.segment_files(plain, 0))
        remote_bytes = sum((d / f"{d.name[:20]}.log").stat().st_size for d in remote_segments(remote, topic))
        want = [
            f"Topic: {plain}\tPartition: 0\tLeader: 0\tLocalSize: {plain_size}"
            "\tLocalLogStartOffset: 0\tHighestTieredOffset: -1",
            f"Topic: {plain}\tLocalSize: {plain_size}\tRemoteSize: 0\tRemoteCopyLagBytes: 0"
            "\tRemoteCopyLagSegments: 0",
            f"Topic: {topic}\tPartition: 0\tLeader: 0\tLocalSize: {local}\tLocalLogStartOffset: {local_start()}"
            f"\tHighestTieredOffset: {last_closed}",
            f"Topic: {topic}\tLocalSize: {local}\tRemoteSize: {remote_bytes}\tRemoteCopyLagBytes: 0"
            "\tRemoteCopyLagSegments: 0",
        ]
        if lines != want:
            print(lines, want)
        return lines == want

    wait_until(settled, 30, "the describe output", interval=0.5)
    # without --metrics-url: the local side alone, and a note where the remote side comes from
    out = _cli("--bootstrap-server", b.bootstrap, "--topic-list", topic)
    assert out.returncode == 0 and "RemoteSize" not in out.stdout and "--metrics-url" in out.stderr
    assert len(out.stdout.splitlines()) == 2
