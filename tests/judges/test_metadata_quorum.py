"""Kafka 4.4's ``kafka-metadata-quorum --bootstrap-controller`` (org.apache.kafka.tools.MetadataQuorumCommand) on a
three-voter quorum of ``odradek controller`` processes: ``describe --status`` and ``describe --replication``
print our leader, its epoch, the high watermark and the voters with their endpoints, as our own DescribeQuorum
answer says them (the Admin client finds the active controller through DescribeCluster, KIP-919)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster.kraft import Quorum, describe_quorum
from cluster.test_kraft_quorum import leader_view
from waiting import wait_until

from odradek.server import meta_properties as mp

from .conftest import Tool

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[Quorum]:
    q = Quorum(tmp_path)
    try:
        yield q.start()
    finally:
        q.stop()


def fields(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^(\w+):\s+(.*)$", text, re.M)}


def test_metadata_quorum_describe(kafka: Tool, quorum: Quorum) -> None:
    check_metadata_quorum_describe(kafka, quorum)


def check_metadata_quorum_describe(kafka: Tool, quorum: Quorum) -> None:
    view = wait_until(lambda: (p := leader_view(quorum)) is not None
                      and all(v.replica_directory_id is not None for v in p.current_voters) and p, 30,
                      "a leader that has heard from every voter")
    leader, epoch = int(view.leader_id), int(view.leader_epoch)
    hw_before = int(view.high_watermark)
    some = quorum.controllers[1 if leader != 1 else 2]  # a follower: the tool finds the leader itself

    status = fields(kafka("kafka-metadata-quorum", "--bootstrap-controller", some.address, "describe",
                          "--status").stdout)
    hw_after = int(describe_quorum(quorum.controllers[leader].address).high_watermark)
    assert status["ClusterId"] == quorum.cluster_id
    assert int(status["LeaderId"]) == leader
    assert int(status["LeaderEpoch"]) == epoch
    assert hw_before <= int(status["HighWatermark"]) <= hw_after
    voters = json.loads(status["CurrentVoters"])
    assert sorted(v["id"] for v in voters) == [1, 2, 3]
    for v in voters:
        assert v["endpoints"] == [f"CONTROLLER://{quorum.controllers[v['id']].address}"]
    assert json.loads(status["CurrentObservers"]) == []

    out = kafka("kafka-metadata-quorum", "--bootstrap-controller", quorum.bootstrap, "describe",
                "--replication").stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0][:3] == ["NodeId", "DirectoryId", "LogEndOffset"]
    rows = {int(r[0]): r for r in lines[1:]}
    assert sorted(rows) == [1, 2, 3]
    assert rows[leader][-1] == "Leader"
    assert all(rows[n][-1] == "Follower" for n in rows if n != leader)
    assert all(int(r[2]) >= hw_before for r in rows.values())
    for n, r in rows.items():  # each voter's directory id, as its meta.properties says it
        assert r[1] == (mp.read(quorum.controllers[n].data / "meta.properties") or {}).get("directory.id")
