"""server.cluster_access: Kafka's inter-broker listener rule, per-listener endpoints, and the
controller epoch check against the metadata store (issue 12, item 7)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.controller import zk_data as zd
from odradek.controller.store import LocalStore
from odradek.controller.zk_data import endpoint_for
from odradek.protocol import errors
from odradek.protocol import interbroker as ib
from odradek.server.cluster_access import (
    ControllerEpochGuard,
    cluster_listeners,
    inter_broker_listener,
    refusal,
)

SPLIT = "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093"


def test_inter_broker_listener_follows_kafkas_rule() -> None:
    assert inter_broker_listener(BrokerConfig()) == "PLAINTEXT"
    assert inter_broker_listener(BrokerConfig({"listeners": SPLIT, "inter.broker.listener.name": "INTERNAL"})) == "INTERNAL"
    cfg = BrokerConfig({"listeners": "SSL://h:1,PLAINTEXT://h:2", "security.inter.broker.protocol": "SSL"})
    assert inter_broker_listener(cfg) == "SSL"
    with pytest.raises(ConfigError, match="must be a listener name defined in advertised.listeners"):
        inter_broker_listener(BrokerConfig({"listeners": SPLIT}))  # no PLAINTEXT listener
    with pytest.raises(ConfigError, match="Only one of"):
        inter_broker_listener(BrokerConfig({"listeners": SPLIT, "inter.broker.listener.name": "INTERNAL",
                                            "security.inter.broker.protocol": "PLAINTEXT"}))


def test_cluster_listeners_include_the_control_plane() -> None:
    cfg = BrokerConfig({"listeners": SPLIT + ",CONTROL://127.0.0.1:9094", "inter.broker.listener.name": "INTERNAL",
                        "control.plane.listener.name": "CONTROL"})
    assert cluster_listeners(cfg) == {"INTERNAL", "CONTROL"}
    assert cluster_listeners(BrokerConfig({"listeners": SPLIT, "inter.broker.listener.name": "INTERNAL"})) == {"INTERNAL"}
    with pytest.raises(ConfigError):
        cluster_listeners(BrokerConfig({"listeners": SPLIT, "inter.broker.listener.name": "INTERNAL",
                                        "control.plane.listener.name": "INTERNAL"}))


def test_endpoint_for_picks_the_listener() -> None:
    node = {"id": 1, "host": "10.0.0.1", "port": 9093,
            "endpoints": ["EXTERNAL://example.com:19092", "INTERNAL://10.0.0.1:9093", "V6://[::1]:7"]}
    assert endpoint_for(node, "EXTERNAL") == ("example.com", 19092)
    assert endpoint_for(node, "V6") == ("::1", 7)
    assert endpoint_for(node, "OTHER") == ("10.0.0.1", 9093)  # unknown listener: the inter-broker address
    assert endpoint_for({"host": "h", "port": 1}, "EXTERNAL") == ("h", 1)


def test_refusals_are_cluster_authorization_failed() -> None:
    for key in (ib.LEADER_AND_ISR, ib.STOP_REPLICA, ib.UPDATE_METADATA, ib.CONTROLLED_SHUTDOWN):
        assert refusal(key)["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED
    assert refusal(ib.CONTROLLED_SHUTDOWN)["remaining_partitions"] == []


def _store(controller: int, epoch: int) -> LocalStore:
    s = LocalStore(None)
    zd.ensure_paths(s)
    s.create(zd.CONTROLLER_EPOCH, str(epoch).encode())
    s.create(zd.CONTROLLER, b'{"version":1,"brokerid":%d,"timestamp":"0"}' % controller)
    return s


def _body(controller: int, epoch: int) -> dict[str, Any]:
    return {"controller_id": controller, "controller_epoch": epoch, "broker_epoch": -1}


def test_guard_checks_unseen_epochs_against_the_store() -> None:
    g = ControllerEpochGuard(_store(1, 5))
    assert g.check(5, 1) == errors.NONE
    assert g.check(105, 2) == errors.STALE_CONTROLLER_EPOCH  # an epoch ZooKeeper does not hold
    assert g.check(5, 2) == errors.STALE_CONTROLLER_EPOCH  # the epoch, but not the controller
    assert g.check(4, 1) == errors.STALE_CONTROLLER_EPOCH  # an older controller
    assert g.needs_check(_body(1, 5), current_epoch=0)
    assert not g.needs_check(_body(1, 3), current_epoch=5)  # older than current: fenced without asking


def test_guard_applies_in_order_and_refuses_forgeries() -> None:
    async def run() -> list[Any]:
        loop = asyncio.get_running_loop()
        g = ControllerEpochGuard(_store(1, 5))
        applied: list[tuple[int, int]] = []
        current = [0]

        def apply(key: int, body: dict[str, Any]) -> dict[str, Any]:
            applied.append((key, int(body["controller_epoch"])))
            current[0] = max(current[0], int(body["controller_epoch"]))
            return {"error_code": errors.NONE}

        def epoch() -> int:
            return current[0]

        answers = [
            g.run(loop, ib.LEADER_AND_ISR, _body(1, 5), apply, epoch),  # checked, then applied
            g.run(loop, ib.UPDATE_METADATA, _body(1, 5), apply, epoch),  # waits behind the check
            g.run(loop, ib.UPDATE_METADATA, _body(2, 99), apply, epoch),  # forged: refused
            g.run(loop, ib.STOP_REPLICA, _body(1, 5), apply, epoch),
        ]
        out = [await a if isinstance(a, asyncio.Future) else a for a in answers]
        # verified now: applied at once
        out.append(g.run(loop, ib.UPDATE_METADATA, _body(1, 5), apply, epoch))
        assert applied == [(ib.LEADER_AND_ISR, 5), (ib.UPDATE_METADATA, 5), (ib.STOP_REPLICA, 5),
                           (ib.UPDATE_METADATA, 5)]
        return out

    out = asyncio.run(run())
    assert [a["error_code"] for a in out] == [0, 0, errors.STALE_CONTROLLER_EPOCH, 0, 0]
    assert out[2] == {"error_code": errors.STALE_CONTROLLER_EPOCH}


def test_requests_wait_behind_one_answered_later() -> None:
    """A LeaderAndIsr applied over several loop turns (a future): a request arriving meanwhile is
    applied only once it is answered, so metadata never runs ahead of the roles."""

    async def run() -> list[Any]:
        loop = asyncio.get_running_loop()
        g = ControllerEpochGuard(_store(1, 5))
        g.verified = (5, 1)
        log: list[str] = []
        slow: asyncio.Future[Any] = loop.create_future()

        def apply(key: int, body: dict[str, Any]) -> Any:
            log.append(f"apply {key}")
            if key == ib.LEADER_AND_ISR:
                return slow
            return {"error_code": errors.NONE}

        first = g.run(loop, ib.LEADER_AND_ISR, _body(1, 5), apply, lambda: 5)
        second = g.run(loop, ib.UPDATE_METADATA, _body(1, 5), apply, lambda: 5)
        third = g.run(loop, ib.STOP_REPLICA, _body(1, 5), apply, lambda: 5)
        await asyncio.sleep(0)
        assert log == [f"apply {ib.LEADER_AND_ISR}"]
        loop.call_soon(slow.set_result, {"error_code": errors.NONE, "partitions": []})
        out = [await a if isinstance(a, asyncio.Future) else a for a in (first, second, third)]
        assert log == [f"apply {ib.LEADER_AND_ISR}", f"apply {ib.UPDATE_METADATA}", f"apply {ib.STOP_REPLICA}"]
        # nothing left waiting: the next one is applied at once
        assert g.run(loop, ib.UPDATE_METADATA, _body(1, 5), apply, lambda: 5) == {"error_code": errors.NONE}
        return out

    assert [a["error_code"] for a in asyncio.run(run())] == [0, 0, 0]


def test_guard_retries_a_store_error_before_refusing(monkeypatch: pytest.MonkeyPatch) -> None:
    import odradek.server.cluster_access as ca
    from odradek.controller.store import StoreError

    monkeypatch.setattr(ca, "CHECK_BACKOFF_S", 0.0)
    store = _store(1, 5)
    real_get = store.get
    failures = [2]

    def flaky_get(path: str) -> tuple[bytes, int]:
        if failures[0] > 0:
            failures[0] -= 1
            raise StoreError("connection loss")
        return real_get(path)

    monkeypatch.setattr(store, "get", flaky_get)
    assert ControllerEpochGuard(store).check(5, 1) == errors.NONE
    failures[0] = 10**6
    assert ControllerEpochGuard(store).check(5, 1) == errors.STALE_CONTROLLER_EPOCH


def test_who_may_write_txn_markers() -> None:
    from odradek.server.cluster_access import may_write_txn_marker

    cluster = frozenset({"BROKER"})
    assert may_write_txn_marker("BROKER", cluster, commit=True)
    assert may_write_txn_marker("BROKER", cluster, commit=False)
    assert may_write_txn_marker(None, cluster, commit=True)  # the broker's own (embedded) path
    # a client listener: ABORT as Kafka allows with no authorizer (kafka-transactions.sh abort), COMMIT refused
    assert may_write_txn_marker("PLAINTEXT", cluster, commit=False)
    assert not may_write_txn_marker("PLAINTEXT", cluster, commit=True)
    assert not may_write_txn_marker("PLAINTEXT", frozenset(), commit=True)  # single-broker mode
