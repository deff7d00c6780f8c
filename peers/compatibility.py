"""docs/compatibility.md: what of Kafka 4.4 works against Odradek, API key by API key, Java Admin and client call by
call, tool by tool, measured against Apache Kafka 4.4 itself in the same run.

    python peers/compatibility.py --write docs/compatibility.md    # starts Odradek and Kafka, runs the judges

The figures come from two judges run against both brokers: Kafka's ``kafka-broker-api-versions`` (each API key's
version range) and the Java harness ``dev.odradek.peer.ClientJudge`` (peers/kafka/src/main/java: every Admin call of
Kafka 4.4 and the producer and consumer paths, one JSON line per check). tests/judges/test_java_client.py runs the
same judges and fails when a row of the file no longer says what the brokers do, so the file cannot drift.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import kafka_peer

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "compatibility.md"

# the Odradek broker of the judges: an ACL authorizer with the (PLAINTEXT, so ANONYMOUS) client as a super user,
# so that the ACL calls are judged too; the same settings for Kafka
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "group.initial.rebalance.delay.ms": "0",
}

# why a check fails on Odradek, where it does (the issue that will change it)
GAPS: dict[str, str] = {
    "admin.createDelegationToken": "delegation tokens (KIP-48) are not implemented",
    "admin.describeDelegationToken": "delegation tokens (KIP-48) are not implemented",
    "admin.describeMetadataQuorum": "needs KRaft (issue 36): Odradek's controller runs over ZooKeeper or a local store",
    "admin.unregisterBroker": "KRaft only (issue 36)",
    "admin.addRaftVoter": "KRaft only (issue 36)",
    "admin.describeShareGroups": "share groups (KIP-932) are issue 37",
    "admin.describeStreamsGroups": "the streams rebalance protocol (KIP-1071) is not implemented; Streams runs on "
                                   "classic groups",
}

# the tools of Kafka 4.4 judged against Odradek, and the test that judges each
TOOLS: list[tuple[str, str, str]] = [
    ("kafka-topics", "tests/judges/test_admin_tools.py", "create, list, describe, alter, delete, Kafka's refusals"),
    ("kafka-configs", "tests/judges/test_admin_tools.py", "topics, brokers (dynamic defaults), client quotas, SCRAM users"),
    ("kafka-get-offsets", "tests/judges/test_admin_tools.py", "latest, earliest, max-timestamp, earliest-local, by time"),
    ("kafka-delete-records", "tests/judges/test_admin_tools.py", "delete, then earliest; out of range refused"),
    ("kafka-log-dirs", "tests/judges/test_admin_tools.py", "describe"),
    ("kafka-features", "tests/judges/test_admin_tools.py", "describe, upgrade --dry-run, a refused level"),
    ("kafka-broker-api-versions", "tests/judges/test_admin_tools.py", "every API key (table below)"),
    ("kafka-console-producer / -consumer", "tests/judges/test_admin_tools.py", "keys, offsets, --max-messages"),
    ("kafka-consumer-groups", "tests/judges/test_group_txn_acl_tools.py",
     "classic and KIP-848 groups: list, describe (offsets, state, members), reset-offsets, delete-offsets, delete"),
    ("kafka-groups", "tests/judges/test_group_txn_acl_tools.py", "list with types and protocols"),
    ("kafka-transactions", "tests/judges/test_group_txn_acl_tools.py",
     "list, describe, describe-producers, find-hanging, abort"),
    ("kafka-acls", "tests/judges/test_group_txn_acl_tools.py", "add, list, remove; literal and prefixed patterns"),
    ("kafka-dump-log", "tests/judges/test_dump_log.py",
     "Odradek's segments (plain, compressed, transactional), .index/.timeindex (sanity check, verification), "
     ".txnindex, .snapshot, __consumer_offsets and __transaction_state decoders. The indexes of an active segment "
     "are written at flush, roll or close: run it on a live broker's active segment and the tool finds no "
     "index file"),
    ("kafka-verifiable-producer / -consumer", "tests/judges/test_cluster_tools.py",
     "three brokers, a leader killed -9 mid-run: none acknowledged lost, none duplicated"),
    ("kafka-reassign-partitions", "tests/judges/test_cluster_tools.py", "generate, execute, verify"),
    ("kafka-leader-election", "tests/judges/test_cluster_tools.py", "preferred, unclean"),
    ("kafka-metadata-quorum", "tests/judges/test_kafka_peer.py", "on Kafka only: Odradek has no KRaft quorum yet"),
    ("kafka-client-metrics", "tests/judges/test_admin_tools.py",
     "alter, list, describe, delete, Kafka's refusals (the subscriptions; the broker takes no pushed metrics)"),
]


@dataclass(frozen=True)
class Result:
    ok: bool
    error: str | None

    def cell(self) -> str:
        if self.ok:
            return "works"
        err = (self.error or "").split(":", 1)[0]
        return f"`{err}`"


def run_client_judge(bootstrap: str, prefix: str, timeout: float = 600.0) -> dict[str, Result]:
    """The Java harness against one broker: {check: Result}, in the harness's order."""
    cmd = kafka_peer.java_command("dev.odradek.peer.ClientJudge", [bootstrap, prefix])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"ClientJudge exited {proc.returncode}: {proc.stderr[-2000:]}")
    out: dict[str, Result] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            out[doc["check"]] = Result(bool(doc["ok"]), doc.get("error"))
    return out


_API_LINE = re.compile(r"^\s*(\w+)\((\d+)\): (.+?)(?: \[usable: \d+\])?,?$")


