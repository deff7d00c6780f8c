"""Kafka Connect 4.4 in distributed mode with Debezium's PostgreSQL connector, fetched from Maven Central.

The heaviest real client a broker meets: a Connect worker creates its compacted config, offset and status
topics itself (and refuses to start when the broker reports another cleanup policy), joins its workers'
group with the Connect protocol (``connect.protocol=sessioned``: KIP-415's incremental cooperative
rebalancing, KIP-507's signed requests), and with ``exactly.once.source.support=enabled`` (KIP-618) writes
the config topic through a transactional producer on the leader, fences the previous generation of source
task producers (``Admin.fenceProducers``) and commits each batch of source records with the task's offsets
in one transaction.

Nothing of Connect or Debezium is committed: ``fetch()`` runs Maven on ``peers/connect/pom.xml`` (the
worker: ``connect-runtime``, ``connect-json``, ``connect-api``, ``connect-transforms`` 4.4.0 and log4j2, into
``peers/connect/target/libs``) and on ``peers/connect/debezium-postgres/pom.xml`` (Debezium's PostgreSQL
connector 3.6.1.Final and its own dependencies, into the plugin folder
``peers/connect/target/plugins/debezium-connector-postgres``, which the worker's ``plugin.path`` names:
Connect loads it in isolation, as a deployment does). ``peers/connect/target`` is ignored by git; both runs
write into a new folder, swapped in whole when they succeed (peers/maven_fetch.py).

A worker is the main class ``connect-distributed.sh`` runs (``org.apache.kafka.connect.cli.ConnectDistributed
worker.properties``) with Kafka's JVM options but a smaller heap: ``-Xms128M -Xmx512M`` (the script's
default is ``-Xms256M -Xmx2G``; two workers and a broker share this machine's cores and memory with the
benchmarks), optionally under ``nice``. Its log is ``connect.log`` in its directory.

As a command::

    python peers/connect_peer.py fetch
    python peers/connect_peer.py start --bootstrap-server 127.0.0.1:9092 [--rest-port 8083] [--group-id connect]
        [--data-dir DIR] [--worker-property KEY=VALUE ...]          # one worker, until Ctrl-C

Bad input gets one line on stderr and exit code 2 (``PeerError``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kafka_peer import JVM_PERFORMANCE_OPTS, port_free  # noqa: E402
from maven_fetch import MavenFetch, MavenRun, PeerError, find_java  # noqa: E402
from procs import kill_process, stop_process

CONNECT_VERSION = "4.4.0"
DEBEZIUM_VERSION = "3.6.1.Final"
PEER_DIR = Path(__file__).resolve().parent / "connect"
POM = PEER_DIR / "pom.xml"
DEBEZIUM_POSTGRES_POM = PEER_DIR / "debezium-postgres" / "pom.xml"
# CONNECT_PEER_TARGET: another folder for the jars; KAFKA_PEER_MAVEN_ARGS: more arguments for Maven
TARGET = Path(os.environ.get("CONNECT_PEER_TARGET") or PEER_DIR / "target").resolve()
LIBS = TARGET / "libs"
PLUGINS = TARGET / "plugins"
DEBEZIUM_POSTGRES_DIR = PLUGINS / "debezium-connector-postgres"
HOST = "127.0.0.1"

WORKER_HEAP = ("-Xms128M", "-Xmx512M")
POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

WORKER_LOG4J2 = """\
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:connect.log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.producerconfig.name = org.apache.kafka.clients.producer.ProducerConfig
logger.producerconfig.level = WARN
logger.consumerconfig.name = org.apache.kafka.clients.consumer.ConsumerConfig
logger.consumerconfig.level = WARN
logger.adminconfig.name = org.apache.kafka.clients.admin.AdminClientConfig
logger.adminconfig.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
"""


# ---------------------------------------------------------------------------------------------- fetch


def _sources_hash() -> str:
    h = hashlib.sha256()
    for pom in (POM, DEBEZIUM_POSTGRES_POM):
        h.update(pom.read_bytes() + b"\0")
    return h.hexdigest()


CONNECT_FETCH = MavenFetch(
    TARGET, (MavenRun(POM, f"Kafka Connect {CONNECT_VERSION}"),
             MavenRun(DEBEZIUM_POSTGRES_POM, f"Debezium's PostgreSQL connector {DEBEZIUM_VERSION}")),
    required=(f"{LIBS.name}/connect-runtime-{CONNECT_VERSION}.jar",
              f"{PLUGINS.name}/{DEBEZIUM_POSTGRES_DIR.name}/debezium-connector-postgres-{DEBEZIUM_VERSION}.jar"),
    stamp=_sources_hash)


def fetched() -> bool:
    return CONNECT_FETCH.done()


def fetch(quiet: bool = True) -> Path:
    """Connect's jars into ``LIBS`` and Debezium's PostgreSQL connector into its plugin folder (once; later
    calls return at once, concurrent callers wait for the first). Returns ``TARGET``."""
    CONNECT_FETCH.fetch(quiet=quiet)
    return TARGET


# ---------------------------------------------------------------------------------------------- REST


class RestError(RuntimeError):
    def __init__(self, status: int, body: Any, method: str, path: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body}")
        self.status = status
        self.body = body


def rest(port: int, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
    """One call of Connect's REST API on ``127.0.0.1:port``; the decoded JSON answer (None when empty).
    RestError with the status and Connect's error body on a 4xx / 5xx."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            decoded: Any = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode(errors="replace")
        raise RestError(e.code, decoded, method, path) from None
    return json.loads(raw) if raw else None


