"""The request context handlers get (server/request_context.py): handlers driven with fakes of the
services they use, no broker and no socket."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from odradek.controller.store import StoreError
from odradek.protocol import errors
from odradek.server.handlers import alter_configs, describe_cluster, init_producer_id
from odradek.server.request_context import BrokerServices, RequestContext


class FakeConnection:
    listener = "INTERNAL"
    peer = "10.0.0.9:5555"
    peer_host = "10.0.0.9"

    def __init__(self) -> None:
        self.parked: list[asyncio.Future[Any]] = []
        self.closed: list[str | None] = []

    def park(self, fut: asyncio.Future[Any], cancel: Callable[[], None]) -> None:
        self.parked.append(fut)

    def close(self, reason: str | None = None) -> None:
        self.closed.append(reason)

    def throttle(self, ms: int) -> None:
        self.throttled = ms


class FakeProducerIds:
    def __init__(self, *ids: int | Exception) -> None:
        self.ids = list(ids)

    def next_id(self) -> int:
        nxt = self.ids.pop(0)
        if isinstance(nxt, Exception):
            raise nxt
        return nxt


class FakeAdmin:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str], bool]] = []

    def set_topic_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        self.calls.append(("topic", name, dict(configs), validate_only))

    def set_broker_configs(self, entity: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        self.calls.append(("broker", entity, dict(configs), validate_only))


UNUSED: Any = None  # a service the handler under test must not touch


def services(**overrides: Any) -> BrokerServices:
    fields: dict[str, Any] = dict(
        node_id=3, cluster_id="c-1", rack="r1", config=UNUSED, topics=UNUSED, cluster=UNUSED,
        replica_manager=UNUSED, log_manager=UNUSED, groups=UNUSED, txn=UNUSED, fetch_sessions=UNUSED,
        producer_ids=UNUSED, admin=UNUSED, advertised_endpoint=UNUSED, now_ms=lambda: 1000,
        features=UNUSED, quotas=UNUSED,
    )
    fields.update(overrides)
    return BrokerServices(**fields)


def context(svc: BrokerServices, api_key: int, api_version: int) -> tuple[RequestContext, FakeConnection]:
    conn = FakeConnection()
    return RequestContext(svc, conn, api_key, api_version, 7, "client-1"), conn


def test_the_context_carries_the_request_and_its_connection() -> None:
    ctx, conn = context(services(), 22, 4)
    assert (ctx.api_key, ctx.api_version, ctx.correlation_id, ctx.client_id) == (22, 4, 7, "client-1")
    assert (ctx.listener, ctx.peer, ctx.client_host) == ("INTERNAL", "10.0.0.9:5555", "10.0.0.9")
    assert ctx.response_module.InitProducerIdResponse is not None

    async def park() -> None:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        ctx.park(fut, lambda: None)
        assert conn.parked == [fut]

    asyncio.run(park())
    ctx.close_connection("bad request")
    assert conn.closed == ["bad request"]


def test_init_producer_id_takes_ids_from_its_source() -> None:
    ids = FakeProducerIds(42, StoreError("ZooKeeper is unreachable"))
    ctx, _ = context(services(producer_ids=ids), 22, 4)
    req = SimpleNamespace(transactional_id=None, producer_id=-1, producer_epoch=-1)
    r = init_producer_id.handle(ctx, req)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (errors.NONE, 42, 0)
    r = init_producer_id.handle(ctx, req)  # the store failed: retriable
    assert (r.error_code, r.producer_id) == (errors.COORDINATOR_NOT_AVAILABLE, -1)
    # KIP-360: a producer bumping its own epoch needs no new id
    r = init_producer_id.handle(ctx, SimpleNamespace(transactional_id=None, producer_id=42, producer_epoch=0))
    assert (r.error_code, r.producer_id, r.producer_epoch) == (errors.NONE, 42, 1)


def test_describe_cluster_answers_the_endpoint_of_the_clients_own_listener() -> None:
    endpoints = {"INTERNAL": ("10.0.0.1", 9093), "EXTERNAL": ("broker.example", 9092)}
    ctx, _ = context(services(advertised_endpoint=endpoints.__getitem__, cluster=SimpleNamespace(embedded=True)),
                     60, 1)
    r = describe_cluster.handle(ctx, SimpleNamespace(endpoint_type=1))
    assert r.error_code == errors.NONE and r.cluster_id == "c-1" and r.controller_id == 3
    (b,) = r.brokers
    assert (b.broker_id, b.host, b.port, b.rack) == (3, "10.0.0.1", 9093, "r1")


def test_describe_cluster_lists_every_live_broker_of_a_cluster() -> None:
    """Cluster mode: every registered broker on the client's listener and the elected controller, as Metadata
    gives them (kafka-reassign-partitions --generate found none of its brokers when only this one was listed)."""
    def node(i: int) -> dict[str, Any]:
        return {"host": f"b{i}", "port": 9000 + i, "rack": None if i == 2 else f"r{i}",
                "endpoints": [f"INTERNAL://10.0.0.{i}:9093", f"EXTERNAL://broker{i}.example:9092"]}

    cluster = SimpleNamespace(embedded=False, live_brokers={3: node(3), 1: node(1), 2: node(2)}, controller_id=2)
    ctx, _ = context(services(cluster=cluster), 60, 1)
    r = describe_cluster.handle(ctx, SimpleNamespace(endpoint_type=1))
    assert r.controller_id == 2
    assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [
        (1, "10.0.0.1", 9093, "r1"), (2, "10.0.0.2", 9093, None), (3, "10.0.0.3", 9093, "r3")]


def test_alter_configs_goes_through_the_topic_admin() -> None:
    admin = FakeAdmin()
    svc = services(admin=admin)
    assert alter_configs.apply(svc, alter_configs.RESOURCE_TOPIC, "t", {"retention.ms": "1"}, True) == (errors.NONE, None)
    assert alter_configs.apply(svc, alter_configs.RESOURCE_BROKER, "3", {"num.partitions": "2"}, False) == (
        errors.NONE, None)
    code, msg = alter_configs.apply(svc, alter_configs.RESOURCE_BROKER, "4", {}, False)
    assert code == errors.INVALID_REQUEST and msg == "Unexpected broker id, expected 3"
    assert admin.calls == [("topic", "t", {"retention.ms": "1"}, True), ("broker", "3", {"num.partitions": "2"}, False)]
