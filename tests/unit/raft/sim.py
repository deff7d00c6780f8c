"""A deterministic simulation of a KRaft quorum of RaftReplicas, and a checker of Raft's safety properties.

One seeded ``random.Random`` drives everything: message delays (so reordering), losses, partitions,
crashes and restarts, client appends, and each replica's own random (election timeouts, backoffs). Time
is a fake clock in milliseconds; events (a message delivered, a replica's timer, a fault, an append) run
in order of time from a heap. A crash loses the replica's memory and its connections (messages in flight
from or to it are dropped, as a closed TCP connection drops them); its log and quorum-state store survive
(both are written before acting, as Kafka flushes them), and a restart builds a new RaftReplica from them.

:class:`Checker` is told every effect and looks, after every event, for:

- **election safety**: at most one leader per epoch;
- **log matching**: an entry is identified by (offset, epoch): every log holding it holds the same value
  and the same epoch before it (so, by induction, the same prefix);
- **committed prefixes never diverge**: whatever a replica has under its high watermark agrees with what
  any replica ever had under its high watermark;
- **leader completeness**: a leader of epoch E holds every entry seen committed in an epoch below E;
- and no replica raises (a transition the table refuses, a leader named twice, a truncation below the
  high watermark).

:meth:`Simulation.run` then heals every fault and checks **liveness**: a leader is elected and a new append
commits within a bounded simulated time.
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from odradek.raft.client import NEVER, QuorumConfig, RaftReplica
from odradek.raft.log import InMemoryRaftLog, LogEntry
from odradek.raft.messages import NO_LEADER, Appended, Effect, LeaderChanged, Received, Send
from odradek.raft.quorum_store import InMemoryQuorumStateStore, QuorumStateStore
from odradek.raft.state import ReplicaKey, can_grant_vote


class SafetyViolation(AssertionError):
    pass


class ForgetfulReplica(RaftReplica):
    """A replica with a fault put in on purpose: it forgets whom it voted for (and which leader it knows)
    when asked for a vote, so it may vote twice in one epoch. The checker must catch what follows."""

    def _can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        forgetful = replace(self.state, voted_key=None, leader_id=NO_LEADER)
        return can_grant_vote(forgetful, candidate, up_to_date, pre_vote)


class CarelessVoter(RaftReplica):
    """A replica with a fault put in on purpose: it votes for a candidate whatever the candidate's log,
    so a leader may be elected without entries already committed."""

    def _can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        return can_grant_vote(self.state, candidate, True, pre_vote)


# Kafka's defaults, and a quorum whose timeouts are close to its network delays (elections collide)
KAFKA_DEFAULTS = QuorumConfig()
TIGHT = QuorumConfig(
    election_timeout_ms=100,
    fetch_timeout_ms=200,
    election_backoff_max_ms=100,
    request_timeout_ms=200,
    fetch_max_wait_ms=50,
)


@dataclass
class Node:
    id: int
    log: InMemoryRaftLog = field(default_factory=InMemoryRaftLog)
    store: QuorumStateStore = field(default_factory=InMemoryQuorumStateStore)
    replica: RaftReplica | None = None
    incarnation: int = 0
    wake_at: int = NEVER


@dataclass(frozen=True)
class Wake:
    node_id: int
    incarnation: int


@dataclass(frozen=True)
class Deliver:
    dest_id: int
    dest_incarnation: int
    src_id: int
    src_incarnation: int
    received: Received


@dataclass(frozen=True)
class Restart:
    node_id: int


@dataclass(frozen=True)
class Heal:
    pair: frozenset[int]


class FaultTick:
    pass


class ClientTick:
    pass


Event = Wake | Deliver | Restart | Heal | FaultTick | ClientTick


class Checker:
    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.entries: dict[tuple[int, int], tuple[object, int]] = {}  # (offset, epoch) -> (value, epoch before)
        self.committed: list[tuple[int, object]] = []  # (epoch, value) by offset
        self.commit_epochs: list[int] = []  # the epoch each committed offset was first seen committed in

    def fail(self, what: str) -> None:
        raise SafetyViolation(what)

    def on_effects(self, node: Node, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, LeaderChanged) and e.leader_id == node.id:
                self._check_leader(e.epoch, node.id)
        for e in effects:
            if isinstance(e, Appended):
                for entry in e.entries:
                    self._check_entry(node, entry)

    def _check_leader(self, epoch: int, leader_id: int) -> None:
        known = self.leaders.setdefault(epoch, leader_id)
        if known != leader_id:
            self.fail(f"election safety: replicas {known} and {leader_id} both leaders of epoch {epoch}")

    def _check_entry(self, node: Node, entry: LogEntry) -> None:
        before = node.log.entries[entry.offset - 1].epoch if entry.offset > 0 else 0
        key = (entry.offset, entry.epoch)
        seen = self.entries.setdefault(key, (entry.value, before))
        if seen != (entry.value, before):
            self.fail(f"log matching: replica {node.id} holds {entry} after epoch {before}, others hold {seen}")

    def check_node(self, node: Node) -> None:
        r = node.replica
        if r is None:
            return
        log = node.log.entries
        if r.is_leader():
            self._check_leader(r.epoch, node.id)
            k = bisect.bisect_left(self.commit_epochs, r.epoch)  # committed in an epoch below the leader's
            if k and (len(log) < k or (log[k - 1].epoch, log[k - 1].value) != self.committed[k - 1]):
                self.fail(
                    f"leader completeness: leader {node.id} of epoch {r.epoch} lacks committed offset {k - 1} "
                    f"{self.committed[k - 1]}"
                )
        hw = r.high_watermark
        if not hw:
            return
        if hw > len(log):
            self.fail(f"replica {node.id}: high watermark {hw} beyond its log end {len(log)}")
        n = len(self.committed)
        at = min(hw, n) - 1
        if at >= 0 and (log[at].epoch, log[at].value) != self.committed[at]:
            self.fail(
                f"committed prefixes diverge: replica {node.id} has {log[at]} under its high watermark {hw}, "
                f"committed was {self.committed[at]}"
            )
        for i in range(n, hw):
            self.committed.append((log[i].epoch, log[i].value))
            self.commit_epochs.append(r.epoch)

    def check_all_logs(self, nodes: list[Node]) -> None:
        for node in nodes:
            for i, entry in enumerate(node.log.entries):
                if entry.offset != i:
                    self.fail(f"replica {node.id}: entry {entry} at position {i}")
                self._check_entry(node, entry)


@dataclass
class Faults:
    """How hostile the network and the machines are while faults are on."""

    loss: float = 0.05
    max_delay_ms: int = 20
    slow_chance: float = 0.1  # a message delayed up to slow_delay_ms instead (reordering)
    slow_delay_ms: int = 400
    fault_every_ms: tuple[int, int] = (300, 1500)
    crash_ms: tuple[int, int] = (100, 3000)
    partition_ms: tuple[int, int] = (300, 4000)


class Simulation:
    def __init__(
        self,
        seed: int,
        voters: int,
        *,
        faults: Faults | None = None,
        replica_factory: Callable[..., RaftReplica] = RaftReplica,
        faulty: int | None = None,
        config: QuorumConfig | None = None,
        store_factory: Callable[[int], QuorumStateStore] | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.config = config or QuorumConfig()
        self.ids = list(range(1, voters + 1))
        self.nodes = {i: Node(i) for i in self.ids}
        if store_factory is not None:  # e.g. the real quorum-state files
            for i in self.ids:
                self.nodes[i].store = store_factory(i)
        self.replica_factory = replica_factory
        self.faulty = faulty
        self.checker = Checker()
        self.now = 0
        self.steps = 0
        self._seq = 0
        self._queue: list[tuple[int, int, Event]] = []
        self.cut: set[frozenset[int]] = set()  # pairs that cannot talk
        self.faults_on = True
        self.appended: list[bytes] = []
        for i in self.ids:
            self._start(self.nodes[i])

    # --- the event queue -----------------------------------------------------------------------

    def _push(self, at: int, event: Event) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, event))

    def _start(self, node: Node) -> None:
        node.incarnation += 1
        factory = RaftReplica if node.id != self.faulty else self.replica_factory
        node.replica = factory(
            local_id=node.id,
            voters=self.ids,
            log=node.log,
            store=node.store,
            rng=random.Random(self.rng.random()),
            now_ms=self.now,
            config=self.config,
        )
        node.wake_at = NEVER
        self._after(node, [])

    def _after(self, node: Node, effects: list[Effect]) -> None:
        self.checker.on_effects(node, effects)
        self.checker.check_node(node)
        for e in effects:
            if isinstance(e, Send):
                self._send(node, e)
        r = node.replica
        if r is not None:
            deadline = max(r.next_deadline_ms(), self.now)
            if deadline < NEVER and (deadline < node.wake_at or node.wake_at <= self.now):
                node.wake_at = deadline
                self._push(deadline, Wake(node.id, node.incarnation))

    def _send(self, node: Node, e: Send) -> None:
        dest = self.nodes[e.destination]
        if self.faults_on:
            if frozenset((node.id, dest.id)) in self.cut or self.rng.random() < self.faults.loss:
                return
            if self.rng.random() < self.faults.slow_chance:
                delay = self.rng.randint(1, self.faults.slow_delay_ms)
            else:
                delay = self.rng.randint(1, self.faults.max_delay_ms)
        else:
            delay = self.rng.randint(1, 5)
        received = Received(node.id, e.correlation_id, e.message)
        self._push(self.now + delay, Deliver(dest.id, dest.incarnation, node.id, node.incarnation, received))

    def _call(self, node: Node, fn: Callable[[RaftReplica], list[Effect]]) -> None:
        r = node.replica
        assert r is not None
        try:
            effects = fn(r)
        except SafetyViolation:
            raise
        except Exception as e:  # a replica refusing what it was told is a failed run too
            raise SafetyViolation(f"replica {node.id} raised {type(e).__name__}: {e}") from e
        self._after(node, effects)

    def step(self) -> bool:
        if not self._queue:
            return False
        at, _, event = heapq.heappop(self._queue)
        self.now = max(self.now, at)
        self.steps += 1
        if isinstance(event, Wake):
            node = self.nodes[event.node_id]
            if node.replica is not None and node.incarnation == event.incarnation and node.wake_at == at:
                node.wake_at = NEVER
                self._call(node, lambda r: r.tick(self.now))
        elif isinstance(event, Deliver):
            dest, src = self.nodes[event.dest_id], self.nodes[event.src_id]
            alive = (
                dest.replica is not None
                and dest.incarnation == event.dest_incarnation
                and src.incarnation == event.src_incarnation
            )
            if alive and not (self.faults_on and frozenset((src.id, dest.id)) in self.cut):
                received = event.received
                self._call(dest, lambda r: r.handle(received, self.now))
        elif isinstance(event, FaultTick):
            self._fault()
        elif isinstance(event, Restart):
            node = self.nodes[event.node_id]
            if node.replica is None and self.faults_on:
                self._start(node)
        elif isinstance(event, Heal):
            self.cut.discard(event.pair)
        else:
            self._client_append()
            self._push(self.now + self.rng.randint(50, 400), ClientTick())
        return True

    # --- faults and clients --------------------------------------------------------------------

    def _fault(self) -> None:
        if not self.faults_on:
            return
        f, rng = self.faults, self.rng
        choice = rng.random()
        if choice < 0.35:  # crash one replica, restart it later
            up = [n for n in self.nodes.values() if n.replica is not None]
            if up:
                node = rng.choice(up)
                node.replica = None
                node.incarnation += 1
                self._push(self.now + rng.randint(*f.crash_ms), Restart(node.id))
        elif choice < 0.7:  # a partition into two sides
            side = set(rng.sample(self.ids, rng.randint(1, len(self.ids) // 2)))
            ends = self.now + rng.randint(*f.partition_ms)
            for a in side:
                for b in self.ids:
                    if b not in side:
                        pair = frozenset((a, b))
                        self.cut.add(pair)
                        self._push(ends, Heal(pair))
        else:  # one link down
            a, b = rng.sample(self.ids, 2)
            pair = frozenset((a, b))
            self.cut.add(pair)
            self._push(self.now + rng.randint(*f.partition_ms), Heal(pair))
        self._push(self.now + rng.randint(*f.fault_every_ms), FaultTick())

    def leader(self) -> Node | None:
        leaders = [n for n in self.nodes.values() if n.replica is not None and n.replica.is_leader()]
        return max(leaders, key=lambda n: n.replica.epoch if n.replica else -1, default=None)

    def _client_append(self) -> tuple[Node, int] | None:
        node = self.leader()
        if node is None:
            return None
        value = f"v{len(self.appended)}".encode()
        self.appended.append(value)
        out: list[int] = []

        def append(r: RaftReplica) -> list[Effect]:
            offset, effects = r.append([value], self.now)
            out.append(offset)
            return effects

        self._call(node, append)
        return node, out[0]

    # --- a run ---------------------------------------------------------------------------------

    def run_until(self, t: int) -> None:
        while self._queue and self._queue[0][0] <= t:
            self.step()
        self.now = max(self.now, t)

    def heal(self) -> None:
        self.faults_on = False
        self.cut.clear()
        for node in self.nodes.values():
            if node.replica is None:
                self._start(node)

    def run(self, fault_ms: int = 8000, liveness_bound_ms: int = 20000) -> int:
        """Faults for ``fault_ms``, then heal; return the simulated ms from the heal to the first commit of
        a new append (SafetyViolation if a property breaks, AssertionError if nothing commits in the bound)."""
        self._push(self.rng.randint(200, 1000), FaultTick())
        self._push(100, ClientTick())
        self.run_until(fault_ms)
        self.heal()
        healed = self.now
        deadline = healed + liveness_bound_ms
        target: tuple[Node, int] | None = None
        while self.now < deadline:
            if target is None:
                target = self._client_append()
            else:
                node, offset = target
                r = node.replica
                if r is None or not r.is_leader():
                    target = None
                elif r.high_watermark is not None and r.high_watermark > offset:
                    self.checker.check_all_logs(list(self.nodes.values()))
                    return self.now - healed
            if not self._queue:
                break
            self.run_until(min(self._queue[0][0], deadline))
        raise AssertionError(f"liveness: no append committed within {liveness_bound_ms} ms after the faults healed")
