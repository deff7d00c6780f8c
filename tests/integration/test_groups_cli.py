"""``odradek groups`` (kafka-consumer-groups.sh) against a real broker: --list, --describe (lag = log end
offset - committed offset, exactly), --reset-offsets dry run vs --execute for every scenario, --delete."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from waiting import wait_until

from odradek.cli import groups_cmd

from .broker import Broker
from .clients import create_topic, make_messages, produce_confluent, unique
from .groups import TP, ConfluentMember, RawGroupClient, close_all

SHARED_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.replication.factor": 1}

# the inactive group's topic: messages per partition, the log start of partition 0 after DeleteRecords,
# and the offsets the group commits
COUNTS = {0: 10, 1: 20, 2: 5}
LOG_START = {0: 3, 1: 0, 2: 0}
COMMITTED = {0: 4, 1: 12, 2: 5}
# message i of every partition has timestamp BASE_TS + i seconds
BASE_TS = (int(time.time()) - 3600) * 1000


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "groups", *args], capture_output=True, text=True,
                          timeout=timeout)


def ok(*args: str) -> str:
    r = cli(*args)
    assert r.returncode == 0, f"odradek groups {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def table(out: str, header_first: str = "GROUP") -> list[dict[str, str]]:
    """Rows of a whitespace-aligned table (cells contain no spaces), keyed by the header words."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    heads = [i for i, ln in enumerate(lines) if ln.split()[0] == header_first]
    assert heads, f"no table in:\n{out}"
    rows = []
    for start, end in zip(heads, [*heads[1:], len(lines)], strict=True):
        header = _header_words(lines[start])
        for ln in lines[start + 1 : end]:
            cells: list[str] = []
            for cell in ln.split():
                if cells and cell.startswith("(") and cell.endswith(")"):  # "host:port (id)"
                    cells[-1] += cell
                else:
                    cells.append(cell)
            assert len(cells) == len(header), f"row {ln!r} does not match header {header}"
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def _header_words(line: str) -> list[str]:
    # "COORDINATOR (ID)" is one column
    return line.replace("COORDINATOR (ID)", "COORDINATOR(ID)").split()


@dataclass
class Setup:
    bootstrap: str
    topic: str


@pytest.fixture(scope="module")
def setup(shared_broker: Broker) -> Setup:
    bs = shared_broker.bootstrap
    topic = unique("cli")
    create_topic(bs, topic, 3)
    for p, n in COUNTS.items():
        produce_confluent(bs, topic, make_messages(n, f"cli-{p}", base_ts=BASE_TS, ts_step=1000), partition=p)
    admin = AdminClient({"bootstrap.servers": bs})
    fut = admin.delete_records([TopicPartition(topic, 0, LOG_START[0])], request_timeout=15)
    for f in fut.values():
        f.result(20)
    return Setup(bs, topic)


@pytest.fixture
def b(setup: Setup, shared_broker: Broker) -> Iterator[Setup]:
    shared_broker.assert_alive()
    yield setup
    shared_broker.assert_alive()


