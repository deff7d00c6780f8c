"""``EmbeddedCluster``: ZooKeeper (Debian's package, one server) and N brokers in cluster mode,
each a child process (:class:`~odradek.embedded.broker.EmbeddedBroker` in process mode), for
failover tests::

    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("orders", partitions=3)          # replication factor min(3, N)
        cluster.kill(cluster.leader("orders", 0))            # SIGKILL
        ...
        cluster.start(broker_id)                              # same port, same data

Broker ``i`` (1..N) has ``broker.id=i``, a free loopback port and ``<data_dir>/broker<i>``; the
cluster lives under its own ZooKeeper chroot. Each broker gets ``odradek dev-cluster``'s settings
(:func:`odradek.devcluster.cluster.broker_overrides`) and :data:`CLUSTER_DEFAULTS`, which make
failure detection take seconds rather than Kafka's 18 s session timeout; ``config`` overrides both.
ZooKeeper missing is an error (:class:`~odradek.devcluster.zookeeper.ZooKeeperError`), never a skip.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from odradek.embedded.admin import TopicAdmin, config_strings
from odradek.embedded.broker import EmbeddedBroker, EmbeddedBrokerError

CLUSTER_DEFAULTS: dict[str, str] = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "5000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}


class EmbeddedCluster:
    def __init__(self, n: int = 3, config: Mapping[str, object] | None = None, *,
                 data_dir: str | Path | None = None, zookeeper: str | None = None,
                 start_timeout: float = 120.0, stop_timeout: float = 60.0) -> None:
        from odradek.devcluster.cluster import broker_overrides
        from odradek.devcluster.zookeeper import ZooKeeperServer, find_java, free_port

        if n < 1:
            raise ValueError("a cluster needs at least one broker")
        user = config_strings(config)
        for key in ("broker.id", "listeners", "log.dirs", "zookeeper.connect"):
            if key in user:
                raise ValueError(f"{key} is set by EmbeddedCluster")
        self._own_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="odradek-cluster-")) if data_dir is None else Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.zk: ZooKeeperServer | None = None
        if zookeeper is None:
            find_java()  # ZooKeeperError now rather than after the brokers are set up
            self.zk = ZooKeeperServer(self.data_dir, 1, free_port())
            zookeeper = self.zk.connect
        self.zk_hosts = zookeeper
        self.chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.startup_seconds: float | None = None
        self.brokers: dict[int, EmbeddedBroker] = {}
        for bid in range(1, n + 1):
            bdir = self.data_dir / f"broker{bid}"
            ov = broker_overrides(bid, 0, bdir / "data", self.zk_hosts + self.chroot, n,
                                  {**CLUSTER_DEFAULTS, **user})
            del ov["listeners"]
            self.brokers[bid] = EmbeddedBroker(ov, mode="process", data_dir=bdir, name=f"broker{bid}",
                                               start_timeout=start_timeout, stop_timeout=stop_timeout)
        self._admin: TopicAdmin | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    @property
    def admin(self) -> Any:
        """A confluent-kafka AdminClient on the cluster (created on first use)."""
        return self._topic_admin().client

    def _topic_admin(self) -> TopicAdmin:
        if self._admin is None:
            self._admin = TopicAdmin(self.bootstrap_servers)
        return self._admin

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> EmbeddedCluster:
        self.start_all()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start_all(self) -> EmbeddedCluster:
        """ZooKeeper, then every broker at once; returns when all are registered and one is controller."""
        t0 = time.monotonic()
        try:
            if self.zk is not None:
                self.zk.start(tie_to_parent=True)
            for b in self.brokers.values():  # each broker creates the missing chroot itself
                b.launch()
            for b in self.brokers.values():
                b.wait_started(t0)
            self.wait_ready(set(self.brokers))
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def wait_ready(self, live: set[int], timeout: float | None = None) -> None:
        """Until the brokers' metadata lists exactly the ``live`` brokers and a controller among them."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        seen: tuple[set[int], int] = (set(), -1)
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                meta = self.admin.list_topics(timeout=5)
                seen = (set(meta.brokers), int(meta.controller_id))
                if seen[0] == live and seen[1] in live:
                    return
            time.sleep(0.1)
        raise EmbeddedBrokerError(f"cluster not ready: brokers {sorted(seen[0])} (want {sorted(live)}), "
                                  f"controller {seen[1]}; logs under {self.data_dir}")

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker (its ZooKeeper session expires after ``zookeeper.session.timeout.ms``)."""
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int) -> None:
        """Stop one broker cleanly (controlled shutdown: its leaderships move first)."""
        self.brokers[broker_id].stop()

    def start(self, broker_id: int) -> None:
        """Start a stopped or killed broker again (same port, same data) and wait until it serves."""
        self.brokers[broker_id].start()

    def close(self) -> None:
        """Stop the brokers (the controller last), then ZooKeeper; remove a temporary data directory."""
        self._admin = None
        try:
            running = [b for b in self.brokers.values() if b.running]
            controller = self.controller() if running else None
            order = sorted(running, key=lambda b: b.name == f"broker{controller}")
            errors = []
            for b in order:
                try:
                    b.stop()
                except Exception as e:
                    errors.append(str(e))
                    b.kill()
            if errors:
                raise EmbeddedBrokerError("broker(s) did not stop cleanly:\n" + "\n".join(errors))
        finally:
            if self.zk is not None:
                self.zk.stop()
            if self._own_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    # ------------------------------------------------------------------ views

    def controller(self) -> int | None:
        with contextlib.suppress(Exception):
            cid = int(self.admin.list_topics(timeout=5).controller_id)
            return cid if cid >= 0 else None
        return None

    def leader(self, topic: str, partition: int = 0) -> int:
        """The partition's leader in the cluster's metadata (-1 when it has none, or when the broker asked does
        not know the partition yet: a broker learns a new topic from the controller a moment after the one
        that created it, and a new controller republishes every topic after a failover)."""
        meta = self.admin.list_topics(topic, timeout=10)
        t = meta.topics.get(topic)
        p = t.partitions.get(partition) if t is not None else None
        return int(p.leader) if p is not None else -1

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, object] | None = None,
                     replication_factor: int | None = None, timeout: float = 30.0) -> str:
        """Create a topic (replication factor ``min(3, N)`` by default) and wait for its leaders."""
        rf = replication_factor if replication_factor is not None else min(3, len(self.brokers))
        self._topic_admin().create_topic(name, partitions, rf, config, timeout)
        return name
