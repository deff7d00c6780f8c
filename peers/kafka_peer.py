"""Apache Kafka 4.4, run here beside Odradek: fetched from Maven Central, started in KRaft mode.

The peer in the benchmarks and the judge in the tests. Nothing of Kafka is committed: ``fetch()`` runs
Maven on ``peers/kafka/pom.xml``, which copies Kafka's jars (broker, tools, Java client, Streams, log4j2)
into ``peers/kafka/target/libs`` (ignored) and compiles the project's Java harness
(``peers/kafka/src/main/java``) into ``peers/kafka/target/kafka-peer-4.4.0.jar``. Maven writes into a new
folder that then replaces the old jars in one step (peers/maven_fetch.py), so a fetch never takes the jars
from under a test or tool running from them.

Kafka's own scripts are not in Maven Central (they come with the release tarball), so this module starts
the same Java main classes they start (``kafka-run-class.sh``), with the same JVM options:

* a broker: ``kafka.Kafka server.properties``, heap ``-Xmx1G -Xms1G`` (kafka-server-start.sh's default;
  three such brokers take 3 GB of this machine's 24 GB), G1 with kafka-run-class.sh's GC options;
* a tool (``kafka-topics``, ``kafka-configs``, ...): its main class with ``-Xmx256M``, as
  kafka-run-class.sh gives tools. ``TOOLS`` maps the script names to the classes.

A node is a combined KRaft node (``process.roles=broker,controller``): ``start_cluster(1)`` is one combined
broker and controller, ``start_cluster(3)`` three brokers that are also a three-voter controller quorum
(static ``controller.quorum.voters``). Each node has its own client port, controller port and log dir,
formatted with Kafka's storage tool (``kafka.tools.StorageTool format``) before its first start.

As a command (``scripts/kafka-peer.sh`` runs it)::

    python peers/kafka_peer.py fetch
    python peers/kafka_peer.py start [--brokers 1|3] [--base-port 29092] [--data-dir DIR]   # until Ctrl-C
    python peers/kafka_peer.py start --sasl-plain-user admin:admin-pw --sasl-plain-user bob:bob-pw
        # a SASL_PLAINTEXT/PLAIN client listener and Kafka's ACL authorizer (admin a super user)
    python peers/kafka_peer.py tool kafka-topics --bootstrap-server 127.0.0.1:29092 --list

Bad input gets one line on stderr and exit code 2 (``PeerError``): Maven or Java missing, Maven Central
unreachable, a port already taken, a log dir formatted for another cluster.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from maven_fetch import COPY_DEPENDENCIES, MavenFetch, MavenRun
from maven_fetch import PeerError as PeerError
from maven_fetch import find_java as find_java
from procs import kill_process, stop_process

from odradek.embedded.probe import api_versions_ok

KAFKA_VERSION = "4.4.0"
PEER_DIR = Path(__file__).resolve().parent / "kafka"
POM = PEER_DIR / "pom.xml"
# KAFKA_PEER_TARGET: another folder for the jars and the harness; KAFKA_PEER_MAVEN_ARGS: more arguments for
# Maven (``-s settings.xml`` naming a mirror or a proxy, ``-o`` to stay offline)
TARGET = Path(os.environ.get("KAFKA_PEER_TARGET") or PEER_DIR / "target").resolve()
LIBS = TARGET / "libs"
HARNESS_JAR = TARGET / f"kafka-peer-{KAFKA_VERSION}.jar"
HOST = "127.0.0.1"

# kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS
BROKER_HEAP = ("-Xmx1G", "-Xms1G")
TOOL_HEAP = ("-Xmx256M",)
JVM_PERFORMANCE_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                        "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                        "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
# an admin tool runs for a second or two: C1 alone and the serial collector start it ~25 % sooner here, and
# change nothing it does (the perf, verifiable and console tools keep Kafka's options)
QUICK_START_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")

# Kafka's bin/*.sh scripts and the main class each runs (Kafka 4.4)
TOOLS: dict[str, str] = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
}

# the broker's own log (server.log beside each node's data); tools log warnings to stderr
BROKER_LOG4J2 = """\
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""
TOOL_LOG4J2 = """\
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""
READY_LINE = "Kafka Server started"


# ---------------------------------------------------------------------------------------------- fetch


def _sources_hash() -> str:
    h = hashlib.sha256(POM.read_bytes())
    src = PEER_DIR / "src"
    if src.is_dir():
        for p in sorted(src.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


# its stamp, TARGET/fetched.sha256, is the hash of the pom and harness sources the libs were fetched for
KAFKA_FETCH = MavenFetch(TARGET, (MavenRun(POM, f"Kafka {KAFKA_VERSION}", ("package", COPY_DEPENDENCIES)),),
                         required=(HARNESS_JAR.name,), stamp=_sources_hash)


def fetched() -> bool:
    """True when the jars and the harness are in place for the current pom and sources."""
    return KAFKA_FETCH.done()


def fetch(quiet: bool = True) -> Path:
    """Kafka's jars into ``LIBS`` (once: later calls return at once); concurrent callers (test workers)
    wait for the first. Returns ``LIBS``."""
    KAFKA_FETCH.fetch(quiet=quiet)
    return LIBS


SPARK_KAFKA_POM = PEER_DIR.parent / "spark-kafka" / "pom.xml"
SPARK_KAFKA_TARGET = Path(os.environ.get("KAFKA_PEER_SPARK_TARGET") or SPARK_KAFKA_POM.parent / "target").resolve()
# what Spark's JVM Kafka connector needs beside Spark itself (pyspark ships Hadoop, Scala, lz4, snappy, slf4j)
SPARK_KAFKA_JARS = ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-token-provider-kafka-0-10_2.13-4.2.0.jar",
                    "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar")
SPARK_KAFKA_FETCH = MavenFetch(SPARK_KAFKA_TARGET, (MavenRun(SPARK_KAFKA_POM, "Spark's Kafka connector"),),
                               required=tuple(f"libs/{name}" for name in SPARK_KAFKA_JARS))


def fetch_spark_kafka() -> list[Path]:
    """Spark's own Kafka connector (peers/spark-kafka/pom.xml) into its ignored target/libs, once; the jars
    a Spark session needs in ``spark.jars`` to read and write Kafka with ``format("kafka")``."""
    SPARK_KAFKA_FETCH.fetch()
    return [SPARK_KAFKA_TARGET / "libs" / name for name in SPARK_KAFKA_JARS]


METADATA_SHELL_POM = PEER_DIR.parent / "kafka-shell" / "pom.xml"
METADATA_SHELL_TARGET = Path(os.environ.get("KAFKA_PEER_SHELL_TARGET") or METADATA_SHELL_POM.parent / "target").resolve()
METADATA_SHELL_VERSION = "4.3.1"  # Maven Central has no kafka-shell 4.4.0 (see peers/kafka-shell/pom.xml)
METADATA_SHELL_FETCH = MavenFetch(METADATA_SHELL_TARGET, (MavenRun(METADATA_SHELL_POM, "Kafka's metadata shell"),),
                                  required=(f"libs/kafka-shell-{METADATA_SHELL_VERSION}.jar",))


def fetch_metadata_shell() -> Path:
    """Kafka's metadata shell (kafka-shell, bin/kafka-metadata-shell.sh) and its own jars into
    peers/kafka-shell/target/libs, once, apart from the 4.4.0 jars of ``fetch()`` (which it never touches).
    Returns the libs folder."""
    METADATA_SHELL_FETCH.fetch()
    return METADATA_SHELL_TARGET / "libs"


def run_metadata_shell(snapshot: Path, *command: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``kafka-metadata-shell.sh --snapshot SNAPSHOT COMMAND...`` (org.apache.kafka.shell.MetadataShell, one
    command, non-interactive), run on the shell's own jars."""
    libs = fetch_metadata_shell()
    cmd = [find_java(), *TOOL_HEAP, *QUICK_START_OPTS, f"-Dlog4j2.configurationFile={_tool_log4j2()}",
           "-cp", str(libs / "*"), "org.apache.kafka.shell.MetadataShell", "--snapshot", str(snapshot), *command]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def classpath() -> str:
    if not fetched():
        fetch()
    return os.pathsep.join([str(HARNESS_JAR), str(LIBS / "*")])


