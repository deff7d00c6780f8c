"""A partition replica as this broker knows it in cluster mode (Kafka's Partition without
its I/O): the assignment, the leader and leader epoch the controller last told it, the
ISR committed in the metadata store (with that znode's version, for conditional ISR
writes) and, while this broker leads, the leader-side replication state
(replication.isr.LeaderState).

ISR changes made by the leader go to the store before they count, except that an
expansion is used for the high watermark at once (the "maximal ISR" of KIP-497: a
pending expansion can only make the high watermark more conservative); the committed
ISR (``isr``) is what min.insync.replicas is checked against.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.replication.isr import LeaderState


@dataclass
class Partition:
    topic: str
    index: int
    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    controller_epoch: int
    leader_state: LeaderState | None = None
    isr_write_in_flight: bool = False

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.index

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id and self.leader_state is not None

    def is_follower(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is one of the assigned replicas other than the leader."""
        return broker_id != self.leader and broker_id in self.replicas
