"""DelayedProduce: an acks=all append parked until the high watermark of every partition
it wrote to passes the end of its batches (Kafka's DelayedProduce, in the replica
manager's produce purgatory, odradek.purgatory). The group coordinator's answers wait for
its __consumer_offsets appends the same way (Kafka's GroupMetadataManager appends with
acks=-1 and answers in the append callback).

Per partition the outcome is, as in Kafka's Partition.checkEnoughReplicasReachOffset:
NONE once the high watermark reached the required offset with |ISR| ≥ min.insync.replicas,
NOT_ENOUGH_REPLICAS_AFTER_APPEND when it did so on a smaller ISR,
NOT_LEADER_OR_FOLLOWER when this broker stopped leading the partition, and
REQUEST_TIMED_OUT when the operation expires first (Kafka initialises every pending
partition's status to it).

The response is the outcome per partition, ``{(topic, partition): error code}``.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.protocol import errors
from odradek.purgatory import DelayedOperation

TP = tuple[str, int]
# check(tp, required_offset) -> error code when decided, None while still waiting
Check = Callable[[TP, int], int | None]


class DelayedProduce(DelayedOperation[dict[TP, int]]):
    __slots__ = ("pending", "results", "check")

    def __init__(
        self, required: dict[TP, int], check: Check, timeout_ms: int, decided: dict[TP, int] | None = None
    ) -> None:
        super().__init__(timeout_ms)
        self.pending = dict(required)  # partition -> the offset its high watermark must reach
        self.results: dict[TP, int] = decided if decided is not None else {}  # partitions decided already
        self.check = check

    def try_complete(self, key: TP | None = None) -> bool:
        pending = self.pending
        if key is not None:  # only that partition's state changed
            required = pending.get(key)
            if required is None:
                return False
            code = self.check(key, required)
            if code is None:
                return False
            del pending[key]
            self.results[key] = code
        else:
            for tp, required in list(pending.items()):
                code = self.check(tp, required)
                if code is not None:
                    del pending[tp]
                    self.results[tp] = code
        if pending:
            return False
        return self.force_complete()

    def on_complete(self) -> dict[TP, int]:
        results = self.results
        for tp in self.pending:
            results[tp] = errors.REQUEST_TIMED_OUT
        self.pending.clear()
        return results