# ---------------------------------------------------------------------------------------------- tools


def java_command(main_class: str, args: Sequence[str], heap: Sequence[str] = TOOL_HEAP,
                 jvm_opts: Sequence[str] = JVM_PERFORMANCE_OPTS, log4j2: Path | None = None,
                 system_properties: Mapping[str, str] | None = None) -> list[str]:
    """The ``java`` command line ``kafka-run-class.sh main_class args`` runs."""
    cmd = [find_java(), *heap, *jvm_opts]
    cfg = log4j2 if log4j2 is not None else _tool_log4j2()
    cmd.append(f"-Dlog4j2.configurationFile={cfg}")
    for k, v in (system_properties or {}).items():
        cmd.append(f"-D{k}={v}")
    cmd += ["-cp", classpath(), main_class, *args]
    return cmd


def _tool_log4j2() -> Path:
    path = TARGET / "tools-log4j2.properties"
    if not path.is_file() or path.read_text() != TOOL_LOG4J2:
        TARGET.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(TOOL_LOG4J2)
        tmp.replace(path)
    return path


def tool_command(name: str, *args: str) -> list[str]:
    """The command line of Kafka's ``bin/<name>.sh args`` (``name`` as in TOOLS, with or without .sh)."""
    name = name.removesuffix(".sh")
    if name not in TOOLS:
        raise PeerError(f"unknown Kafka tool {name!r}: one of {', '.join(sorted(TOOLS))}")
    long_running = any(word in name for word in ("perf", "verifiable", "console", "e2e"))
    return java_command(TOOLS[name], args, jvm_opts=JVM_PERFORMANCE_OPTS if long_running else QUICK_START_OPTS)


