"""docs/compatibility.md: what of Kafka 4.4 works against Odradek, API key by API key, Java Admin and client call by
call, tool by tool, measured against Apache Kafka 4.4 itself in the same run.

    python peers/compatibility.py --write docs/compatibility.md    # starts Odradek and Kafka, runs the judges
    python peers/compatibility.py --authz-only --write docs/compatibility.md    # the authorization section alone

The figures come from two judges run against both brokers: Kafka's ``kafka-broker-api-versions`` (each API key's
version range) and the Java harness ``dev.odradek.peer.ClientJudge`` (peers/kafka/src/main/java: every Admin call of
Kafka 4.4 and the producer and consumer paths, one JSON line per check). tests/judges/test_java_client.py runs the
same judges and fails when a row of the file no longer says what the brokers do, so the file cannot drift.

The authorization section comes from the harness's authorization mode (``ClientJudge --authz``: each call made by a
SASL/PLAIN principal without any ACL, then with exactly the ACLs it needs) against an Odradek broker and a Kafka node
with a SASL_PLAINTEXT listener and an ACL authorizer; tests/judges/test_authz.py asserts Odradek's outcomes equal
Kafka's (recorded in the test) and that the section says what Odradek did.
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
    ("kafka-get-offsets (tiered storage)", "tests/judges/test_tiered_offsets.py",
     "on Odradek only: a topic whose history is in the remote tier only: earliest, earliest-local, latest-tiered, "
     "earliest-pending-upload, by time of remote records; a topic not tiered"),
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


# the authorization judge (ClientJudge --authz): SASL/PLAIN users, the first a super user who sets things up, the
# second holding no ACL, then exactly the ACLs each call needs
AUTHZ_USERS = {"admin": "admin-secret", "bob": "bob-secret"}
AUTHZ = "## Authorization (Java client 4.4, principal without / with the ACL)"
# both brokers of the authorization judge: one offsets partition (Kafka creates 50 at the first group call, which
# outlasted the judge's 20 s on a loaded two-core machine)
AUTHZ_BROKER = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}

# where Odradek's outcome differs from Kafka 4.4's in the authorization table, and why (a known gap)
AUTHZ_GAPS: dict[str, str] = {}
# what the authorization judge found that is not about authorization, and is not fixed (a known gap each)
AUTHZ_NOTES: list[str] = []


# the checks whose outcome on Kafka depends on settings the peer does not make (delegation tokens need a secret
# key) or on objects that do not exist (broker 12345, a voter that is no controller)
KAFKA_NEEDS_MORE = {"admin.createDelegationToken", "admin.describeDelegationToken", "admin.unregisterBroker",
                    "admin.addRaftVoter", "admin.describeStreamsGroups", "admin.describeShareGroups"}


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


# KIP-848 consumers refused both the group and the topic: which refusal the client raises first is a race between
# its heartbeat and its metadata request (either broker gave either on a loaded machine), so either is the outcome
AUTHZ_EITHER_REFUSAL = frozenset({"consumer.subscribe.consumer", "consumer.subscribe.consumer.topicOnly",
                                  "consumer.subscribe.consumer.groupOnly"})
_EITHER = "GroupAuthorizationException or TopicAuthorizationException"


def authz_outcome(name: str, outcome: str) -> str:
    """An outcome as compared and rendered: either refusal of a racy call (AUTHZ_EITHER_REFUSAL) is the same one."""
    if name in AUTHZ_EITHER_REFUSAL and outcome in ("GroupAuthorizationException", "TopicAuthorizationException"):
        return _EITHER
    return outcome


@dataclass(frozen=True)
class Authz:
    """One call of the authorization judge: its outcome without any ACL and with ``acls``."""

    without: str
    with_acl: str
    acls: tuple[str, ...]


def run_authz_judge(bootstrap: str, prefix: str, timeout: float = 1200.0) -> dict[str, Authz]:
    """The Java harness's authorization mode against one broker (a SASL_PLAINTEXT/PLAIN listener with
    ``AUTHZ_USERS`` and an ACL authorizer whose super user is the first of them): {call: Authz}, in order."""
    (admin, admin_pw), (user, user_pw) = list(AUTHZ_USERS.items())[:2]
    cmd = kafka_peer.java_command("dev.odradek.peer.ClientJudge",
                                  ["--authz", bootstrap, prefix, f"{admin}:{admin_pw}", f"{user}:{user_pw}"])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"ClientJudge --authz exited {proc.returncode}: {proc.stderr[-2000:]}")
    passes: dict[str, dict[str, str]] = {}
    acls: dict[str, tuple[str, ...]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            if doc["pass"] not in ("without", "with"):
                raise RuntimeError(f"ClientJudge --authz: {doc['check']} {doc['outcome']}: {doc.get('message')}")
            passes.setdefault(doc["check"], {})[doc["pass"]] = doc["outcome"]
            if doc["pass"] == "with":
                acls[doc["check"]] = tuple(doc.get("acls") or ())
    return {name: Authz(authz_outcome(name, p.get("without", "-")), authz_outcome(name, p.get("with", "-")),
                        acls.get(name, ())) for name, p in passes.items()}


def odradek_authz_overrides(port: int) -> dict[str, str]:
    """An Odradek broker as the authorization judge wants it, as tests/integration's security tests configure one:
    a SASL_PLAINTEXT listener with PLAIN users, the ACL authorizer, the first user a super user."""
    admin = next(iter(AUTHZ_USERS))
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            + " ".join(f'user_{u}="{pw}"' for u, pw in AUTHZ_USERS.items()) + ";")
    return {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": kafka_peer.AUTHORIZER_CLASS,
        "super.users": f"User:{admin}",
        **AUTHZ_BROKER,
    }


def render_authz(odradek: Mapping[str, Authz], kafka: Mapping[str, Authz]) -> list[str]:
    """The authorization section: each call's outcome on both brokers, without and with the ACLs it needs."""
    lines = [
        AUTHZ,
        "",
        "`ClientJudge --authz` connects over SASL_PLAINTEXT/PLAIN as `bob`, a principal with no ACL, and runs each",
        "call; then an admin (a super user) grants `bob` exactly the ACLs in the second column (literal patterns",
        "on the call's own topic, group, transactional id or the cluster) and the call runs again. A cell is",
        "`works` (with what the call saw, for calls that filter what is not authorized) or the exception class the",
        "Java client raised. `tests/judges/test_authz.py` runs it against Odradek and asserts every outcome equals",
        "Kafka 4.4's; a row whose outcomes differ is a known gap, explained in the last column.",
        "",
        "| call | ACLs granted | Odradek without | Kafka 4.4 without | Odradek with | Kafka 4.4 with | gap |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in odradek:
        o, k = odradek[name], kafka.get(name)
        kw, kv = (k.without, k.with_acl) if k else ("-", "-")
        lines.append(f"| `{name}` | {', '.join(o.acls)} | {o.without} | {kw} | {o.with_acl} | {kv} | "
                     f"{AUTHZ_GAPS.get(name, '')} |")
    if AUTHZ_NOTES:
        lines += ["", "Found by the same judge, not about authorization, and not fixed yet:", ""]
        lines += [f"- {note}" for note in AUTHZ_NOTES]
    return lines


def replace_section(text: str, heading: str, new_lines: Sequence[str], before: str) -> str:
    """``text`` with the section under ``heading`` replaced by ``new_lines`` (inserted before the section
    ``before`` when it is not there yet)."""
    lines = text.splitlines()
    if heading in lines:
        start = lines.index(heading)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    else:
        start = end = lines.index(before)
    return "\n".join([*lines[:start], *new_lines, "", *lines[end:]]) + ("\n" if text.endswith("\n") else "")


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
           odradek_checks: Mapping[str, Result], kafka_checks: Mapping[str, Result],
           odradek_authz: Mapping[str, Authz] | None = None, kafka_authz: Mapping[str, Authz] | None = None) -> str:
    lines = [
        "# Compatibility with Apache Kafka 4.4",
        "",
        "Generated by `python peers/compatibility.py --write docs/compatibility.md` from one run of the judges",
        "against Odradek and against Apache Kafka 4.4.0 (one combined KRaft node), both with an ACL authorizer and",
        "the client as a super user (Kafka's column only from a run in which every check worked on Kafka).",
        "`tests/judges/test_java_client.py` runs the same judges against Odradek and fails when a row here no longer",
        "says what Odradek does.",
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
    lines.append("")
    if odradek_authz is not None:
        lines += [*render_authz(odradek_authz, kafka_authz or {}), ""]
    lines += [
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
        "streams against Odradek (`tests/judges/test_spark_kafka_connector.py`). On 2026-12-07",
        "confluent-kafka-python's own `test_consumer_upgrade_downgrade` (KIP-848 online migration, three",
        "assignors) passes against Odradek. Kafka Connect 4.4 in distributed mode (two workers, exactly-once",
        "source support) with Debezium's PostgreSQL connector 3.6.1.Final creates its compacted internal topics on",
        "Odradek, rebalances its connectors and tasks between workers and writes every committed change of a",
        "PostgreSQL workload exactly once, also across kill -9 of a worker, of the broker and of a leader of three",
        "brokers (`tests/cdc/test_debezium_postgres.py`).",
        "",
        "## A bound Kafka does not set",
        "",
        "A Fetch may name at most the cluster's partitions plus 10,000 partition entries (fetched and",
        "forgotten ones, duplicates included), and as many topic entries; a larger one is refused before it is",
        "decoded, with a warning in the broker's log and a closed connection. Kafka serves any Fetch that fits",
        "in `socket.request.max.bytes`, on one of its request handler threads; Odradek serves every request on",
        "one event loop, where a Fetch of a million entries held every other client for 20-24 s. A client",
        "fetching every partition of the cluster in one request stays within the bound.",
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


def _start_odradek(base: Path, authz: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    from odradek.devcluster.zookeeper import free_port
    from odradek.embedded.probe import wait_serving

    port, http = free_port(), free_port()
    name = "odradek-authz" if authz else "odradek"
    args = [sys.executable, "-m", "odradek", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={base / name}", "--override", f"http.listeners=http://127.0.0.1:{http}"]
    for k, v in (odradek_authz_overrides(port) if authz else AUTHORIZER).items():
        args += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(base / f"{name}.log", "wb"))  # noqa: SIM115 - the child's
    if not wait_serving("127.0.0.1", port, 60):
        proc.kill()
        raise RuntimeError(f"Odradek did not start: see {base / f'{name}.log'}")
    return proc, f"127.0.0.1:{port}"


def kafka_authz_cluster(base: Path) -> kafka_peer.KafkaCluster:
    """Kafka 4.4 as the authorization judge wants it: one combined KRaft node, a SASL_PLAINTEXT/PLAIN client
    listener with ``AUTHZ_USERS``, StandardAuthorizer, the first user (and the controller listener) super users."""
    from odradek.devcluster.zookeeper import free_port

    return kafka_peer.KafkaCluster(base, 1, ports=[free_port()], controller_ports=[free_port()],
                                   overrides=AUTHZ_BROKER,
                                   heap=("-Xmx512M", "-Xms512M"), plain_users=AUTHZ_USERS)


def authz_both(base: Path) -> tuple[dict[str, Authz], dict[str, Authz]]:
    """The authorization judge against an Odradek broker and against Kafka 4.4, one after the other."""
    proc, bootstrap = _start_odradek(base, authz=True)
    try:
        o_authz = run_authz_judge(bootstrap, "authz")
    finally:
        proc.terminate()
        proc.wait(30)
    with kafka_authz_cluster(base / "kafka-authz") as cluster:
        k_authz = run_authz_judge(cluster.bootstrap, "authz")
    return o_authz, k_authz


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, default=None, help="write the document here (default: print it)")
    ap.add_argument("--authz-only", action="store_true",
                    help="regenerate only the authorization section of the --write document (both brokers, the "
                         "authorization judge alone: a few minutes instead of the whole run)")
    args = ap.parse_args(argv)
    from odradek.devcluster.zookeeper import free_port

    kafka_peer.fetch()
    with tempfile.TemporaryDirectory(prefix="odradek-compat-") as tmp:
        base = Path(tmp)
        o_authz, k_authz = authz_both(base)
        if args.authz_only:
            target = args.write or DOC
            new = replace_section(target.read_text(), AUTHZ, render_authz(o_authz, k_authz),
                                  before="## API keys (ApiVersions, as `kafka-broker-api-versions` prints them)")
            if args.write:
                args.write.write_text(new)
            else:
                print(new)
            return 0
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
            # the document records Kafka's column for CI (tests/judges/test_java_client.py reads it): only a run in
            # which every check worked on Kafka is recorded; one more try with new names for a loaded machine
            for attempt in ("compat", "compat2"):
                k_checks = run_client_judge(cluster.bootstrap, attempt)
                failing = {n: r.error for n, r in k_checks.items() if not r.ok and n not in KAFKA_NEEDS_MORE}
                if not failing:
                    break
            else:
                raise RuntimeError(f"the harness failed on Kafka 4.4, nothing written: {failing}")
    text = render(o_apis, k_apis, o_checks, k_checks, o_authz, k_authz)
    if args.write:
        args.write.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
