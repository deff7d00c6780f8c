"""The controller over a real ZooKeeper: election through /controller, failover to a second
controller when the first one's session ends, and leader election when a broker's
registration vanishes."""

from __future__ import annotations

import json
import uuid
from typing import Any

from waiting import wait_until

from odradek.controller import zk_data as zd
from odradek.controller.controller import Controller
from odradek.controller.zk_store import ZkStore
from odradek.protocol import interbroker as ib

from .zk import Ensemble


def _store(zk: Ensemble, root: str) -> ZkStore:
    s = ZkStore(zk.connect, session_timeout_ms=2000, chroot=root)
    s.start()
    s.client.ensure_path("/")
    return s


def test_failover_between_controllers_and_broker_loss(zookeeper: Ensemble) -> None:
    root = f"k{uuid.uuid4().hex[:8]}"
    sessions = {b: _store(zookeeper, root) for b in (1, 2, 3)}
    sent: list[tuple[int, int, dict[str, Any]]] = []

    def channel(b: int, api: int, body: dict[str, Any]) -> None:
        ib.encode(api, body)
        sent.append((b, api, body))

    try:
        zd.ensure_paths(sessions[1])
        for b, s in sessions.items():
            zd.register_broker(s, zd.BrokerInfo(b, "127.0.0.1", 9000 + b))
        sessions[1].create("/brokers/topics/t", json.dumps({"version": 3, "partitions": {"0": [1, 2, 3]}}).encode())
        c1, c2 = Controller(1, sessions[1], channel), Controller(2, sessions[2], channel)
        for c in (c1, c2):
            c.put("Startup")
            c.process_all()
        assert c1.active and not c2.active
        st = zd.read_partition_state(sessions[2], "t", 0)
        assert st is not None and st.leader == 1 and st.isr == [1, 2, 3]
        epochs = {b: body["broker_epoch"] for b, api, body in sent if api == ib.LEADER_AND_ISR}
        assert epochs == {b: zd.broker_epoch(sessions[b], b) for b in (1, 2, 3)}  # czxid of each registration
        # broker 1 (leader and controller) dies: its session closes, its ephemerals vanish
        sessions[1].close()
        wait_until(lambda: zd.read_controller(sessions[2]) is None, 10, "/controller to go", interval=0.05)
        c2.put("ControllerChange")
        c2.process_all()
        assert c2.active and c2.ctx.epoch == 2
        st = zd.read_partition_state(sessions[2], "t", 0)
        assert st is not None and st.leader == 2 and st.isr == [2, 3] and st.leader_epoch == 1
    finally:
        for s in sessions.values():
            s.close()