def api_versions(bootstrap: str) -> dict[int, tuple[str, str]]:
    """{api key: (name, "lo to hi" | "UNSUPPORTED")} from Kafka's kafka-broker-api-versions."""
    proc = kafka_peer.run_tool("kafka-broker-api-versions", "--bootstrap-server", bootstrap, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"kafka-broker-api-versions exited {proc.returncode}: {proc.stderr[-2000:]}")
    out: dict[int, tuple[str, str]] = {}
    for line in proc.stdout.splitlines():
        m = _API_LINE.match(line)
        if m:
            out[int(m.group(2))] = (m.group(1), m.group(3).rstrip(","))
    return out


def render(odradek_apis: Mapping[int, tuple[str, str]], kafka_apis: Mapping[int, tuple[str, str]],
           odradek_checks: Mapping[str, Result], kafka_checks: Mapping[str, Result]) -> str:
    lines = [
        "# Compatibility with Apache Kafka 4.4",
        "",
        "Generated by `python peers/compatibility.py --write docs/compatibility.md` from one run of the judges",
        "against Odradek and against Apache Kafka 4.4.0 (one combined KRaft node), both with an ACL authorizer and",
        "the client as a super user. `tests/judges/test_java_client.py` runs the same judges and fails when a row",
        "here no longer says what the brokers do.",
        "",
        "## Kafka 4.4's tools",
        "",
        "| tool | judged by | what is checked |",
        "| --- | --- | --- |",
    ]
    for tool, test, what in TOOLS:
        lines.append(f"| {tool} | {test if test == '-' else f'`{test}`'} | {what} |")
    lines += [
        "",
        "## The Java client (kafka-clients 4.4.0): every Admin call, the producer and the consumer",
        "",
        "Each row is one check of `dev.odradek.peer.ClientJudge`, run in this order against each broker; a cell",
        "that is not `works` is the exception the Java client raised.",
        "",
        "| check | Odradek | Kafka 4.4 | why not, on Odradek |",
        "| --- | --- | --- | --- |",
    ]
    for name in odradek_checks:
        o = odradek_checks[name]
        k = kafka_checks.get(name)
        why = GAPS.get(name, "") if not o.ok else ""
        lines.append(f"| `{name}` | {o.cell()} | {k.cell() if k else '-'} | {why} |")
    lines += [
        "",
        "## API keys (ApiVersions, as `kafka-broker-api-versions` prints them)",
        "",
        "| API | key | Odradek | Kafka 4.4 |",
        "| --- | --- | --- | --- |",
    ]
    for key in sorted(set(odradek_apis) | set(kafka_apis)):
        api = (odradek_apis.get(key) or kafka_apis[key])[0]
        lines.append(f"| {api} | {key} | {odradek_apis.get(key, (api, '-'))[1]} | {kafka_apis.get(key, (api, '-'))[1]} |")
    lines += [
        "",
        "## Other clients",
        "",
        "librdkafka (confluent-kafka), kafka-python, aiokafka and kcat are judged by the integration suite",
        "(`tests/integration`), and their projects' own integration suites run against an Odradek broker: on",
        "2026-12-05 kafka-python 51/56, confluent-kafka-python 30/33, aiokafka 208/208. Spark's own JVM Kafka",
        "connector (spark-sql-kafka-0-10 4.2.0, the newest Maven Central serves, in pyspark 4.3) reads, writes and",
        "streams against Odradek (`tests/judges/test_spark_kafka_connector.py`).",
        "",
    ]
    return "\n".join(lines)


def section(text: str, heading: str) -> list[str]:
    """The table rows under ``heading`` in a rendered document."""
    rows: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line == heading
            continue
        if inside and line.startswith("| ") and not line.startswith("| ---"):
            rows.append(line)
    return rows[1:]  # without the header row


def _start_odradek(base: Path) -> tuple[subprocess.Popen[bytes], str]:
    from odradek.devcluster.zookeeper import free_port
    from odradek.embedded.probe import wait_serving

    port, http = free_port(), free_port()
    args = [sys.executable, "-m", "odradek", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={base / 'odradek'}", "--override", f"http.listeners=http://127.0.0.1:{http}"]
    for k, v in AUTHORIZER.items():
        args += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(base / "odradek.log", "wb"))  # noqa: SIM115 - the child's
    if not wait_serving("127.0.0.1", port, 60):
        proc.kill()
        raise RuntimeError(f"Odradek did not start: see {base / 'odradek.log'}")
    return proc, f"127.0.0.1:{port}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, default=None, help="write the document here (default: print it)")
    args = ap.parse_args(argv)
    from odradek.devcluster.zookeeper import free_port

    kafka_peer.fetch()
    with tempfile.TemporaryDirectory(prefix="odradek-compat-") as tmp:
        base = Path(tmp)
        proc, bootstrap = _start_odradek(base)
        try:
            o_apis = api_versions(bootstrap)
            o_checks = run_client_judge(bootstrap, "compat")
        finally:
            proc.terminate()
            proc.wait(30)
        cluster = kafka_peer.KafkaCluster(base / "kafka", 1, ports=[free_port()], controller_ports=[free_port()],
                                          overrides=AUTHORIZER, heap=("-Xmx512M", "-Xms512M"))
        with cluster:
            k_apis = api_versions(cluster.bootstrap)
            k_checks = run_client_judge(cluster.bootstrap, "compat")
    text = render(o_apis, k_apis, o_checks, k_checks)
    if args.write:
        args.write.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