# ---------------------------------------------------------------------------------------------- worker


class ConnectWorker:
    """One distributed Connect worker in its own directory (``worker.properties``, ``log4j2.properties``,
    ``connect.log``, ``stdout.log``). Workers with the same ``group_id`` and bootstrap form one cluster."""

    def __init__(self, base_dir: Path, bootstrap: str, rest_port: int, group_id: str = "connect",
                 replication_factor: int = 1, properties: Mapping[str, str] | None = None,
                 heap: Sequence[str] = WORKER_HEAP, nice: int = 0) -> None:
        self.base_dir = Path(base_dir)
        self.bootstrap = bootstrap
        self.rest_port = rest_port
        self.group_id = group_id
        self.replication_factor = replication_factor
        self.extra = dict(properties or {})
        self.heap = tuple(heap)
        self.nice = nice
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def worker_id(self) -> str:
        """The id Connect's status API names this worker by (its advertised REST host and port)."""
        return f"{HOST}:{self.rest_port}"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "connect.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def properties(self) -> dict[str, str]:
        rf = str(self.replication_factor)
        props = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "config.storage.topic": f"{self.group_id}-configs",
            "offset.storage.topic": f"{self.group_id}-offsets",
            "status.storage.topic": f"{self.group_id}-status",
            "config.storage.replication.factor": rf,
            "offset.storage.replication.factor": rf,
            "status.storage.replication.factor": rf,
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "exactly.once.source.support": "enabled",
            "plugin.path": str(PLUGINS),
            "plugin.discovery": "service_load",
            "listeners": f"http://{HOST}:{self.rest_port}",
            "rest.advertised.host.name": HOST,
            "rest.advertised.port": str(self.rest_port),
            "offset.flush.interval.ms": "1000",
        }
        props.update(self.extra)
        return props

    def command(self) -> list[str]:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        config = self.base_dir / "worker.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log4j2 = self.base_dir / "log4j2.properties"
        log4j2.write_text(WORKER_LOG4J2)
        cmd = [find_java(), *self.heap, *JVM_PERFORMANCE_OPTS, f"-Dlog4j2.configurationFile={log4j2}",
               f"-Dconnect.log.file={self.log_path}", "-cp", str(LIBS / "*"),
               "org.apache.kafka.connect.cli.ConnectDistributed", str(config)]
        if self.nice:
            cmd = ["nice", "-n", str(self.nice), *cmd]
        return cmd

    def start(self, timeout: float = 120.0) -> ConnectWorker:
        """Start the JVM tied to this process (SIGTERM should it die) and wait until the REST API answers
        ``GET /connectors`` (the worker has joined its group and read the config topic)."""
        if self.running:
            raise PeerError(f"Connect worker {self.worker_id} is already running")
        fetch()
        if not port_free(self.rest_port):
            raise PeerError(f"port {self.rest_port} on {HOST} is already in use")
        cmd = self.command()
        setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
        if setpriv is not None:
            cmd = [setpriv, "--pdeathsig", "TERM", "--", *cmd]
        with open(self.base_dir / "stdout.log", "ab") as out:
            out.write(f"\n===== start: {' '.join(cmd)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.base_dir)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise PeerError(f"Connect worker {self.worker_id} exited with {self.proc.returncode} during "
                                f"start-up: {self.last_error()}")
            try:
                rest(self.rest_port, "GET", "/connectors", timeout=5)
                return
            except (OSError, RestError) as e:
                last = str(e)
            time.sleep(0.5)
        raise PeerError(f"Connect worker {self.worker_id} not ready after {timeout:.0f}s ({last}): {self.last_error()}")

    def last_error(self) -> str:
        for path in (self.log_path, self.base_dir / "stdout.log"):
            with contextlib.suppress(FileNotFoundError):
                lines = [ln for ln in path.read_text(errors="replace").splitlines()
                         if " ERROR " in ln or "Exception" in ln]
                if lines:
                    return lines[-1][:600]
        return f"see {self.log_path}"

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        return rest(self.rest_port, method, path, body, timeout)

    def put_connector(self, name: str, config: Mapping[str, str], timeout: float = 60.0) -> Any:
        """``PUT /connectors/<name>/config`` (create or update), retried while the worker answers 409
        (a rebalance is in progress) or 5xx (the leader is not known yet)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.rest("PUT", f"/connectors/{name}/config", dict(config))
            except RestError as e:
                if (e.status != 409 and e.status < 500) or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def status(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self.rest("GET", f"/connectors/{name}/status")
        return out

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (the worker leaves its group and stops its tasks, committing their last offsets), SIGKILL
        after ``timeout``."""
        return stop_process(self.proc, timeout)

    def kill(self) -> None:
        kill_process(self.proc)