def run_tool(name: str, *args: str, timeout: float = 120.0, input: str | None = None,
             check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run a Kafka tool to completion; its stdout and stderr as text."""
    proc = subprocess.run(tool_command(name, *args), input=input, capture_output=True, text=True,
                          timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise PeerError(f"{name} {' '.join(args)} exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc


# ---------------------------------------------------------------------------------------------- brokers


def new_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid().toString()`` prints one (URL-safe base64, no padding), drawn
    again when it starts with "-" as Kafka's is (one in 64 would: ``kafka-storage format -t -x...`` reads it as
    an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def port_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    """``meta.properties`` of a formatted log dir (empty when it is not formatted)."""
    path = log_dir / "meta.properties"
    out: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def sasl_plain_properties(users: Mapping[str, str], port: int, controller_port: int) -> dict[str, str]:
    """server.properties of a node whose client (and inter-broker) listener is SASL_PLAINTEXT with the PLAIN
    mechanism and ``users`` (name: password), with Kafka's ACL authorizer (StandardAuthorizer, KIP-801). The first
    user is a super user; so is ANONYMOUS, the principal of the PLAINTEXT controller listener, through which the
    broker registers with the controller quorum (without it the controller refuses the node's own requests)."""
    if not users:
        raise PeerError("a SASL/PLAIN listener needs at least one user")
    for name, password in users.items():
        if not name or any(c in name + password for c in '"\\ ;=\n'):
            raise PeerError(f"SASL/PLAIN user {name!r}: no quotes, spaces, backslashes, ';' or '=' in names or passwords")
    admin, admin_pw = next(iter(users.items()))
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{admin}" '
            f'password="{admin_pw}" ' + " ".join(f'user_{u}="{pw}"' for u, pw in users.items()) + ";")
    return {
        "listeners": f"SASL_PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://{HOST}:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": AUTHORIZER_CLASS,
        "super.users": f"User:{admin};User:ANONYMOUS",
    }


@dataclass
class KafkaNode:
    """One combined KRaft node (broker and controller) in its own directory."""

    node_id: int
    port: int
    controller_port: int
    base_dir: Path
    cluster_id: str
    voters: str  # controller.quorum.voters: "1@127.0.0.1:p1,2@..."
    replication_factor: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    heap: tuple[str, ...] = BROKER_HEAP
    # SASL/PLAIN users (name: password) of a SASL_PLAINTEXT client listener with Kafka's ACL authorizer, the
    # first user a super user (and the inter-broker one); empty: the PLAINTEXT listener and no authorizer
    plain_users: dict[str, str] = field(default_factory=dict)
    # feature levels the log dir is formatted with (``kafka-storage format --feature name=level``, e.g.
    # share.version); empty: the levels Kafka's release version starts with
    features: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def server_log(self) -> Path:
        return self.base_dir / "server.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def properties(self) -> dict[str, str]:
        rf = str(self.replication_factor)
        min_isr = "2" if self.replication_factor >= 3 else "1"
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.plain_users:
            props.update(sasl_plain_properties(self.plain_users, self.port, self.controller_port))
        props.update(self.overrides)
        return props

    def write_config(self) -> Path:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        path = self.base_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.base_dir / "log4j2.properties").write_text(BROKER_LOG4J2)
        return path

    def format(self) -> None:
        """``kafka-storage format -t <cluster id> -c server.properties`` unless the log dir is formatted
        already (for this cluster: another cluster's log dir is refused)."""
        config = self.write_config()
        meta = read_meta_properties(self.log_dir)
        if meta:
            found = meta.get("cluster.id")
            if found != self.cluster_id:
                raise PeerError(f"{self.log_dir} is formatted for Kafka cluster {found}, not {self.cluster_id}: "
                                "remove the directory or pass its cluster id")
            return
        args = ["format", "-t", self.cluster_id, "-c", str(config)]
        for name, level in self.features.items():
            args += ["--feature", f"{name}={level}"]
        proc = subprocess.run(java_command(TOOLS["kafka-storage"], args),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        if proc.returncode != 0:
            reason = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise PeerError(f"kafka-storage format failed for {self.log_dir}: {reason[-1] if reason else proc.returncode}")

    def launch(self) -> None:
        """Start the JVM (formatting the log dir first when needed); ``wait_ready`` waits for it."""
        if self.running:
            raise PeerError(f"Kafka node {self.node_id} is already running (pid {self.pid})")
        for p in (self.port, self.controller_port):
            if not port_free(p):
                raise PeerError(f"port {p} on {HOST} is already in use: stop what holds it or pick another base port")
        self.format()
        config = self.base_dir / "server.properties"
        # kafka-run-class.sh adds $KAFKA_OPTS to the JVM's options (a profiler, a JMX port, ...): the broker's too
        jvm_opts = (*JVM_PERFORMANCE_OPTS, *shlex.split(os.environ.get("KAFKA_OPTS", "")))
        cmd = java_command("kafka.Kafka", [str(config)], heap=self.heap, jvm_opts=jvm_opts,
                           log4j2=self.base_dir / "log4j2.properties",
                           system_properties={"kafka.logs.dir": str(self.base_dir)})
        with open(self.base_dir / "kafka.stdout.log", "ab") as out:
            out.write(f"\n===== start: {' '.join(cmd)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.base_dir, start_new_session=True)
        self._log_offset_at_start = self.server_log.stat().st_size if self.server_log.exists() else 0

    def ready(self) -> bool:
        """The broker logged that it started (since this launch) and answers ApiVersions."""
        if self.proc is None:
            return False
        if self.proc.poll() is not None:
            raise PeerError(f"Kafka node {self.node_id} exited with code {self.proc.returncode} during start-up: "
                            f"{self.last_error()}")
        try:
            with open(self.server_log, "rb") as f:
                f.seek(getattr(self, "_log_offset_at_start", 0))
                if READY_LINE.encode() not in f.read():
                    return False
        except FileNotFoundError:
            return False
        return api_versions_ok(HOST, self.port)

    def last_error(self) -> str:
        for path in (self.server_log, self.base_dir / "kafka.stdout.log"):
            with contextlib.suppress(FileNotFoundError):
                lines = [ln for ln in path.read_text(errors="replace").splitlines()
                         if " ERROR " in ln or "Exception" in ln]
                if lines:
                    return lines[-1][:400]
        return f"see {self.server_log}"

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL after ``timeout``."""
        return stop_process(self.proc, timeout)

    def kill(self) -> None:
        kill_process(self.proc)


class KafkaCluster:
    """``n`` combined KRaft nodes on consecutive ports: node i (1-based) listens for clients on
    ``base_port + i - 1`` and for the controller quorum on ``controller_base_port + i - 1``."""

    def __init__(self, base_dir: Path, n: int = 1, base_port: int | None = None,
                 controller_base_port: int | None = None, cluster_id: str | None = None,
                 overrides: Mapping[str, str] | None = None, heap: Sequence[str] = BROKER_HEAP,
                 ports: Sequence[int] | None = None, controller_ports: Sequence[int] | None = None,
                 plain_users: Mapping[str, str] | None = None, features: Mapping[str, int] | None = None) -> None:
        if n < 1:
            raise PeerError(f"a Kafka cluster needs at least one node, not {n}")
        self.base_dir = Path(base_dir)
        self.cluster_id = cluster_id or self._existing_cluster_id() or new_cluster_id()
        client_ports = list(ports) if ports is not None else [(base_port or 29092) + i for i in range(n)]
        ctl_ports = (list(controller_ports) if controller_ports is not None
                     else [(controller_base_port or (client_ports[0] + 1000)) + i for i in range(n)])
        voters = ",".join(f"{i + 1}@{HOST}:{ctl_ports[i]}" for i in range(n))
        self.nodes = [
            KafkaNode(node_id=i + 1, port=client_ports[i], controller_port=ctl_ports[i],
                      base_dir=self.base_dir / f"kafka-{i + 1}", cluster_id=self.cluster_id, voters=voters,
                      replication_factor=min(n, 3), overrides=dict(overrides or {}), heap=tuple(heap),
                      plain_users=dict(plain_users or {}), features=dict(features or {}))
            for i in range(n)
        ]

    def _existing_cluster_id(self) -> str | None:
        meta = read_meta_properties(self.base_dir / "kafka-1" / "data")
        return meta.get("cluster.id")

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes if node.pid is not None and node.running]

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        fetch()
        try:
            for node in self.nodes:
                node.launch()
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(self.nodes)
        while waiting:
            waiting = [node for node in waiting if not node.ready()]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise PeerError(f"Kafka node(s) {[n.node_id for n in waiting]} not ready after {timeout:.0f}s: "
                                f"{waiting[0].last_error()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> None:
        for node in self.nodes:
            if node.running and node.proc is not None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop(timeout)

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_cluster(base_dir: Path, n: int = 1, **kw: object) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(base_dir, n, **kw)  # type: ignore[arg-type]
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


# ---------------------------------------------------------------------------------------------- command


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka-peer", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="fetch Kafka's jars from Maven Central and build the harness (once)")
    sub.add_parser("fetch-spark", help="fetch Spark's JVM Kafka connector from Maven Central (once)")
    st = sub.add_parser("start", help="start Kafka (KRaft, combined nodes) and run until Ctrl-C or SIGTERM")
    st.add_argument("--brokers", type=int, default=1, help="1 (combined broker and controller) or 3 (three voters)")
    st.add_argument("--base-port", type=int, default=29092, help="node i listens on base-port + i - 1")
    st.add_argument("--controller-base-port", type=int, default=None, help="default: base-port + 1000")
    st.add_argument("--data-dir", type=Path, default=Path("kafka-peer-data"))
    st.add_argument("--cluster-id", default=None, help="default: the data dir's, or a new one")
    st.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a server.properties setting")
    st.add_argument("--heap", default="1G", help="-Xmx and -Xms of each broker (default 1G, as Kafka's)")
    st.add_argument("--sasl-plain-user", action="append", default=[], metavar="NAME:PASSWORD",
                    help="a SASL_PLAINTEXT client listener (PLAIN) with this user and Kafka's ACL authorizer "
                         "(StandardAuthorizer); the first user given is a super user (default: PLAINTEXT, no authorizer)")
    tl = sub.add_parser("tool", help="run one of Kafka's tools (kafka-topics, kafka-configs, ...)")
    tl.add_argument("name", help=", ".join(sorted(TOOLS)))
    tl.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("classpath", help="print the classpath of Kafka's jars and the harness")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch(quiet=False))
            return 0
        if args.cmd == "fetch-spark":
            print(",".join(str(j) for j in fetch_spark_kafka()))
            return 0
        if args.cmd == "classpath":
            print(classpath())
            return 0
        if args.cmd == "tool":
            fetch()
            return subprocess.call(tool_command(args.name, *args.args))
        overrides: dict[str, str] = {}
        for item in args.override:
            if "=" not in item:
                raise PeerError(f"--override {item!r} is not KEY=VALUE")
            k, v = item.split("=", 1)
            overrides[k.strip()] = v
        plain_users: dict[str, str] = {}
        for item in args.sasl_plain_user:
            if ":" not in item:
                raise PeerError(f"--sasl-plain-user {item!r} is not NAME:PASSWORD")
            name, password = item.split(":", 1)
            plain_users[name] = password
        cluster = KafkaCluster(args.data_dir.resolve(), args.brokers, base_port=args.base_port,
                               controller_base_port=args.controller_base_port, cluster_id=args.cluster_id,
                               overrides=overrides, heap=(f"-Xmx{args.heap}", f"-Xms{args.heap}"),
                               plain_users=plain_users)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        cluster.start()
        print(f"Kafka {KAFKA_VERSION} cluster {cluster.cluster_id}: {cluster.bootstrap} (data in {args.data_dir})",
              flush=True)
        try:
            while all(node.running for node in cluster.nodes):
                time.sleep(0.5)
            dead = [n for n in cluster.nodes if not n.running]
            raise PeerError(f"Kafka node {dead[0].node_id} exited: {dead[0].last_error()}")
        except KeyboardInterrupt:
            pass
        finally:
            cluster.stop()
        return 0
    except PeerError as e:
        print(f"kafka-peer: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
