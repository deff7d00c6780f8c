"""server.cluster_access: Kafka's inter-broker listener rule, per-listener endpoints, and the
controller epoch check against the metadata store (issue 12, item 7): a request is refused only when
the store contradicts its claim, never for want of an answer (issue 33)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.controller import zk_data as zd
from odradek.controller.store import LocalStore, StoreError
from odradek.controller.zk_data import endpoint_for
from odradek.protocol import errors
from odradek.protocol import interbroker as ib
from odradek.server import cluster_access as ca
from odradek.server.cluster_access import (
    ControllerEpochGuard,
    Verdict,
    cluster_listeners,
    inter_broker_listener,
    judge,
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
    assert g.check(5, 1) is Verdict.CONFIRMED
    assert g.check(105, 2) is Verdict.CONTRADICTED  # an epoch ZooKeeper does not hold
    assert g.check(5, 2) is Verdict.CONTRADICTED  # the epoch, but not the controller
    assert g.check(4, 1) is Verdict.CONTRADICTED  # an older controller
    assert g.needs_check(_body(1, 5), current_epoch=0)
    assert not g.needs_check(_body(1, 3), current_epoch=5)  # older than current: fenced without asking


def test_judge_refuses_only_what_zookeeper_contradicts() -> None:
    assert judge(5, 1, 5, 1, synced=True) is Verdict.CONFIRMED
    assert judge(5, 1, 5, None, synced=True) is Verdict.CONFIRMED  # that controller has gone since it sent
    assert judge(5, 1, 6, 2, synced=True) is Verdict.CONTRADICTED  # a newer controller
    assert judge(5, 1, 5, 2, synced=True) is Verdict.CONTRADICTED
    assert judge(7, 1, 5, 1, synced=True) is Verdict.CONTRADICTED  # never held, and the read is up to date
    assert judge(7, 1, 5, 1, synced=False) is None  # the read may be behind the ensemble: ask again


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


def _failing(store: LocalStore, monkeypatch: pytest.MonkeyPatch, failures: list[int]) -> None:
    real_get = store.get

    def flaky_get(path: str) -> tuple[bytes, int]:
        if failures[0] > 0:
            failures[0] -= 1
            raise StoreError("connection loss")
        return real_get(path)

    monkeypatch.setattr(store, "get", flaky_get)


def test_guard_retries_a_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(1, 5)
    failures = [2]
    _failing(store, monkeypatch, failures)
    assert ControllerEpochGuard(store, backoff_s=0.0).check(5, 1) is Verdict.CONFIRMED
    failures[0] = 10**9
    assert ControllerEpochGuard(store, patience_s=0.05, backoff_s=0.01).check(5, 1) is Verdict.UNANSWERED


def _run_all(g: ControllerEpochGuard, bodies: list[tuple[int, dict[str, Any]]],
             then: Callable[[], object] = lambda: None) -> tuple[list[Any], list[int]]:
    """Run ``bodies`` through the guard on a loop; the answers, and the api keys applied in order
    (``then()`` once all are answered, before the loop closes)."""

    async def run() -> tuple[list[Any], list[int]]:
        loop = asyncio.get_running_loop()
        applied: list[int] = []
        current = [0]

        def apply(key: int, body: dict[str, Any]) -> dict[str, Any]:
            applied.append(key)
            current[0] = max(current[0], int(body["controller_epoch"]))
            return {"error_code": errors.NONE}

        answers = [g.run(loop, key, body, apply, lambda: current[0]) for key, body in bodies]
        out = [await a if isinstance(a, asyncio.Future) else a for a in answers]
        then()
        return out, applied

    return asyncio.run(run())


def test_a_request_zookeeper_cannot_answer_for_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """ZooKeeper unreadable (disconnected, no quorum): the controller's requests are applied on Kafka's
    rule once the check gives up, never refused (the controller does not send a refused one again).
    Before issue 33 both were answered STALE_CONTROLLER_EPOCH and neither was applied."""
    monkeypatch.setattr(ca, "CHECK_BACKOFF_S", 0.01)
    monkeypatch.setattr(ca, "CHECK_PATIENCE_S", 0.2, raising=False)
    store = _store(1, 5)
    _failing(store, monkeypatch, [10**9])
    g = ControllerEpochGuard(store)
    out, applied = _run_all(g, [(ib.LEADER_AND_ISR, _body(1, 5)), (ib.UPDATE_METADATA, _body(1, 5))])
    assert [a["error_code"] for a in out] == [errors.NONE, errors.NONE]
    assert applied == [ib.LEADER_AND_ISR, ib.UPDATE_METADATA]
    assert g.verified == (5, 1)  # its next requests are not held up again


def test_a_zookeeper_call_that_hangs_does_not_hold_the_requests() -> None:
    """A read that blocks (a connected session without quorum) is given up at the patience's end."""
    store = _store(1, 5)
    release = threading.Event()
    real_get = store.get

    def hanging_get(path: str) -> tuple[bytes, int]:
        release.wait(10)
        return real_get(path)

    store.get = hanging_get  # type: ignore[method-assign]
    g = ControllerEpochGuard(store, patience_s=0.2, backoff_s=0.05)
    try:
        out, applied = _run_all(g, [(ib.STOP_REPLICA, _body(1, 5)), (ib.UPDATE_METADATA, _body(1, 5))],
                                then=release.set)
    finally:
        release.set()
    assert [a["error_code"] for a in out] == [errors.NONE, errors.NONE]
    assert applied == [ib.STOP_REPLICA, ib.UPDATE_METADATA]


def test_a_refused_sync_with_an_epoch_not_seen_yet_is_asked_again() -> None:
    """The sync failed and the read does not show the claimed epoch yet: not a contradiction; the
    check asks again and confirms once the store shows it."""
    store = _store(1, 5)
    syncs: list[str] = []

    def sync(path: str) -> None:
        syncs.append(path)
        if len(syncs) == 1:
            raise StoreError("connection loss")
        store.set(zd.CONTROLLER_EPOCH, b"6")  # the controller's write reaches this server
        store.set(zd.CONTROLLER, b'{"version":1,"brokerid":2,"timestamp":"0"}')

    assert ControllerEpochGuard(store, sync, backoff_s=0.0).check(6, 2) is Verdict.CONFIRMED
    assert syncs == [zd.CONTROLLER_EPOCH, zd.CONTROLLER_EPOCH]


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
