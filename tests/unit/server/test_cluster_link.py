"""ClusterLink and the ControllerRunner it hosts, embedded (a LocalStore in memory, the controller
on the event loop), with no socket: the controller's requests reach the replica manager's roles
and the metadata cache only through the link's narrow edges, fenced by controller and broker
epoch; the embedded broker serves a large LeaderAndIsr a slice per loop turn with UpdateMetadata
behind it; storage errors in a LeaderAndIsr answer go back to the controller."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from odradek.config import BrokerConfig
from odradek.controller import zk_data as zd
from odradek.controller.runner import SELF_SLICE, ControllerRunner
from odradek.controller.store import LocalStore
from odradek.protocol import errors
from odradek.protocol import interbroker as ib
from odradek.server.cluster import ClusterLink

ME = 0


class _Replicas:
    """ReplicaRoles, recorded: every partition of a LeaderAndIsr answered NONE."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log
        self.fetchers_stopped = False

    def become_leader_or_follower(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        self.log.append(("LeaderAndIsr", [(p["topic"], p["partition"], p["leader"]) for p in body["partitions"]]))
        return [{"topic": p["topic"], "partition": p["partition"], "error_code": errors.NONE}
                for p in body["partitions"]]

    def stop_replicas(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        self.log.append(("StopReplica", [(p["topic"], p["partition"], p["delete"]) for p in body["partitions"]]))
        return [{"topic": p["topic"], "partition": p["partition"], "error_code": errors.NONE}
                for p in body["partitions"]]

    def start_missing_fetchers(self) -> None:
        self.log.append(("start_missing_fetchers", None))

    async def shutdown_fetchers(self) -> None:
        self.fetchers_stopped = True


class _Cache:
    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log

    def get(self, name: str) -> Any:
        return None

    def apply_partition_states(
        self, by_topic: Mapping[str, list[dict[str, object]]], topic_ids: Mapping[str, str], *, full: bool
    ) -> None:
        self.log.append(("UpdateMetadata", sorted(by_topic)))


def _store(partitions: int) -> LocalStore:
    store = LocalStore(None)
    zd.ensure_paths(store)
    assignment = {str(p): [ME] for p in range(partitions)}
    store.create("/brokers/topics/t", json.dumps(
        {"version": 3, "partitions": assignment, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"}).encode(), makepath=True)
    return store


def _link(store: LocalStore) -> tuple[ClusterLink, list[tuple[str, Any]], _Replicas]:
    log: list[tuple[str, Any]] = []
    link = ClusterLink(BrokerConfig({"node.id": str(ME)}), ME, local_store=store,
                       advertised_endpoint=lambda listener: ("127.0.0.1", 9092), inter_broker_listener="PLAINTEXT")
    replicas = _Replicas(log)
    link.wire(_Cache(log), replicas, lambda: log.append(("reload", None)))
    return link, log, replicas


def test_embedded_start_leads_every_partition_before_returning() -> None:
    async def run() -> tuple[ClusterLink, list[tuple[str, Any]], _Replicas]:
        link, log, replicas = _link(_store(3))
        await link.start()
        assert set(zd.live_brokers(link.store)) == {ME}  # registered
        seen = list(log)
        await link.shutdown()
        return link, seen, replicas

    link, log, replicas = asyncio.run(run())
    assert link.controller.active and link.controller_epoch == 1
    kinds = [k for k, _ in log]
    assert kinds.index("LeaderAndIsr") < kinds.index("UpdateMetadata")  # never named leader before leading
    led = sorted(p for k, ps in log if k == "LeaderAndIsr" for p in ps)
    assert led == [("t", 0, ME), ("t", 1, ME), ("t", 2, ME)]
    assert "start_missing_fetchers" not in kinds  # embedded: nothing to fetch from
    assert replicas.fetchers_stopped


def _request(epoch: int, broker_epoch: int = -1, **extra: Any) -> dict[str, Any]:
    return {"controller_id": 7, "controller_epoch": epoch, "broker_epoch": broker_epoch, **extra}


def test_controller_requests_are_fenced_then_handed_to_the_roles() -> None:
    link, log, _ = _link(_store(1))
    link.broker_epoch = 50
    lai = _request(3, partitions=[{"topic": "t", "partition": 0, "leader": 1}], live_leaders=[])
    resp = link.handle_request(ib.LEADER_AND_ISR, lai)
    assert resp == {"error_code": errors.NONE, "partitions": [{"topic": "t", "partition": 0, "error_code": 0}]}
    assert link.controller_epoch == 3 and link.controller_id == 7
    assert log == [("LeaderAndIsr", [("t", 0, 1)])]
    # an older controller, or a request meant for an earlier incarnation of this broker: not applied
    assert link.handle_request(ib.LEADER_AND_ISR, dict(lai, controller_epoch=2))["error_code"] == (
        errors.STALE_CONTROLLER_EPOCH
    )
    assert link.handle_request(ib.STOP_REPLICA, _request(3, 49, partitions=[]))["error_code"] == errors.STALE_BROKER_EPOCH
    assert len(log) == 1
    stop = _request(3, 50, partitions=[{"topic": "t", "partition": 0, "delete": True}])
    assert link.handle_request(ib.STOP_REPLICA, stop)["error_code"] == errors.NONE
    um = _request(3, partitions=[{"topic": "t", "partition": 0}], live_brokers=[{"id": 1, "host": "h", "port": 1}])
    assert link.handle_request(ib.UPDATE_METADATA, um) == {"error_code": errors.NONE}
    assert log[1:] == [("StopReplica", [("t", 0, True)]), ("UpdateMetadata", ["t"])]
    assert link.metadata_received and link.live_brokers == {1: {"id": 1, "host": "h", "port": 1}}


def _runner(served: list[tuple[int, int]]) -> ControllerRunner:
    def serve(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        served.append((api_key, len(body.get("partitions", []))))
        return {"error_code": errors.NONE, "partitions": []}

    return ControllerRunner(ME, LocalStore(None), threaded=False, unclean_leader_election=lambda t: False,
                            imbalance_percentage=10, endpoint_of=lambda info: (info.host, info.port),
                            serve_local=serve)


def test_embedded_requests_to_self_are_sliced_with_update_metadata_behind() -> None:
    served: list[tuple[int, int]] = []
    turns: list[list[tuple[int, int]]] = []

    async def run() -> None:
        runner = _runner(served)
        runner.loop = asyncio.get_running_loop()
        parts = [{"topic": "t", "partition": p} for p in range(2 * SELF_SLICE + 3)]
        send = runner._send_from_controller  # noqa: SLF001  (what the controller calls)
        send(ME, ib.UPDATE_METADATA, {"partitions": []})
        send(ME, ib.LEADER_AND_ISR, {"partitions": parts})  # goes ahead of the queued UpdateMetadata
        send(ME + 1, ib.LEADER_AND_ISR, {"partitions": parts})  # not this broker: embedded has no other
        for _ in range(5):
            await asyncio.sleep(0)
            turns.append(list(served))

    asyncio.run(run())
    assert served == [(ib.LEADER_AND_ISR, SELF_SLICE), (ib.LEADER_AND_ISR, SELF_SLICE),
                      (ib.LEADER_AND_ISR, 3), (ib.UPDATE_METADATA, 0)]
    assert len(turns[0]) == 1  # one slice per loop turn


def test_storage_errors_in_a_leader_and_isr_answer_go_to_the_controller() -> None:
    runner = _runner([])
    events: list[tuple[str, dict[str, Any]]] = []
    runner.put = lambda kind, **args: events.append((kind, args))  # type: ignore[method-assign]
    resp = {"error_code": 0, "partitions": [
        {"topic": "t", "partition": 0, "error_code": errors.KAFKA_STORAGE_ERROR},
        {"topic": "t", "partition": 1, "error_code": errors.NONE},
    ]}
    runner._on_broker_response(3, ib.LEADER_AND_ISR, resp)  # noqa: SLF001
    runner._on_broker_response(3, ib.UPDATE_METADATA, resp)  # noqa: SLF001
    assert events == [("LeaderAndIsrResponse", {"broker_id": 3, "storage_errors": [("t", 0)]})]
