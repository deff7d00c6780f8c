"""Hostile input, cluster mode: a client posing as the controller or as a follower (issue 12, item 7).

The cluster has separate listeners, as Kafka deployments do: EXTERNAL for clients, INTERNAL for
brokers (``inter.broker.listener.name=INTERNAL``). On EXTERNAL the controller's requests are
answered CLUSTER_AUTHORIZATION_FAILED and a follower fetch TOPIC_AUTHORIZATION_FAILED (Kafka's
answers to a principal without CLUSTER_ACTION) and change nothing; on INTERNAL a controller epoch
ZooKeeper does not hold is refused (STALE_CONTROLLER_EPOCH) instead of fencing the real controller,
and a fetch from a broker that is not a replica of the partition gets NOT_LEADER_OR_FOLLOWER /
UNKNOWN_LEADER_EPOCH (Partition.followerReplicaOrThrow). The cluster keeps working throughout.
"""

from __future__ import annotations

import datetime
import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from integration.broker import HOST, free_port
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.static.primitive import i8, i32, i64
from waiting import wait_until

from odradek.client.wire import WireClient

from .cluster import Cluster
from .zk import Ensemble

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_AUTHORIZATION_FAILED = 29
STALE_CONTROLLER_EPOCH = 11
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_LEADER_EPOCH = 75


class SplitCluster(Cluster):
    """Brokers with EXTERNAL (``Broker.port``, what tests and clients use) and INTERNAL listeners."""

    def __init__(self, base: Path, zk: Ensemble, n: int = 3, control_plane: bool = False) -> None:
        super().__init__(base, zk, n)
        self.internal: dict[int, int] = {}
        self.control: dict[int, int] = {}
        for b, broker in self.brokers.items():
            self.internal[b] = free_port()
            listeners = f"EXTERNAL://{HOST}:{broker.port},INTERNAL://{HOST}:{self.internal[b]}"
            protocols = "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT"
            if control_plane:  # KIP-291: the controller's requests on a listener of their own
                self.control[b] = free_port()
                listeners += f",CONTROL://{HOST}:{self.control[b]}"
                protocols += ",CONTROL:PLAINTEXT"
                broker.overrides["control.plane.listener.name"] = "CONTROL"
            broker.overrides.update({
                "listeners": listeners,
                "listener.security.protocol.map": protocols,
                "inter.broker.listener.name": "INTERNAL",
            })

    def external(self, b: int) -> str:
        return self.brokers[b].bootstrap

    @property
    def live(self) -> str:
        return ",".join(br.bootstrap for br in self.brokers.values() if br.running)

    def internal_addr(self, b: int) -> str:
        return f"{HOST}:{self.internal[b]}"


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[SplitCluster]:
    c = SplitCluster(tmp_path, zookeeper, 3)
    c.start()
    yield c
    c.stop()


@pytest.fixture
def control_plane_cluster(tmp_path: Path, zookeeper: Ensemble) -> Iterator[SplitCluster]:
    c = SplitCluster(tmp_path, zookeeper, 3, control_plane=True)
    c.start()
    yield c
    c.stop()


def established_to(port: int) -> int:
    """Established TCP connections to 127.0.0.1:``port`` on this machine (/proc/net/tcp)."""
    n = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        if state == "01" and remote == f"0100007F:{port:04X}":
            n += 1
    return n


def interbroker(addr: str, api_key: int, body: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """One request of protocol.interbroker: header v1, a JSON body; response header v0."""
    host, port = addr.rsplit(":", 1)
    client = b"not-a-broker"
    head = struct.pack(">hhih", api_key, 0, 7, len(client)) + client
    payload = head + json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(payload)) + payload)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed after {len(buf)} bytes")
            buf += chunk
    (corr,) = struct.unpack_from(">i", buf, 4)
    assert corr == 7
    return dict(json.loads(buf[8:]))


def partition_state(c: Cluster, topic: str, p: int, leader: int, epoch: int, isr: list[int],
                    replicas: list[int]) -> dict[str, Any]:
    return {"topic": topic, "partition": p, "controller_epoch": epoch, "leader": leader, "leader_epoch": 10_000,
            "isr": isr, "zk_version": 0, "replicas": replicas, "adding_replicas": [], "removing_replicas": [],
            "is_new": False}


