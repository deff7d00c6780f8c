"""Leader-side replication state of one partition: follower progress, ISR changes and
the high watermark (Kafka's Partition, the parts without I/O).

- A follower's log end offset is the offset of its latest fetch. It is *caught up* at
  the time of a fetch whose offset reached the leader's log end offset as it was at
  that fetch (or at the previous one, Kafka's lastCaughtUpTimeMs rule).
- ISR shrinks: an in-sync follower that has not been caught up for
  replica.lag.time.max.ms leaves the ISR.
- ISR expands: a follower whose log end offset reached the high watermark (and the
  start of the leader's epoch) joins it.
- High watermark = the smallest log end offset over the ISR (leader included); it
  never moves back.
- acks=all: an append needs |ISR| ≥ min.insync.replicas (else NOT_ENOUGH_REPLICAS) and
  is acknowledged once the high watermark passes its last offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FollowerState:
    broker_id: int
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0


@dataclass
class LeaderState:
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    epoch_start_offset: int
    high_watermark: int
    followers: dict[int, FollowerState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in self.replicas:
            if r != self.leader_id and r not in self.followers:
                # a new leader treats its followers as caught up until they prove otherwise
                self.followers[r] = FollowerState(r)

    def start(self, now_ms: int) -> None:
        for f in self.followers.values():
            f.last_caught_up_ms = now_ms

    def on_follower_fetch(self, broker_id: int, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        f = self.followers.get(broker_id)
        if f is None:
            return
        if fetch_offset >= leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, now_ms)
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        f.last_fetch_leader_leo = leader_leo
        f.last_fetch_ms = now_ms

    def joins_isr(self, broker_id: int) -> bool:
        """Whether follower ``broker_id``, outside the ISR, may join it now: it has caught up with the high
        watermark and the current leader epoch's start offset (Kafka's Partition.isFollowerInSync). Asked only
        for the follower whose fetch was just served (Kafka's maybeExpandIsr(followerReplica)): a follower that
        stopped fetching keeps its last log end offset here, and that may still equal the high watermark when
        nothing was produced since, so asking about every follower on any fetch would put a stopped replica
        straight back into the ISR it was just removed from."""
        f = self.followers.get(broker_id)
        if f is None or broker_id in self.isr:
            return False
        return f.log_end_offset >= self.high_watermark and f.log_end_offset >= self.epoch_start_offset

    def isr_to_shrink(self, now_ms: int, lag_time_max_ms: int) -> list[int]:
        """In-sync followers that have not caught up within replica.lag.time.max.ms."""
        return [
            b for b in self.isr
            if b != self.leader_id and b in self.followers
            and now_ms - self.followers[b].last_caught_up_ms > lag_time_max_ms
        ]

    def compute_high_watermark(self, leader_leo: int) -> int:
        leos = [leader_leo] + [self.followers[b].log_end_offset for b in self.isr if b in self.followers]
        return max(self.high_watermark, min(leos))

    def maybe_advance_high_watermark(self, leader_leo: int) -> bool:
        new = self.compute_high_watermark(leader_leo)
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False
