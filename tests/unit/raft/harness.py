"""A hand-driven quorum of RaftReplicas for the unit tests: messages go where the test says, when it says."""

from __future__ import annotations

import random
from collections.abc import Callable

from odradek.raft.client import QuorumConfig, RaftReplica
from odradek.raft.log import InMemoryRaftLog
from odradek.raft.messages import Effect, RaftMessage, Received, Send
from odradek.raft.quorum_store import InMemoryQuorumStateStore


class Harness:
    def __init__(self, voters: int = 3, *, seed: int = 0, config: QuorumConfig | None = None) -> None:
        self.ids = list(range(1, voters + 1))
        self.config = config or QuorumConfig()
        self.now = 0
        self.seed = seed
        self.logs = {i: InMemoryRaftLog() for i in self.ids}
        self.stores = {i: InMemoryQuorumStateStore() for i in self.ids}
        self.replicas: dict[int, RaftReplica] = {}
        self.pending: list[tuple[int, Send]] = []  # (source, message), in the order sent
        self.effects: dict[int, list[Effect]] = {i: [] for i in self.ids}
        for i in self.ids:
            self.start(i)

    def start(self, i: int) -> RaftReplica:
        """(Re)start replica i from its log and quorum-state store."""
        self.pending = [(s, m) for s, m in self.pending if s != i and m.destination != i]
        r = RaftReplica(
            local_id=i,
            voters=self.ids,
            log=self.logs[i],
            store=self.stores[i],
            rng=random.Random(self.seed * 100 + i),
            now_ms=self.now,
            config=self.config,
        )
        self.replicas[i] = r
        return r

    def _took(self, i: int, effects: list[Effect]) -> list[Effect]:
        self.effects[i] += effects
        self.pending += [(i, e) for e in effects if isinstance(e, Send)]
        return effects

    def tick(self, i: int, now: int | None = None) -> list[Effect]:
        if now is not None:
            self.now = max(self.now, now)
        return self._took(i, self.replicas[i].tick(self.now))

    def timeout(self, i: int) -> list[Effect]:
        """Tick replica i at its next deadline."""
        return self.tick(i, self.replicas[i].next_deadline_ms())

    def append(self, i: int, *values: bytes) -> int:
        offset, effects = self.replicas[i].append(list(values), self.now)
        self._took(i, effects)
        return offset

    def take(self, match: Callable[[int, Send], bool]) -> list[tuple[int, Send]]:
        """Remove and return the pending messages ``match`` selects (without delivering them)."""
        taken = [(s, m) for s, m in self.pending if match(s, m)]
        self.pending = [(s, m) for s, m in self.pending if not match(s, m)]
        return taken

    def deliver(self, source: int, send: Send) -> list[Effect]:
        received = Received(source, send.correlation_id, send.message)
        return self._took(send.destination, self.replicas[send.destination].handle(received, self.now))

    def deliver_all(
        self,
        *,
        drop: Callable[[int, Send], bool] = lambda s, m: False,
        hold: Callable[[int, Send], bool] = lambda s, m: False,
        limit: int = 1000,
    ) -> None:
        """Deliver pending messages until none is left but those ``hold`` keeps; ``drop`` loses some."""
        held: list[tuple[int, Send]] = []
        for _ in range(limit):
            if not self.pending:
                self.pending = held
                return
            source, send = self.pending.pop(0)
            if hold(source, send):
                held.append((source, send))
            elif not drop(source, send):
                self.deliver(source, send)
        raise AssertionError("messages kept coming")

    def sent(self, i: int, kind: type[RaftMessage]) -> list[Send]:
        return [e for e in self.effects[i] if isinstance(e, Send) and isinstance(e.message, kind)]

    def elect(self, i: int) -> RaftReplica:
        """Let replica i's election timeout expire first, and deliver everything."""
        self.timeout(i)
        self.deliver_all()
        assert self.replicas[i].is_leader(), self.replicas[i].state
        return self.replicas[i]

    def replicate(self, rounds: int = 3) -> None:
        """Followers fetch (and the leader answers) a few times."""
        for _ in range(rounds):
            for i in self.ids:
                self.tick(i)
            self.deliver_all()
            leader = next((r for r in self.replicas.values() if r.is_leader()), None)
            if leader is not None:  # parked fetches answered at MaxWaitMs
                self.tick(leader.local_id, self.now + self.config.fetch_max_wait_ms)
                self.deliver_all()
