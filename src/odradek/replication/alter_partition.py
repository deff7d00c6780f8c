"""ISR changes a leader makes, written to the metadata store (Kafka's AlterPartitionManager in
its ZooKeeper form, ZkAlterPartitionManager).

A leader that shrinks or expands a partition's ISR hands the new state to
:meth:`AlterPartitionManager.submit`; the manager writes it to the partition state znode
(``/brokers/topics/<t>/partitions/<p>/state``, JSON ``{"controller_epoch", "leader",
"version": 1, "leader_epoch", "isr"}``) with a conditional update on the znode version the
leader last saw, then creates an ``/isr_change_notification/isr_change_<seq>`` so the
controller propagates it. The outcome comes back to ``done`` on the event loop:

- ``(isr, zk_version, leader_epoch)`` once written, or when the update lost a race to a write
  that already says what this leader wants (same leader and leader epoch: the fresh ISR);
- ``None`` when it failed (a newer leader epoch, the store unreachable): the leader goes back
  to its committed ISR and the controller's next LeaderAndIsr has the last word.

The store is reached through :class:`PartitionStateStore`, three calls; the blocking work runs
where :class:`Offload` says (a worker thread against ZooKeeper, inline on the loop against the
embedded LocalStore). Neither knows the replica manager: it applies the outcome itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from odradek.controller import zk_data as zd
from odradek.controller.store import BadVersionError, MetadataStore, StoreError
from odradek.replication.partition import Partition

log = logging.getLogger("odradek.replica.alter_partition")

IsrResult = tuple[list[int], int, int]  # (isr, znode version, leader epoch)
Done = Callable[[IsrResult | None], None]


class PartitionStateStore(Protocol):
    """What ISR writes need of the metadata store."""

    def update_partition_state(self, topic: str, partition: int, state: zd.LeaderAndIsr) -> int:
        """Conditional write on ``state.zk_version``; the new version. Raises BadVersionError
        when the znode moved on, StoreError when the store cannot be reached."""
        ...

    def read_partition_state(self, topic: str, partition: int) -> zd.LeaderAndIsr | None: ...

    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> None: ...


class ZkPartitionStates:
    """:class:`PartitionStateStore` over a MetadataStore (ZooKeeper or the embedded LocalStore)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def update_partition_state(self, topic: str, partition: int, state: zd.LeaderAndIsr) -> int:
        return zd.update_partition_state(self._store, topic, partition, state)

    def read_partition_state(self, topic: str, partition: int) -> zd.LeaderAndIsr | None:
        return zd.read_partition_state(self._store, topic, partition)

    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> None:
        zd.notify_isr_change(self._store, partitions)


class Offload(Protocol):
    """Runs ``work`` (blocking store calls) and hands its result to ``done`` on the event loop."""

    def __call__(self, work: Callable[[], IsrResult | None], done: Done) -> None: ...


def in_worker_thread(work: Callable[[], IsrResult | None], done: Done) -> None:
    """ZooKeeper: kazoo calls block, so the write runs in the loop's default executor."""
    fut = asyncio.get_running_loop().run_in_executor(None, work)
    fut.add_done_callback(lambda f: done(f.result() if not f.exception() else None))


def inline_then_soon(work: Callable[[], IsrResult | None], done: Done) -> None:
    """The embedded LocalStore: written at once; ``done`` on the next loop turn, as a reply would."""
    result = work()
    asyncio.get_running_loop().call_soon(done, result)


class AlterPartitionManager:
    def __init__(self, broker_id: int, states: PartitionStateStore, offload: Offload) -> None:
        self.broker_id = broker_id
        self.states = states
        self.offload = offload

    def submit(self, part: Partition, new_isr: list[int], done: Done) -> None:
        """Write ``new_isr`` as ``part``'s ISR under its current leader, epoch and znode version."""
        st = zd.LeaderAndIsr(part.leader, part.leader_epoch, list(new_isr), part.controller_epoch, part.zk_version)
        self.offload(lambda: self.write(part.topic, part.index, st), done)

    def write(self, topic: str, index: int, st: zd.LeaderAndIsr) -> IsrResult | None:
        """Blocking: the conditional write and its notification (see the module docstring)."""
        try:
            version = self.states.update_partition_state(topic, index, st)
        except BadVersionError:
            fresh = self.states.read_partition_state(topic, index)
            log.info("ISR update of %s-%d lost a race (znode now %s)", topic, index, fresh)
            if fresh is not None and fresh.leader == self.broker_id and fresh.leader_epoch == st.leader_epoch:
                return list(fresh.isr), fresh.zk_version, fresh.leader_epoch
            return None
        except StoreError as e:
            log.warning("ISR update of %s-%d failed: %s", topic, index, e)
            return None
        try:
            self.states.notify_isr_change([(topic, index)])
        except StoreError as e:
            log.warning("ISR change notification for %s-%d failed: %s", topic, index, e)
        return list(st.isr), version, st.leader_epoch
