"""Full garbage collections of a broker holding many partitions (issue 33, server/gc_tuning.py).

Every partition is some forty tracked objects that live as long as the partition (its log, segment,
indexes, producer and replica state, metadata cache entry), and a full collection walks them all:
with 10,000 partitions 0.6 s during their creation and 0.6-2.2 s under the produce load that followed
(bench/gc_pause_bench.py on a loaded two-core machine), the event loop held throughout. The broker
freezes what survives a long full collection, so the next ones walk only what was created since.

Read from the broker's ``odradek_gc_pause_seconds`` histogram on /metrics: the full (generation-2)
collections during a produce loop over fresh partitions (the first append to each makes its files and
index objects: a long-lived population growing under load) stay under 100 ms with 3,000 partitions (at
most 25-50 ms seen on a loaded two-core machine); without the freeze the one full collection of the loop
walked every partition and took 100-250 ms there (the test failed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import odradek
from odradek.protocol.records import build_batch

from . import wire
from .broker import Broker
from .clients import unique
from .test_metrics import Samples, scrape

PARTITIONS = 3000  # 6 topics of 500: a full collection walking them all took 0.1-0.25 s, 0.6 s at 10,000
PER_TOPIC = 500
# the longest full collection allowed during the loop: a collection that walks only the objects made
# since the last freeze takes a few ms here; the bound leaves room for a loaded test machine
PAUSE_BOUND_S = 0.1
LOOP_S = 20.0


def _gen2_buckets(samples: Samples) -> dict[str, int]:
    return {dict(labels)["le"]: int(v) for (name, labels), v in samples.items()
            if name == "odradek_gc_pause_seconds_bucket" and dict(labels)["generation"] == "2"}


def _gen2(samples: Samples) -> tuple[int, int]:
    """(full collections, those longer than PAUSE_BOUND_S) so far."""
    count = int(samples[("odradek_gc_pause_seconds_count", (("generation", "2"),))])
    within = int(samples[("odradek_gc_pause_seconds_bucket", (("generation", "2"), ("le", str(PAUSE_BOUND_S))))])
    return count, count - within


@pytest.mark.timeout(180)
def test_full_collections_stay_short_with_thousands_of_partitions(broker: Broker) -> None:
    topics = [unique(f"gc{i}") for i in range(PARTITIONS // PER_TOPIC)]
    batch = build_batch([(None, b"v" * 100)], timestamp=int(time.time() * 1000))
    with wire.Conn(broker.bootstrap, timeout=120) as c:
        for t in topics:
            res = wire.create_topics(c, [(t, PER_TOPIC, {})])
            assert [code for _, code, _ in res] == [wire.NONE], res
        first = scrape(broker)
        before = _gen2(first)
        deadline = time.monotonic() + LOOP_S
        rounds = 0
        # every partition once (its first append makes its files), then round again until a full
        # collection has run during the loop
        while time.monotonic() < deadline and (rounds < len(topics) or _gen2(scrape(broker))[0] == before[0]):
            t = topics[rounds % len(topics)]
            r = c.request(wire.PRODUCE, 3, wire.produce_body({(t, p): batch for p in range(PER_TOPIC)}, acks=1))
            answers = wire.parse_produce_v3(r)
            assert {err for err, _ in answers.values()} == {wire.NONE}, answers
            rounds += 1
        last = scrape(broker)
        after = _gen2(last)
    then, now = _gen2_buckets(first), _gen2_buckets(last)
    during = {le: now[le] - then[le] for le in now if now[le] > then[le]}  # cumulative buckets of the loop's pauses
    assert after[0] > before[0], f"no full collection ran during {rounds} produce requests"
    assert after[1] == before[1], (f"{after[1] - before[1]} of the {after[0] - before[0]} full collections during "
                                   f"the produce loop took over {PAUSE_BOUND_S * 1000:.0f} ms (pauses up to each bound: {during})")


_DELETED_TOPIC = """
import gc, os, sys, time
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from odradek.embedded import EmbeddedBroker

N = 300
with EmbeddedBroker({"log.segment.delete.delay.ms": 100, "log.retention.check.interval.ms": 200},
                    data_dir=sys.argv[1]) as b:
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic("doomed", num_partitions=N, replication_factor=1)])["doomed"].result(60)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
    for i in range(N):
        p.produce("doomed", b"v", partition=i)
    assert p.flush(60) == 0
    time.sleep(1.0)
    gc.collect()
    gc.freeze()  # what the broker command does after a long full collection: the topic's objects frozen
    gc.disable()
    frozen = gc.get_freeze_count()
    admin.delete_topics(["doomed"])["doomed"].result(60)
    deadline = time.monotonic() + 30
    def left():
        return [d for _, dirs, _ in os.walk(sys.argv[1]) for d in dirs if d.startswith("doomed-")]
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left(), left()
    time.sleep(1.0)
    freed = frozen - gc.get_freeze_count()
    gc.unfreeze()
    print(freed, gc.collect())
"""


@pytest.mark.timeout(120)
def test_a_deleted_topics_frozen_objects_are_freed_without_the_collector(tmp_path: Path) -> None:
    """Frozen objects in a reference cycle are never reclaimed: a deleted topic's partitions (logs, segments,
    indexes, producer and replica state, metadata) must hold none, so that freezing them leaks nothing."""
    data = tmp_path / "data"
    data.mkdir()
    src = str(Path(odradek.__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", _DELETED_TOPIC, str(data)], capture_output=True, text=True,
                         timeout=110, cwd=tmp_path, env={**os.environ, "PYTHONPATH": src, "TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    freed, cyclic = map(int, out.stdout.split()[-2:])
    assert freed > 20 * 300, f"only {freed} frozen objects were freed when 300 partitions went"
    assert cyclic < 300, f"{cyclic} objects were left in reference cycles by 300 deleted partitions"