def follower_fetch(addr: str, topic: str, replica_id: int, offset: int, leader_epoch: int = -1) -> tuple[int, int]:
    """A Fetch v12 posing as replica ``replica_id``: (error code, high watermark) of partition 0."""
    req = FetchRequest(
        cluster_id=None, replica_id=i32(replica_id), max_wait=datetime.timedelta(0), min_bytes=i32(0),
        max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(leader_epoch), fetch_offset=i64(offset),
            last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id="",
    )
    fields = {f: getattr(req, f) for f in req.__dataclass_fields__ if not f.startswith("__")}
    with WireClient(addr) as w:
        resp = w.request(1, 12, **fields)
    (part,) = resp.responses[0].partitions
    return int(part.error_code), int(part.high_watermark)


def create(c: SplitCluster, topic: str, assignment: list[list[int]] | None = None, rf: int = 3,
           **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": c.live})
    nt = (NewTopic(topic, len(assignment), replica_assignment=assignment, config=configs) if assignment
          else NewTopic(topic, 1, rf, config=configs))
    admin.create_topics([nt], operation_timeout=30)[topic].result(30)
    wait_until(lambda: len(c.state(topic, 0).get("isr", [])) == len(assignment[0] if assignment else range(rf)),
               30, f"{topic} fully in sync")


def produce(c: SplitCluster, topic: str, n: int, tag: str) -> None:
    p = Producer({"bootstrap.servers": c.live, "acks": "all", "linger.ms": 2, "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(topic, f"{tag}-{i}".encode())
    assert p.flush(30) == 0
    errors: list[Any] = []
    p2 = Producer({"bootstrap.servers": c.live, "acks": "all", "message.timeout.ms": 30000})
    p2.produce(topic, b"check", on_delivery=lambda err, _m: errors.append(err))
    p2.flush(30)
    assert errors == [None], errors


def consume(c: SplitCluster, topic: str, want: int, timeout: float = 30.0) -> list[bytes]:
    cons = Consumer({"bootstrap.servers": c.live, "group.id": f"g-{topic}", "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 1000})
    cons.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < want and time.monotonic() < deadline:
            for m in cons.consume(1000, 0.5):
                if not m.error():
                    out.append(m.value())
    finally:
        cons.close()
    return out


def test_metadata_on_external_names_external_endpoints(cluster: SplitCluster) -> None:
    c = cluster
    md = AdminClient({"bootstrap.servers": c.external(1)}).list_topics(timeout=10)
    assert {b.id: b.port for b in md.brokers.values()} == {b: br.port for b, br in c.brokers.items()}


def test_controller_requests_on_the_client_listener_are_refused(cluster: SplitCluster) -> None:
    c = cluster
    create(c, "victim", rf=3, **{"min.insync.replicas": "2"})
    produce(c, "victim", 50, "a")
    controller = c.controller()
    assert controller is not None
    epoch = c.controller_epoch()
    target = next(b for b in c.brokers if b != controller)
    state_before = c.state("victim", 0)
    def replica_bytes() -> int:
        return sum(f.stat().st_size for f in c.brokers[target].segment_files("victim", 0))

    wait_until(lambda: replica_bytes() > 0, 10, "the follower's copy")

    # StopReplica(delete=true) in the controller's name: would delete the replica's log
    sr = {"controller_id": controller, "controller_epoch": epoch, "broker_epoch": -1,
          "partitions": [{"topic": "victim", "partition": 0, "leader_epoch": -2, "delete": True}]}
    codes = [interbroker(c.external(target), STOP_REPLICA, sr)["error_code"]]
    # a LeaderAndIsr with a far higher controller epoch: would fence the real controller
    lai = {"controller_id": target, "controller_epoch": epoch + 100, "broker_epoch": -1,
           "partitions": [partition_state(c, "victim", 0, target, epoch + 100, [target], [target])],
           "live_leaders": [], "topic_ids": {}}
    codes.append(interbroker(c.external(target), LEADER_AND_ISR, lai)["error_code"])
    um = {"controller_id": target, "controller_epoch": epoch + 100, "broker_epoch": -1, "partitions": [],
          "live_brokers": [], "topic_ids": {}, "full": True}
    codes.append(interbroker(c.external(target), UPDATE_METADATA, um)["error_code"])
    cs = {"broker_id": target, "broker_epoch": -1}
    codes.append(interbroker(c.external(controller), CONTROLLED_SHUTDOWN, cs)["error_code"])

    assert replica_bytes() > 0, "StopReplica on the client listener deleted a log"
    assert c.state("victim", 0)["leader"] == state_before["leader"]
    # the real controller still governs the target: a topic created now is replicated there too
    create(c, "after", assignment=[[target, controller]], **{"min.insync.replicas": "2"})
    produce(c, "after", 20, "b")
    assert len(consume(c, "after", 21)) == 21
    produce(c, "victim", 50, "c")
    assert len(consume(c, "victim", 102)) == 102
    assert codes == [CLUSTER_AUTHORIZATION_FAILED] * 4


def test_unknown_controller_epoch_on_the_broker_listener_does_not_fence_the_controller(cluster: SplitCluster) -> None:
    c = cluster
    controller = c.controller()
    assert controller is not None
    epoch = c.controller_epoch()
    target = next(b for b in c.brokers if b != controller)
    um = {"controller_id": target, "controller_epoch": epoch + 100, "broker_epoch": -1, "partitions": [],
          "live_brokers": [], "topic_ids": {}, "full": True}
    codes = [interbroker(c.internal_addr(target), UPDATE_METADATA, um)["error_code"]]
    # the controller's own epoch with another broker's id: not the controller ZooKeeper names
    um2 = dict(um, controller_id=target, controller_epoch=epoch)
    codes.append(interbroker(c.internal_addr(target), UPDATE_METADATA, um2)["error_code"])
    md = AdminClient({"bootstrap.servers": c.external(target)}).list_topics(timeout=10)
    assert len(md.brokers) == 3, "the forged UpdateMetadata emptied the metadata cache"
    create(c, "after2", assignment=[[target, controller]], **{"min.insync.replicas": "2"})
    produce(c, "after2", 20, "d")
    assert len(consume(c, "after2", 21)) == 21
    assert codes == [STALE_CONTROLLER_EPOCH] * 2


def test_forged_follower_fetches_change_neither_isr_nor_high_watermark(cluster: SplitCluster) -> None:
    c = cluster
    controller = c.controller()
    assert controller is not None
    others = [b for b in c.brokers if b != controller]
    leader, victim = controller, others[0]  # the follower that dies; the third broker stays a replica
    create(c, "isr", assignment=[[leader, victim, others[1]]], **{"min.insync.replicas": "2"})
    produce(c, "isr", 30, "e")
    c.kill(victim)
    wait_until(lambda: victim not in c.state("isr", 0).get("isr", [victim]), 30,
               "the dead follower leaving the ISR")
    produce(c, "isr", 30, "f")
    leo = 62
    # posing as the dead follower on the client listener: refused, the ISR does not grow back
    codes = [follower_fetch(c.external(leader), "isr", victim, leo)[0]]
    # on the broker listener, a broker id that is no replica of the partition
    codes.append(follower_fetch(c.internal_addr(leader), "isr", 99, leo)[0])
    epoch = int(c.state("isr", 0)["leader_epoch"])
    codes.append(follower_fetch(c.internal_addr(leader), "isr", 99, leo, leader_epoch=epoch)[0])
    time.sleep(1.5)
    assert victim not in c.state("isr", 0)["isr"], "a forged fetch put a dead broker back into the ISR"
    produce(c, "isr", 10, "g")
    assert len(consume(c, "isr", 73)) == 73
    assert codes == [TOPIC_AUTHORIZATION_FAILED, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH]


def test_controller_uses_the_control_plane_listener(control_plane_cluster: SplitCluster) -> None:
    c = control_plane_cluster
    create(c, "cp", rf=3, **{"min.insync.replicas": "2"})
    produce(c, "cp", 30, "h")
    assert len(consume(c, "cp", 31)) == 31
    controller = c.controller()
    assert controller is not None
    # the controller's channel to every broker is on that broker's CONTROL listener
    wait_until(lambda: all(established_to(c.control[b]) >= 1 for b in c.brokers), 10,
               "controller connections to every CONTROL listener")
    epoch = c.controller_epoch()
    target = next(b for b in c.brokers if b != controller)
    um = {"controller_id": target, "controller_epoch": epoch + 1, "broker_epoch": -1, "partitions": [],
          "live_brokers": [], "topic_ids": {}, "full": True}
    assert interbroker(c.external(target), UPDATE_METADATA, um)["error_code"] == CLUSTER_AUTHORIZATION_FAILED
    assert interbroker(f"{HOST}:{c.control[target]}", UPDATE_METADATA, um)["error_code"] == STALE_CONTROLLER_EPOCH
    create(c, "cp2", assignment=[[target, controller]], **{"min.insync.replicas": "2"})
    produce(c, "cp2", 10, "i")
    assert len(consume(c, "cp2", 11)) == 11
