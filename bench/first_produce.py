"""The clock from a broker's launch to the first acknowledged produce (bench/start_bench.py,
bench/partitions_bench.py --peer kafka): the broker's process is launched in a thread (its ``start``
blocks until it is ready), a client probes ApiVersions every 10 ms until it is answered, then each
step produces records with a confluent-kafka producer until every one of them is acknowledged. The
producer reconnects and retries within milliseconds (reconnect and retry backoffs of 5-50 ms), so
neither broker is timed through a client's back-off."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from brokers import HOST, BenchBroker, api_versions_ok

PRODUCER_CONF = {"linger.ms": 0, "log_level": 0, "reconnect.backoff.ms": 5, "reconnect.backoff.max.ms": 20,
                 "retry.backoff.ms": 10, "retry.backoff.max.ms": 50, "topic.metadata.refresh.fast.interval.ms": 10,
                 "message.timeout.ms": 30_000, "queue.buffering.max.messages": 1_000_000}


def produce_acked(bootstrap: str, topic: str, record_size: int, deadline: float,
                  partitions: Sequence[int] | None = None, acks: str = "all") -> float:
    """One record to each of ``partitions`` (None: one record, to the partition the producer picks),
    each sent again after an error (a topic still being made, a partition not served yet) until all
    are acknowledged; the monotonic time of the last acknowledgement."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER_CONF})
    pending: set[int] = set(partitions) if partitions is not None else {-1}
    failed: list[int] = []
    errors: list[str] = []
    last = [0.0]

    def report(err: Any, msg: Any) -> None:
        part = msg.partition() if partitions is not None else -1
        if err is None:
            pending.discard(part)
            last[0] = time.monotonic()
        else:
            failed.append(part)
            errors.append(str(err))

    value = b"x" * record_size
    to_send = sorted(pending)
    try:
        while time.monotonic() < deadline:
            for part in to_send:
                while True:
                    try:
                        if part < 0:
                            p.produce(topic, value, on_delivery=report)
                        else:
                            p.produce(topic, value, partition=part, on_delivery=report)
                        break
                    except BufferError:
                        p.poll(0.01)
            to_send = []
            while pending and not failed and time.monotonic() < deadline:
                p.poll(0.002)
            if not pending:
                return last[0]
            to_send, failed[:] = sorted(set(failed) & pending), []
        raise TimeoutError(f"{len(pending)} record(s) to {topic} on {bootstrap} not acknowledged in time; "
                           f"errors: {errors[-3:]}")
    finally:
        p.flush(5)


Step = tuple[str, Callable[[float], float]]  # (name, fn(deadline) -> monotonic time it was done)


def timed_start(broker: BenchBroker, steps: Sequence[Step], timeout: float) -> dict[str, float]:
    """Launch ``broker`` and time, from the launch, its first ApiVersions answer (``answer_s``) and then
    each step in turn (``<name>_s``: seconds from the launch to the step's end)."""
    failure: list[BaseException] = []

    def starter() -> None:
        try:
            broker.start(timeout)
        except BaseException as e:  # noqa: BLE001 - raised by the caller
            failure.append(e)

    t0 = time.monotonic()
    thread = threading.Thread(target=starter, daemon=True)
    thread.start()
    deadline = t0 + timeout
    while not api_versions_ok(HOST, broker.port, timeout=1.0):
        if failure:
            raise failure[0]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{broker.kind}: no ApiVersions answer in {timeout:.0f} s")
        time.sleep(0.01)
    out = {"answer_s": round(time.monotonic() - t0, 3)}
    for name, fn in steps:
        out[f"{name}_s"] = round(fn(deadline) - t0, 3)
    thread.join(timeout)
    if failure:
        raise failure[0]
    return out


def value(r: dict[str, Any], key: str) -> float | None:
    """``fresh.first_ack_s``-style dotted lookup in one run's result (None when the run failed before it)."""
    v: Any = r
    for part in key.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return float(v) if isinstance(v, int | float) else None