def commit_offsets(bootstrap: str, group: str, offsets: dict[TP, int]) -> None:
    """Commit as a simple (never joined) consumer, as an application using assign() does."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    with RawGroupClient(bootstrap) as rc:
        got = rc.fetch_offsets(group, [(topic, p) for p in COUNTS])
    return {p: o for (_, p), o in got.items()}


def inactive_group(s: Setup) -> str:
    group = unique("cli-g")
    commit_offsets(s.bootstrap, group, {(s.topic, p): o for p, o in COMMITTED.items()})
    return group


@pytest.fixture
def active(b: Setup) -> Iterator[tuple[str, str, ConfluentMember]]:
    """A group with one live member on its own 2-partition topic (7 and 3 messages) that committed
    offset 2 of partition 0 only."""
    topic, group = unique("cli-active"), unique("cli-live")
    create_topic(b.bootstrap, topic, 2)
    produce_confluent(b.bootstrap, topic, make_messages(7, "a0"), partition=0)
    produce_confluent(b.bootstrap, topic, make_messages(3, "a1"), partition=1)
    m = ConfluentMember(b.bootstrap, group, [topic], "cli-member",
                        {"enable.auto.commit": False, "partition.assignment.strategy": "range"})
    try:
        wait_until(lambda: len(m.assignment) == 2, 30, "the member owns both partitions", detail=lambda: m)
        wait_until(lambda: len(m.messages) >= 10, 20, "the member has read everything")
        m.commit({(topic, 0): 2})
        yield group, topic, m
    finally:
        close_all([m])


# ============================================================================ --list


def test_list(b: Setup, active: tuple[str, str, ConfluentMember]) -> None:
    live, _, _ = active
    idle = inactive_group(b)
    names = ok("--bootstrap-server", b.bootstrap, "--list").splitlines()
    assert idle in names and live in names
    assert all(" " not in n for n in names), names
    states = {r["GROUP"]: r["STATE"] for r in table(ok("--bootstrap-server", b.bootstrap, "--list", "--state"))}
    assert states[idle] == "Empty" and states[live] == "Stable"
    stable = {r["GROUP"] for r in table(ok("--bootstrap-server", b.bootstrap, "--list", "--state", "Stable"))}
    assert live in stable and idle not in stable
    empty = {r["GROUP"] for r in table(ok("--bootstrap-server", b.bootstrap, "--list", "--state", "empty"))}
    assert idle in empty and live not in empty
    r = cli("--bootstrap-server", b.bootstrap, "--list", "--state", "Sleepy")
    assert r.returncode == 1 and "unknown group state" in r.stderr


# ============================================================================ --describe


def test_describe_inactive_group_lag(b: Setup) -> None:
    group = inactive_group(b)
    r = cli("--bootstrap-server", b.bootstrap, "--describe", "--group", group)
    assert r.returncode == 0, r.stderr
    assert "has no active members" in r.stderr
    rows = table(r.stdout)
    assert [(x["TOPIC"], int(x["PARTITION"])) for x in rows] == [(b.topic, p) for p in sorted(COUNTS)]
    assert r.stdout.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                                "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    for x in rows:
        p = int(x["PARTITION"])
        assert x["GROUP"] == group
        assert int(x["CURRENT-OFFSET"]) == COMMITTED[p]
        assert int(x["LOG-END-OFFSET"]) == COUNTS[p]
        assert int(x["LAG"]) == COUNTS[p] - COMMITTED[p]
        assert (x["CONSUMER-ID"], x["HOST"], x["CLIENT-ID"]) == ("-", "-", "-")
    # lag follows new messages and new commits exactly (on a topic of its own)
    t2 = unique("cli-lag")
    create_topic(b.bootstrap, t2, 1)
    produce_confluent(b.bootstrap, t2, make_messages(6, "lag"), partition=0)
    commit_offsets(b.bootstrap, group, {(t2, 0): 2})

    def lag_of(topic: str) -> dict[int, str]:
        rows = table(ok("--bootstrap-server", b.bootstrap, "--describe", "--group", group))
        return {int(x["PARTITION"]): x["LAG"] for x in rows if x["TOPIC"] == topic}

    assert lag_of(t2) == {0: "4"}
    produce_confluent(b.bootstrap, t2, make_messages(3, "lag2"), partition=0)
    assert lag_of(t2) == {0: "7"}
    commit_offsets(b.bootstrap, group, {(t2, 0): 9})
    assert lag_of(t2) == {0: "0"}
    assert lag_of(b.topic) == {p: str(COUNTS[p] - COMMITTED[p]) for p in COUNTS}
    st = table(ok("--bootstrap-server", b.bootstrap, "--describe", "--group", group, "--state"))
    assert [(x["GROUP"], x["STATE"], x["#MEMBERS"]) for x in st] == [(group, "Empty", "0")]
    assert b.bootstrap.split(":")[1] in st[0]["COORDINATOR(ID)"]


def test_describe_active_group(b: Setup, active: tuple[str, str, ConfluentMember]) -> None:
    group, topic, m = active
    assert m.member_id
    rows = table(ok("--bootstrap-server", b.bootstrap, "--describe", "--group", group))
    by_p = {int(x["PARTITION"]): x for x in rows}
    assert sorted(by_p) == [0, 1] and all(x["TOPIC"] == topic for x in rows)
    assert (by_p[0]["CURRENT-OFFSET"], by_p[0]["LOG-END-OFFSET"], by_p[0]["LAG"]) == ("2", "7", "5")
    assert (by_p[1]["CURRENT-OFFSET"], by_p[1]["LOG-END-OFFSET"], by_p[1]["LAG"]) == ("-", "3", "-")
    for x in rows:
        assert (x["CONSUMER-ID"], x["CLIENT-ID"]) == (m.member_id, "cli-member")
        assert "127.0.0.1" in x["HOST"]

    members = table(ok("--bootstrap-server", b.bootstrap, "--describe", "--group", group, "--members"))
    assert [(x["CONSUMER-ID"], x["CLIENT-ID"], x["#PARTITIONS"]) for x in members] == [(m.member_id, "cli-member", "2")]
    verbose = table(ok("--bootstrap-server", b.bootstrap, "--describe", "--group", group, "--members", "--verbose"))
    assert verbose[0]["ASSIGNMENT"] == f"{topic}(0,1)" and verbose[0]["GROUP-INSTANCE-ID"] == "-"
    st = table(ok("--bootstrap-server", b.bootstrap, "--describe", "--group", group, "--state"))
    assert [(x["STATE"], x["ASSIGNMENT-STRATEGY"], x["#MEMBERS"]) for x in st] == [("Stable", "range", "1")]

    # an active group's offsets cannot be reset, nor the group deleted
    r = cli("--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
            "--to-earliest", "--execute")
    assert r.returncode == 1 and "inactive" in r.stderr and "Stable" in r.stderr, r
    assert committed(b.bootstrap, group, topic)[0] == 2
    r = cli("--bootstrap-server", b.bootstrap, "--delete", "--group", group)
    assert r.returncode == 1 and "NON_EMPTY_GROUP" in r.stderr, r


def test_describe_unknown_group(b: Setup) -> None:
    r = cli("--bootstrap-server", b.bootstrap, "--describe", "--group", f"nobody-{uuid.uuid4().hex[:6]}")
    assert r.returncode == 1 and "does not exist" in r.stderr, r


# ============================================================================ --reset-offsets


def _iso(ts_ms: int, tz: timezone = UTC) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, tz).isoformat(timespec="milliseconds")


def _reset_cases() -> list[tuple[str, list[str], dict[int, int]]]:
    ends = dict(COUNTS)
    return [
        ("to-earliest", ["--to-earliest"], dict(LOG_START)),
        ("to-latest", ["--to-latest"], ends),
        ("to-current", ["--to-current"], dict(COMMITTED)),
        ("to-offset", ["--to-offset", "8"], {0: 8, 1: 8, 2: 5}),  # 8 > end of p2: clamped
        ("to-offset-low", ["--to-offset", "1"], {0: 3, 1: 1, 2: 1}),  # 1 < log start of p0: clamped
        ("shift-back", ["--shift-by", "-5"], {0: 3, 1: 7, 2: 0}),
        ("shift-forward", ["--shift-by", "7"], {0: 10, 1: 19, 2: 5}),
        # the first offset with timestamp >= the time; none (p2) -> the log end offset
        ("to-datetime", ["--to-datetime", _iso(BASE_TS + 4500)], {0: 5, 1: 5, 2: 5}),
        ("to-datetime-exact", ["--to-datetime", _iso(BASE_TS + 4000).replace("+00:00", "Z")], {0: 4, 1: 4, 2: 4}),
        ("to-datetime-offset",
         ["--to-datetime", _iso(BASE_TS + 1000, timezone(timedelta(hours=2)))], {0: 3, 1: 1, 2: 1}),
        ("to-datetime-local", ["--to-datetime", datetime.fromtimestamp((BASE_TS + 7000) / 1000).isoformat()],
         {0: 7, 1: 7, 2: 5}),
        ("by-duration-long", ["--by-duration", "P3650D"], dict(LOG_START)),
        ("by-duration-zero", ["--by-duration", "PT0S"], ends),
    ]


@pytest.mark.parametrize("args,expected", [c[1:] for c in _reset_cases()], ids=[c[0] for c in _reset_cases()])
def test_reset_offsets_dry_run_then_execute(b: Setup, args: list[str], expected: dict[int, int]) -> None:
    group = inactive_group(b)
    base = ["--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", group, "--topic", b.topic, *args]
    for dry in ([], ["--dry-run"]):
        plan = table(ok(*base, *dry))
        assert {int(x["PARTITION"]): int(x["NEW-OFFSET"]) for x in plan} == expected
        assert all(x["GROUP"] == group and x["TOPIC"] == b.topic for x in plan)
        assert committed(b.bootstrap, group, b.topic) == COMMITTED, "a dry run changed the offsets"
    done = table(ok(*base, "--execute"))
    assert {int(x["PARTITION"]): int(x["NEW-OFFSET"]) for x in done} == expected
    assert committed(b.bootstrap, group, b.topic) == expected
    # --describe agrees
    lag = {int(x["PARTITION"]): int(x["LAG"])
           for x in table(ok("--bootstrap-server", b.bootstrap, "--describe", "--group", group))}
    assert lag == {p: COUNTS[p] - o for p, o in expected.items()}


def test_reset_offsets_partition_subsets_and_all_topics(b: Setup) -> None:
    group = inactive_group(b)
    plan = table(ok("--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", group,
                    "--topic", f"{b.topic}:0,2", "--to-offset", "4", "--execute"))
    assert [(int(x["PARTITION"]), int(x["NEW-OFFSET"])) for x in plan] == [(0, 4), (2, 4)]
    assert committed(b.bootstrap, group, b.topic) == {0: 4, 1: COMMITTED[1], 2: 4}
    plan = table(ok("--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", group,
                    "--all-topics", "--to-earliest", "--execute"))
    assert [(int(x["PARTITION"]), int(x["NEW-OFFSET"])) for x in plan] == [(p, LOG_START[p]) for p in sorted(COUNTS)]
    assert committed(b.bootstrap, group, b.topic) == LOG_START
    # a group with nothing committed yet may be given offsets (Kafka's "Dead" group)
    fresh = unique("cli-new")
    ok("--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", fresh, "--topic", f"{b.topic}:1",
       "--to-latest", "--execute")
    assert committed(b.bootstrap, fresh, b.topic)[1] == COUNTS[1]
    # shifting a partition without a committed offset is refused
    r = cli("--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", fresh, "--topic", f"{b.topic}:0",
            "--shift-by", "1")
    assert r.returncode == 1 and "no committed offset" in r.stderr
    r = cli("--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", group, "--topic", "no-such-topic-x",
            "--to-earliest")
    assert r.returncode == 1 and "does not exist" in r.stderr


# ============================================================================ --delete


def test_delete(b: Setup) -> None:
    group = inactive_group(b)
    out = ok("--bootstrap-server", b.bootstrap, "--delete", "--group", group)
    assert f"'{group}'" in out and "successful" in out
    assert group not in ok("--bootstrap-server", b.bootstrap, "--list").splitlines()
    assert committed(b.bootstrap, group, b.topic) == {p: -1 for p in COUNTS}
    r = cli("--bootstrap-server", b.bootstrap, "--describe", "--group", group)
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = cli("--bootstrap-server", b.bootstrap, "--delete", "--group", group)
    assert r.returncode == 1 and "GROUP_ID_NOT_FOUND" in r.stderr, r


def test_delete_offsets(b: Setup) -> None:
    group = inactive_group(b)
    out = ok("--bootstrap-server", b.bootstrap, "--delete-offsets", "--group", group, "--topic", f"{b.topic}:1")
    assert [(x["PARTITION"], x["STATUS"]) for x in table(out, "TOPIC")] == [("1", "Successful")]
    assert committed(b.bootstrap, group, b.topic) == {0: COMMITTED[0], 1: -1, 2: COMMITTED[2]}


# ============================================================================ argument handling


@pytest.mark.parametrize("args,message", [
    (["--describe"], "--group or --all-groups is required"),
    (["--describe", "--group", "g", "--all-groups"], "mutually exclusive"),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "needs one of"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "--topic"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-latest"], "--topic"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"], "bad --to-datetime"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1h"], "bad --by-duration"),
    (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"], "bad partition list"),
    (["--describe", "--group", "g", "--members", "--state"], "mutually exclusive"),
])
def test_bad_arguments_exit_1(args: list[str], message: str) -> None:
    # nothing listens on port 1: these must fail before talking to a broker
    r = cli("--bootstrap-server", "127.0.0.1:1", *args, "--command-timeout", "3")
    assert r.returncode == 1, r
    assert message in r.stderr, r.stderr


def test_parsers() -> None:
    assert groups_cmd.parse_duration_ms("PT1H30M") == 5_400_000
    assert groups_cmd.parse_duration_ms("P1DT2.5S") == 86_402_500
    assert groups_cmd.parse_duration_ms("-PT1S") == -1000
    assert groups_cmd.parse_topic_spec("a.b:2,0") == ("a.b", [0, 2])
    assert groups_cmd.parse_topic_spec("t") == ("t", None)
    assert groups_cmd.parse_datetime_ms("1970-01-01T00:00:01.500Z") == 1500
    assert groups_cmd.parse_datetime_ms("1970-01-01T02:00:00+02:00") == 0


def test_reset_offsets_progress_goes_to_stderr_only(b: Setup) -> None:
    group = inactive_group(b)
    base = ["--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", group, "--topic", b.topic,
            "--to-earliest", "--execute"]
    quiet = cli(*base)  # not a terminal, no --progress: no progress line
    assert quiet.returncode == 0 and "reset offsets:" not in quiet.stderr
    r = cli(*base, "--progress")
    assert r.returncode == 0, r.stderr
    assert r.stdout == quiet.stdout  # the table alone, unchanged
    n = len(COUNTS)
    assert f"reset offsets: {n}/{n} (100%)" in r.stderr.splitlines()[-1], r.stderr
