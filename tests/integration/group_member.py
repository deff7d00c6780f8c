"""A confluent-kafka group member in its own process, so a test can SIGKILL it (no LeaveGroup, no close).

    python group_member.py BOOTSTRAP GROUP TOPIC '{"extra": "librdkafka conf"}'

Writes one JSON object per line on stdout:
    {"ev": "assign" | "revoke" | "lost", "tps": [[topic, partition], ...]}   (rebalance callbacks)
    {"ev": "assignment", "tps": [...]}                                      (whenever it changes)
    {"ev": "msg", "p": partition, "o": offset, "v": value (latin-1)}
    {"ev": "error", "err": "..."}
and stops (closing the consumer) when its stdin closes.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any


def _out(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _tps(parts: Any) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in parts)


def main(argv: list[str]) -> int:
    from confluent_kafka import Consumer

    bootstrap, group, topic, extra = argv[1], argv[2], argv[3], json.loads(argv[4])
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
    }
    conf.update(extra)
    c = Consumer(conf)
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    c.subscribe(
        [topic],
        on_assign=lambda _c, ps: _out({"ev": "assign", "tps": _tps(ps)}),
        on_revoke=lambda _c, ps: _out({"ev": "revoke", "tps": _tps(ps)}),
        on_lost=lambda _c, ps: _out({"ev": "lost", "tps": _tps(ps)}),
    )
    last: list[list[Any]] | None = None
    while not stop.is_set():
        for m in c.consume(num_messages=500, timeout=0.1):
            err = m.error()
            if err is not None:
                _out({"ev": "error", "err": str(err)})
                continue
            value = m.value() or b""
            _out({"ev": "msg", "p": m.partition(), "o": m.offset(), "v": value.decode("latin-1")})
        now = _tps(c.assignment())
        if now != last:
            last = now
            _out({"ev": "assignment", "tps": now})
    c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
