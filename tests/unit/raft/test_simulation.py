"""Deterministic simulation of 3- and 5-voter quorums under message loss, delay, reordering, partitions and
crash-restarts, checking Raft's safety after every step and liveness once the faults heal (sim.py).

200 seeds in four groups: Kafka's default timeouts, and timeouts close to the network's delays (where
elections collide and votes split). The checker is shown to say no: a replica that forgets its vote breaks
election safety, and one that votes whatever the candidate's log breaks leader completeness.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.raft.quorum_store import FileQuorumStateStore

from .sim import KAFKA_DEFAULTS, TIGHT, CarelessVoter, Faults, ForgetfulReplica, SafetyViolation, Simulation

SEEDS_PER_GROUP = 50
LIVENESS_BOUND_MS = 20_000

GROUPS = {
    "3 voters, Kafka's timeouts": (3, KAFKA_DEFAULTS, Faults(), 30_000),
    "5 voters, Kafka's timeouts": (5, KAFKA_DEFAULTS, Faults(), 30_000),
    "3 voters, tight timeouts": (3, TIGHT, Faults(max_delay_ms=100), 10_000),
    "5 voters, tight timeouts": (5, TIGHT, Faults(max_delay_ms=100), 10_000),
}


@pytest.mark.parametrize("group", list(GROUPS))
def test_safety_under_faults_and_liveness_after_them(group: str) -> None:
    voters, config, faults, fault_ms = GROUPS[group]
    steps = 0
    worst = 0
    for seed in range(SEEDS_PER_GROUP):
        sim = Simulation(seed, voters, config=config, faults=faults)
        try:
            worst = max(worst, sim.run(fault_ms=fault_ms, liveness_bound_ms=LIVENESS_BOUND_MS))
        except AssertionError as e:
            raise AssertionError(f"{group}, seed {seed}, at {sim.now} ms: {e}") from e
        steps += sim.steps
        assert sim.checker.leaders, "no leader was ever elected"
        assert sim.checker.committed, "nothing was ever committed"
    print(f"{group}: {SEEDS_PER_GROUP} seeds, {steps} steps, slowest recovery {worst} ms")


def test_crash_restarts_through_real_quorum_state_files(tmp_path: Path) -> None:
    """A few seeds with Kafka's quorum-state file (written atomically, fsynced) instead of memory."""
    restarts = 0
    for seed in range(3):
        def store(i: int, seed: int = seed) -> FileQuorumStateStore:
            return FileQuorumStateStore(tmp_path / f"{seed}-{i}" / "quorum-state")

        for i in range(1, 4):
            (tmp_path / f"{seed}-{i}").mkdir()
        sim = Simulation(seed, 3, config=TIGHT, faults=Faults(max_delay_ms=100), store_factory=store)
        sim.run(fault_ms=10_000, liveness_bound_ms=LIVENESS_BOUND_MS)
        restarts += sum(n.incarnation for n in sim.nodes.values()) - 3
        assert all((tmp_path / f"{seed}-{i}" / "quorum-state").exists() for i in range(1, 4))
    assert restarts > 0


def _first_violation(factory: type, seeds: int = 100) -> str:
    for seed in range(seeds):
        sim = Simulation(seed, 3, config=TIGHT, faults=Faults(max_delay_ms=100), replica_factory=factory, faulty=1)
        try:
            sim.run(fault_ms=10_000, liveness_bound_ms=LIVENESS_BOUND_MS)
        except SafetyViolation as e:
            return str(e)
    return ""


def test_the_checker_catches_a_replica_that_forgets_its_vote() -> None:
    assert "election safety" in _first_violation(ForgetfulReplica)


def test_the_checker_catches_a_voter_that_ignores_the_candidates_log() -> None:
    found = _first_violation(CarelessVoter)
    assert "leader completeness" in found or "committed prefixes diverge" in found or "high watermark" in found, found


def test_the_same_seed_gives_the_same_run() -> None:
    runs = []
    for _ in range(2):
        sim = Simulation(7, 5, config=TIGHT, faults=Faults(max_delay_ms=100))
        took = sim.run(fault_ms=5_000)
        runs.append((took, sim.steps, [n.log.entries for n in sim.nodes.values()]))
    assert runs[0] == runs[1]
