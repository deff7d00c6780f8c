"""Brokers authenticate to each other (issue 15): three brokers whose inter-broker listener is
SASL_SSL with SCRAM-SHA-512, or SSL with client certificates (mTLS), with an authorizer. Replication
(RF=3, acks=all), a transaction across three leaders and a controller failover work over it; a client on the inter-broker listener
that is not a broker — anonymous, or authenticated as a user without ClusterAction — has its
follower Fetch answered TOPIC_AUTHORIZATION_FAILED and its ControlledShutdown refused, while
the cluster keeps working.

Clients use a second listener (SASL_PLAINTEXT, PLAIN) as ``admin``, a super user. SCRAM
credentials are written to /config/users before the brokers start, as Kafka's
``kafka-configs --zookeeper`` bootstraps them.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from integration.broker import free_port
from integration.security import ADMIN_PASSWORD, ALICE_PASSWORD, PLAIN_JAAS, Certs, make_certs
from waiting import wait_until

from odradek.client.async_wire import AsyncWireClient
from odradek.client.secure_connect import connector, open_connection
from odradek.controller.channel import interbroker_request
from odradek.protocol import errors
from odradek.protocol import interbroker as ib
from odradek.security.inter_broker import ClientSecurity
from odradek.security.scram import make_credential

from .cluster import Cluster
from .zk import Ensemble

TOPIC = "secure-replication"
BROKER_PASSWORD = "broker-secret"
SCRAM = "SCRAM-SHA-512"
MODES = ["sasl_ssl_scram", "ssl_mtls"]


def _overrides(mode: str, certs: Certs) -> dict[str, str]:
    common = {
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.client.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.client.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    }
    if mode == "sasl_ssl_scram":
        return {**common,
                "listener.security.protocol.map": "INTERNAL:SASL_SSL,CLIENT:SASL_PLAINTEXT",
                "sasl.mechanism.inter.broker.protocol": SCRAM,
                "listener.name.internal.sasl.enabled.mechanisms": SCRAM,
                "listener.name.internal.scram-sha-512.sasl.jaas.config":
                    'org.apache.kafka.common.security.scram.ScramLoginModule required '
                    f'username="broker" password="{BROKER_PASSWORD}";',
                "super.users": "User:broker;User:admin"}
    # mTLS: the broker's certificate (CN=broker0) is its principal; certificates are requested,
    # not required, so that a client without one gets in as User:ANONYMOUS and meets the authorizer
    return {**common,
            "listener.security.protocol.map": "INTERNAL:SSL,CLIENT:SASL_PLAINTEXT",
            "listener.name.internal.ssl.client.auth": "requested",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
            "super.users": "User:broker0;User:admin"}


@pytest.fixture(params=MODES)
def cluster(request: pytest.FixtureRequest, tmp_path: Path, zookeeper: Ensemble) -> Iterator[Cluster]:
    mode: str = request.param
    certs = make_certs(tmp_path / "certs")
    c = Cluster(tmp_path, zookeeper, 3, _overrides(mode, certs))
    # the harness checks readiness with ApiVersions on broker.port: the client listener is there
    internal_ports = {}
    for b, broker in c.brokers.items():
        internal_ports[b] = free_port()
        broker.overrides["listeners"] = (f"CLIENT://127.0.0.1:{broker.port},"
                                         f"INTERNAL://127.0.0.1:{internal_ports[b]}")
    c.internal_ports = internal_ports  # type: ignore[attr-defined]
    c.mode = mode  # type: ignore[attr-defined]
    c.certs = certs  # type: ignore[attr-defined]
    if mode == "sasl_ssl_scram":
        c.ensure_chroot()
        for user, password in (("broker", BROKER_PASSWORD), ("alice", ALICE_PASSWORD)):
            doc = {"version": 1, "config": {SCRAM: make_credential(SCRAM, password, 4096).format()}}
            c.zkc.create(f"/config/users/{user}", json.dumps(doc).encode(), makepath=True)
    c.start()
    yield c
    c.stop()


def _client(c: Cluster) -> dict[str, Any]:
    return {"bootstrap.servers": c.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD}


def _produce(c: Cluster, values: list[bytes]) -> None:
    p = Producer({**_client(c), "acks": "all", "message.timeout.ms": 60000})
    failed: list[KafkaError] = []
    for v in values:
        p.produce(TOPIC, v, on_delivery=lambda err, m: failed.append(err) if err is not None else None)
    assert p.flush(90) == 0
    assert failed == []


def _consume(c: Cluster, n: int, group: str) -> list[bytes]:
    cons = Consumer({**_client(c), "group.id": group, "auto.offset.reset": "earliest",
                     "isolation.level": "read_committed"})
    cons.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 90
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = cons.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        cons.close()
    return got


def _intruders(c: Cluster) -> list[tuple[str, ClientSecurity]]:
    """Clients of the inter-broker listener that are not brokers: each gets past TLS (and SASL)
    and must then be refused by the authorizer (no ClusterAction)."""
    certs: Certs = c.certs  # type: ignore[attr-defined]
    if c.mode == "sasl_ssl_scram":  # type: ignore[attr-defined]
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        return [("alice (SCRAM)", ClientSecurity("SASL_SSL", ctx, SCRAM, "alice", ALICE_PASSWORD))]
    anonymous = ssl.create_default_context(cafile=str(certs.ca))
    alice = ssl.create_default_context(cafile=str(certs.ca))
    alice.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return [("anonymous TLS", ClientSecurity("SSL", anonymous)), ("alice (certificate)", ClientSecurity("SSL", alice))]


async def _follower_fetch(host: str, port: int, security: ClientSecurity) -> list[int]:
    client = AsyncWireClient(host, port, "intruder", 15.0, connector(security, "intruder"))
    try:
        resp = await client.request(1, 12, {
            "cluster_id": None, "replica_id": 2, "max_wait": datetime.timedelta(milliseconds=10), "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": ({"topic": TOPIC, "partitions": ({"partition": 0, "current_leader_epoch": -1,
                                                         "fetch_offset": 0, "last_fetched_epoch": -1,
                                                         "log_start_offset": 0, "partition_max_bytes": 1 << 20},)},),
            "forgotten_topics_data": (), "rack_id": "",
        })
    finally:
        client.close()
    return [int(p.error_code) for t in resp.responses for p in t.partitions]


async def _controlled_shutdown(host: str, port: int, security: ClientSecurity, broker_id: int) -> dict[str, Any] | str:
    reader, writer = await open_connection(host, port, 15.0, security, "intruder")
    try:
        return await interbroker_request(reader, writer, ib.CONTROLLED_SHUTDOWN,
                                         {"broker_id": broker_id, "broker_epoch": 0}, 1, "intruder")
    except (OSError, asyncio.IncompleteReadError, ib.InterBrokerDecodeError) as e:
        return f"closed: {e!r}"
    finally:
        writer.close()


def _isr_full(c: Cluster) -> bool:
    return all(len(c.state(TOPIC, p).get("isr", [])) == 3 for p in range(3))


@pytest.mark.timeout(420)
def test_replication_and_failover_over_the_authenticated_inter_broker_listener(cluster: Cluster) -> None:
    c = cluster
    admin = AdminClient(_client(c))
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(60)
    first = [f"m{i}".encode() for i in range(100)]
    _produce(c, first)
    # followers fetch over TLS (+ SASL) and authorize as brokers: every replica is in sync
    wait_until(lambda: _isr_full(c), 60, "every partition's ISR holds all three brokers")
    # a transaction over the three partitions (one leader each): the coordinator's markers reach
    # the other leaders over the transaction channel, or read_committed sees nothing of it
    wait_until(lambda: len({c.leader(TOPIC, p) for p in range(3)}) == 3, 60, "one partition led by each broker")
    txn = [f"t{i}".encode() for i in range(30)]
    tp = Producer({**_client(c), "transactional.id": "secure-txn", "acks": "all"})
    tp.init_transactions(60)
    tp.begin_transaction()
    for i, v in enumerate(txn):
        tp.produce(TOPIC, v, partition=i % 3)
    tp.commit_transaction(60)
    first += txn
    assert sorted(_consume(c, len(first), "g1")) == sorted(first)

    # not a broker: follower fetches and controller-bound requests are refused
    controller = c.controller()
    assert controller is not None
    target = next(b for b in c.brokers if b != controller)
    leaders = {p: c.leader(TOPIC, p) for p in range(3)}
    for name, security in _intruders(c):
        leader = c.leader(TOPIC, 0)
        codes = asyncio.run(_follower_fetch("127.0.0.1", c.internal_ports[leader], security))  # type: ignore[attr-defined]
        assert codes == [errors.TOPIC_AUTHORIZATION_FAILED], name
        answer = asyncio.run(_controlled_shutdown("127.0.0.1", c.internal_ports[controller], security,  # type: ignore[attr-defined]
                                                  target))
        assert isinstance(answer, str) and answer.startswith("closed"), (name, answer)
    assert "without CLUSTER_ACTION" in c.brokers[controller].log_text()
    # the refused ControlledShutdown moved nothing; the cluster still replicates
    assert _isr_full(c)
    assert {p: c.leader(TOPIC, p) for p in range(3)} == leaders

    # a controller failover: the new controller reaches the survivors over the secured channel
    epoch = c.controller_epoch()
    c.kill(controller)
    wait_until(lambda: c.controller() not in (None, controller), 60, "a new controller")
    assert c.controller_epoch() > epoch
    wait_until(lambda: all(c.leader(TOPIC, p) not in (-1, controller) for p in range(3)), 60,
               "leaders moved off the dead controller")
    second = [f"n{i}".encode() for i in range(50)]
    _produce(c, second)
    assert sorted(_consume(c, len(first) + len(second), "g2")) == sorted(first + second)
    # the old controller comes back and catches up through the new controller's LeaderAndIsr
    c.brokers[controller].start()
    wait_until(lambda: _isr_full(c), 90, "the restarted broker back in every ISR")
