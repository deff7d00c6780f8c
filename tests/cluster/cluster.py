"""A ZooKeeper ensemble and several broker processes in cluster mode, for the cluster tests.

Each cluster gets its own ZooKeeper chroot, so tests sharing one ensemble do not see each
other's brokers. Brokers are the integration suite's real processes (tests.integration.broker)
started with ``broker.id`` and ``zookeeper.connect``.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from integration.broker import Broker
from kazoo.client import KazooClient
from waiting import wait_until

from .zk import Ensemble

FAST = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "5000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
    "leader.imbalance.check.interval.seconds": "3600",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}


class Cluster:
    def __init__(self, base: Path, zk: Ensemble, n: int = 3, overrides: Mapping[str, str] | None = None,
                 *, zk_client_options: Mapping[str, Any] | None = None) -> None:
        self.zk = zk
        # extra KazooClient arguments of the test's own ZooKeeper client (sasl_options for a SASL ZooKeeper)
        self.zk_client_options = dict(zk_client_options or {})
        self.chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
        self.connect = zk.servers[0].connect + self.chroot
        self.brokers: dict[int, Broker] = {}
        for b in range(1, n + 1):
            ov = {**FAST, "broker.id": str(b), "zookeeper.connect": self.connect, **(overrides or {})}
            self.brokers[b] = Broker(base / f"b{b}", ov, name=f"broker{b}")
        self._zk: KazooClient | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def ensure_chroot(self) -> None:
        zk = KazooClient(hosts=self.zk.servers[0].connect, **self.zk_client_options)
        zk.start(timeout=60)
        zk.ensure_path(self.chroot)
        zk.stop()
        zk.close()

    def start(self) -> Cluster:
        # no ensure_chroot(): each broker creates its missing chroot, as Kafka's do
        try:
            for b in self.brokers.values():
                b.start()
            wait_until(lambda: len(self.zk_children("/brokers/ids")) == len(self.brokers), 30,
                       "all brokers registered")
            wait_until(lambda: self.controller() is not None, 30, "a controller")
        except BaseException:
            self.stop()  # a cluster that did not start leaves no broker running behind it
            raise
        return self

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.running:
                b.kill()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    # -- ZooKeeper views
    @property
    def zkc(self) -> KazooClient:
        if self._zk is None:
            self._zk = KazooClient(hosts=self.connect, **self.zk_client_options)
            self._zk.start(timeout=60)
        return self._zk

    def zk_children(self, path: str) -> list[str]:
        try:
            return list(self.zkc.get_children(path))
        except Exception:
            return []

    def zk_json(self, path: str) -> Any:
        try:
            data, _ = self.zkc.get(path)
        except Exception:
            return None
        return json.loads(data) if data else None

    def controller(self) -> int | None:
        doc = self.zk_json("/controller")
        return int(doc["brokerid"]) if doc else None

    def controller_epoch(self) -> int:
        data, _ = self.zkc.get("/controller_epoch")
        return int(data)

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        return dict(self.zk_json(f"/brokers/topics/{topic}/partitions/{partition}/state") or {})

    def leader(self, topic: str, partition: int) -> int:
        return int(self.state(topic, partition).get("leader", -1))

    # -- helpers
    def kill(self, b: int) -> None:
        self.brokers[b].kill()

    def pause(self, b: int) -> None:
        proc = self.brokers[b].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)

    def resume(self, b: int) -> None:
        proc = self.brokers[b].proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)
