"""Time to create many single-partition topics against a real broker process (embedded metadata store).

    PYTHONPATH=src nice -n 19 .venv/bin/python scripts/create_topics_timing.py --topics 10000 --per-request 100

Starts ``python -m odradek broker`` (under ``nice -n 19``) on a free port with a fresh log dir, creates
``--topics`` topics of one partition in CreateTopics requests of ``--per-request`` topics each (confluent-kafka's
AdminClient, waiting for each request's answer), and prints the elapsed time every 1,000 topics and at the end,
or where it stopped when ``--max-seconds`` ran out.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the broker exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the broker did not listen in time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=10000)
    ap.add_argument("--per-request", type=int, default=100)
    ap.add_argument("--max-seconds", type=float, default=3600)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-create-topics-") as d:
        port = _free_port()
        logdir = Path(d) / "data"
        with open(Path(d) / "broker.log", "wb") as out:
            proc = subprocess.Popen(
                ["nice", "-n", "19", sys.executable, "-m", "odradek", "broker",
                 "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={logdir}",
                 "--override", "http.listeners="],
                stdout=out, stderr=out,
            )
        try:
            _wait_listening(port, proc)
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            started = time.perf_counter()
            done = 0
            while done < args.topics and time.perf_counter() - started < args.max_seconds:
                n = min(args.per_request, args.topics - done)
                futures = admin.create_topics([NewTopic(f"t{done + i:06d}", 1, 1) for i in range(n)],
                                              operation_timeout=120, request_timeout=180)
                for f in futures.values():
                    f.result(timeout=300)
                done += n
                if done % 1000 == 0 or done == args.topics:
                    print(f"{done} topics: {time.perf_counter() - started:.1f} s", flush=True)
            elapsed = time.perf_counter() - started
            print(f"created {done} single-partition topics in {elapsed:.1f} s"
                  + ("" if done == args.topics else f" (stopped at --max-seconds {args.max_seconds:.0f})"))
            on_disk = {p.name: p.stat().st_size for p in logdir.iterdir() if p.name.startswith("odradek-metadata")}
            print(f"metadata files: {on_disk}")
        finally:
            proc.terminate()
            proc.wait(timeout=120)


if __name__ == "__main__":
    main()
