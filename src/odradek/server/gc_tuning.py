"""The cyclic garbage collector and a long-running broker process.

CPython's collector stops the process for as long as a collection takes, and a full (oldest
generation) collection walks every tracked object. After start-up a broker holds some 45,000 of
them that live as long as the process (modules, classes, configuration, the command line's
parsers, the broker's own components). Measured with 1 KB records at 100 MB/s on three brokers
(RF=3), each broker ran a full collection in the first two seconds of the load, holding its event
loop 21-31 ms (one broker alone ran its next one only after a 20 s run): more than Kafka's whole
p99.9 latency budget. ``gc.freeze()`` once the broker serves moves those objects out of every later
collection, so a full collection only walks what was created since (1.5-2.6 ms in the same runs).

What grows after start-up is frozen too, once a full collection of it has become long
(:class:`RefreezePolicy`). :class:`GcPauses` times every collection for ``/metrics``.

Only for the broker command: an embedded broker shares its process with a program whose objects
are not ours to freeze (frozen objects in a reference cycle are never reclaimed).
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
import time
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)


def freeze_startup_objects() -> int:
    """Collect what start-up left behind, then exempt every surviving object from later collections;
    the number of objects frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("froze %d objects that survived start-up: later garbage collections skip them", frozen)
    return frozen


PAUSE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)  # seconds
GENERATIONS = 3


class GcPauses:
    """How long each collection of the cyclic collector held the process, per generation: a
    ``gc.callbacks`` callback timing each collection from its "start" to its "stop" call. The
    counts are cumulative per bucket of :data:`PAUSE_BUCKETS` (a Prometheus histogram, the last
    bucket +Inf); ``longest`` is the longest pause of each generation since it was installed."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.buckets: list[list[int]] = [[0] * (len(PAUSE_BUCKETS) + 1) for _ in range(GENERATIONS)]
        self.count = [0] * GENERATIONS
        self.seconds = [0.0] * GENERATIONS
        self.longest = [0.0] * GENERATIONS
        self.collected = [0] * GENERATIONS
        self._started = 0.0
        self.last_pause = 0.0  # of the last collection, for the callbacks after this one

    def __call__(self, phase: str, info: Mapping[str, int]) -> None:
        if phase == "start":
            self._started = self.clock()
            return
        pause = self.clock() - self._started
        self.last_pause = pause
        gen = info["generation"]
        self.count[gen] += 1
        self.seconds[gen] += pause
        self.collected[gen] += info["collected"]
        if pause > self.longest[gen]:
            self.longest[gen] = pause
        self.buckets[gen][bisect.bisect_left(PAUSE_BUCKETS, pause)] += 1
        if gen == GENERATIONS - 1 and log.isEnabledFor(logging.DEBUG):
            log.debug("full garbage collection: %.1f ms, %d objects collected, %d tracked after it",
                      pause * 1000, info["collected"], len(gc.get_objects(GENERATIONS - 1)))


_pauses: GcPauses | None = None


def pauses() -> GcPauses:
    """The process's recorder, installed in ``gc.callbacks`` at the first call (one per process,
    whatever number of brokers it runs)."""
    global _pauses
    if _pauses is None:
        _pauses = GcPauses()
        gc.callbacks.append(_pauses)
    return _pauses


FREEZE_AFTER_PAUSE_S = 0.02  # a full collection this long freezes what survived it
# generation 2's threshold once what grows is frozen: a full collection is considered every third collection of
# generation 1 (CPython's default, 10: every eleventh), i.e. every ~20,000 net allocations rather than ~70,000
REFREEZE_THRESHOLD2 = 2


class RefreezePolicy:
    """Freeze again once a long-lived population has grown after start-up (issue 33).

    Partitions created at run time (each one's log, segments, indexes, producer state, replica state,
    metadata cache entry) and a large group's members are tracked objects that live for hours, and every
    full collection walks them all: 0.6 s while 10,000 partitions were created, 0.6-2.2 s under the
    produce load that followed (bench/gc_pause_bench.py, a loaded two-core machine). A full collection that took at least
    ``pause_s`` has shown that a population this large survives: it is frozen there and then, from the
    collection's "stop" callback (``gc.freeze`` only moves the generations' lists into the permanent
    one; right after a full collection nothing unreachable is left in them), so the next full
    collections walk only what was created after it.

    CPython 3.11 runs a full collection only once the objects promoted since the last one reach a
    quarter of those it left (``long_lived_total``): left as it is, a population still growing (10,000
    partitions being created, then their first appends making their segments' files and indexes) would
    be walked in ever larger steps, each a quarter of all frozen so far. ``schedule`` (the event loop's
    ``call_soon_threadsafe``) runs one more full collection right after the freeze, outside the
    collector's callback (where ``gc.collect`` does nothing): it walks next to nothing and leaves
    ``long_lived_total`` near zero, so the next full collections come at the young generations' pace
    (every ``threshold2`` collections of generation 1) and each walks only what was promoted since;
    when those walks reach ``pause_s`` again, that population is frozen in turn. A full collection is
    then held back by the young generations alone: every ``threshold2`` + 1 collections of generation 1,
    ~70,000 net allocations with CPython's default of 10, and when they all survive (a topic of 10,000
    partitions being created) that many objects are walked at once, 70-140 ms on a loaded two-core
    machine. :func:`enable_refreeze` lowers it to :data:`REFREEZE_THRESHOLD2`; the quarter rule still
    spaces full collections out while little survives, and each walks only what is not frozen.

    Frozen objects that become unreachable are still freed by their reference counts; only those in a
    reference cycle would stay for good. A deleted topic's objects (its partitions' logs, segments,
    indexes, producer and replica state, metadata) hold no cycles: they are freed when the topic goes,
    frozen or not (tests/integration/test_gc_pauses.py checks it, bench/gc_pause_bench.py ``--churn``
    measures RSS after topics are created and deleted again and again); so are closed connections.
    """

    def __init__(self, pauses: GcPauses, pause_s: float = FREEZE_AFTER_PAUSE_S,
                 schedule: Callable[[Callable[[], object]], object] | None = None) -> None:
        self.pauses = pauses
        self.pause_s = pause_s
        self.schedule = schedule
        self.refreezes = 0

    def __call__(self, phase: str, info: Mapping[str, int]) -> None:
        if phase != "stop" or info["generation"] != GENERATIONS - 1:
            return
        pause = self.pauses.last_pause
        if pause < self.pause_s:
            return
        before = gc.get_freeze_count()
        gc.freeze()
        self.refreezes += 1
        log.info("a full garbage collection took %.0f ms: froze the %d objects that survived it (%d frozen in all)",
                 pause * 1000, gc.get_freeze_count() - before, gc.get_freeze_count())
        if self.schedule is not None:
            with contextlib.suppress(RuntimeError):  # the event loop closed: the process is ending
                self.schedule(gc.collect)


_refreeze: RefreezePolicy | None = None


def enable_refreeze(schedule: Callable[[Callable[[], object]], object] | None,
                    pause_s: float = FREEZE_AFTER_PAUSE_S) -> RefreezePolicy:
    """The broker command's: install :class:`RefreezePolicy` after the pause recorder (once per process)."""
    global _refreeze
    if _refreeze is None:
        _refreeze = RefreezePolicy(pauses(), pause_s, schedule)
        young, middle, _old = gc.get_threshold()
        gc.set_threshold(young, middle, REFREEZE_THRESHOLD2)
        gc.callbacks.append(_refreeze)
    return _refreeze