def debezium_postgres_config(*, port: int, database: str, tables: Sequence[str], topic_prefix: str,
                             host: str = HOST, user: str = "postgres", password: str = "postgres",
                             slot: str = "debezium", publication: str = "dbz_publication",
                             partitions: int = 1, replication_factor: int = 1,
                             extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The connector configuration of Debezium's PostgreSQL connector for the tables ``tables``
    (``schema.table``): pgoutput (PostgreSQL's own logical decoding plugin) with a publication of just
    those tables, an initial snapshot then streaming, decimals as strings (exact in JSON), and topics
    ``<prefix>.<schema>.<table>`` created by Connect (KIP-158) with ``partitions`` partitions."""
    config = {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.dbname": database,
        "topic.prefix": topic_prefix,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": publication,
        "publication.autocreate.mode": "filtered",
        "table.include.list": ",".join(tables),
        "snapshot.mode": "initial",
        "decimal.handling.mode": "string",
        "tombstones.on.delete": "true",
        "exactly.once.support": "requested",
        "topic.creation.default.partitions": str(partitions),
        "topic.creation.default.replication.factor": str(replication_factor),
    }
    config.update(extra or {})
    return config


# ---------------------------------------------------------------------------------------------- command


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="connect-peer", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="fetch Kafka Connect's and Debezium's jars from Maven Central (once)")
    st = sub.add_parser("start", help="start one distributed Connect worker and run until Ctrl-C or SIGTERM")
    st.add_argument("--bootstrap-server", required=True)
    st.add_argument("--rest-port", type=int, default=8083)
    st.add_argument("--group-id", default="connect")
    st.add_argument("--replication-factor", type=int, default=1, help="of the config, offset and status topics")
    st.add_argument("--data-dir", type=Path, default=Path("connect-peer-data"))
    st.add_argument("--worker-property", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch(quiet=False))
            return 0
        extra: dict[str, str] = {}
        for item in args.worker_property:
            if "=" not in item:
                raise PeerError(f"--worker-property {item!r} is not KEY=VALUE")
            k, v = item.split("=", 1)
            extra[k.strip()] = v
        worker = ConnectWorker(args.data_dir.resolve() / f"worker-{args.rest_port}", args.bootstrap_server,
                               args.rest_port, args.group_id, args.replication_factor, extra)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        worker.start()
        print(f"Kafka Connect {CONNECT_VERSION} worker {worker.worker_id} in group {args.group_id} "
              f"(log {worker.log_path})", flush=True)
        try:
            while worker.running:
                time.sleep(0.5)
            raise PeerError(f"Connect worker exited: {worker.last_error()}")
        except KeyboardInterrupt:
            pass
        finally:
            worker.stop()
        return 0
    except PeerError as e:
        print(f"connect-peer: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
