"""How the source divides a read into Spark tasks (``source.plan_ranges``), without Spark or a broker."""

from __future__ import annotations

import pytest

from odradek.pipeline import source
from odradek.pipeline.source import KafkaInputPartition, default_min_partitions, plan_ranges

THREE = {("t", 0): (0, 333_334), ("t", 1): (0, 333_333), ("t", 2): (0, 333_333)}


def _covered(parts: list[object]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for p in parts:
        assert isinstance(p, KafkaInputPartition)
        out.setdefault((p.topic, p.partition), []).append((p.start, p.end))
    return out


def _assert_exact_cover(parts: list[object], ranges: dict[tuple[str, int], tuple[int, int]]) -> None:
    for tp, pieces in _covered(parts).items():
        pieces.sort()
        assert pieces[0][0] == ranges[tp][0] and pieces[-1][1] == ranges[tp][1]
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))  # no gap, no overlap


def test_large_read_gets_a_task_per_core_by_default() -> None:
    parts = plan_ranges(THREE, None, parallelism=8)
    assert len(parts) == 8
    _assert_exact_cover(parts, THREE)
    one = {("t", 0): (0, 1_000_000)}
    assert len(plan_ranges(one, None, parallelism=2)) == 2
    assert len(plan_ranges(THREE, None, parallelism=2)) == 3  # never fewer than one per topic partition


def test_small_batch_keeps_one_task_per_partition() -> None:
    small = {("t", 0): (0, 400), ("t", 1): (10, 310), ("t", 2): (0, 300)}
    assert len(plan_ranges(small, None, parallelism=8)) == 3
    assert default_min_partitions(99_999, 8) == 1 and default_min_partitions(100_000, 8) == 2
    assert default_min_partitions(10_000_000, 8) == 8


@pytest.mark.parametrize("tasks", [4, 5, 6, 7, 8, 11])
def test_min_partitions_is_delivered(tasks: int) -> None:
    """Spark's rule rounds each partition's share (three equal ranges and 4 tasks give 3); here the
    total is what was asked for."""
    parts = plan_ranges(THREE, tasks)
    assert len(parts) == tasks
    _assert_exact_cover(parts, THREE)


def test_explicit_min_partitions_below_partition_count() -> None:
    assert len(plan_ranges(THREE, 2, parallelism=8)) == 3


def test_parallelism_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(source.PARALLELISM_ENV, "5")
    assert source.default_parallelism() == 5
    monkeypatch.setenv(source.PARALLELISM_ENV, "junk")
    assert source.default_parallelism() >= 1


def test_source_reader_does_not_import_kio() -> None:
    """A Spark worker reading records imports no kio schema module (1-2 s for each new worker)."""
    import subprocess
    import sys

    code = ("import sys, odradek.pipeline.source, odradek.pipeline.wire_fetch, odradek.pipeline.kafka_client; "
            "print(sorted(m for m in sys.modules if m == 'kio' or m.startswith('kio.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
