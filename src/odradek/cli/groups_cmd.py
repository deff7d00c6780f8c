"""``odradek groups``: kafka-consumer-groups.sh through the broker's own APIs.

    --list [--state [S,S]]                 one group per line (with --state: GROUP STATE, filtered)
    --describe --group G [--members [--verbose] | --state]
    --delete --group G
    --delete-offsets --group G --topic T[:p,p]
    --reset-offsets --group G (--topic T[:p,p] ... | --all-topics) <scenario> [--dry-run | --execute]
        scenario: --to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
                  | --to-datetime YYYY-MM-DDTHH:MM:SS[.sss][Z|+hh:mm] | --by-duration PnDTnHnMnS

Lag = log end offset (high watermark) - committed offset, "-" when nothing is committed.

One concept in one file (over 600 lines): the kafka-consumer-groups.sh tool, its actions and their output formats.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from odradek.progress import Progress, add_progress_argument

# ConsumerGroupState values (confluent_kafka) -> Kafka's spelling
_STATE_NAMES = {
    0: "Unknown",
    1: "PreparingRebalance",
    2: "CompletingRebalance",
    3: "Stable",
    4: "Dead",
    5: "Empty",
}
RESET_CHUNK = 1000  # partitions per OffsetCommit of --reset-offsets --execute
_RESET_SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime", "by_duration")


class CliError(Exception):
    """A failure to report on stderr with exit code 1."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("groups", help="list, describe, delete consumer groups and reset their offsets")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    action = p.add_mutually_exclusive_group(required=True)
    for a in ("list", "describe", "delete", "delete-offsets", "reset-offsets"):
        action.add_argument(f"--{a}", action="store_true")
    p.add_argument("--group", action="append", default=[], help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--members", action="store_true", help="with --describe: one line per member")
    p.add_argument("--verbose", action="store_true", help="with --describe --members: show assignments")
    p.add_argument(
        "--state", nargs="?", const="", default=None, metavar="STATE[,STATE]",
        help="with --describe: the group's state; with --list: show states, optionally only these",
    )
    p.add_argument("--offsets", action="store_true", help="with --describe: the default view")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]")
    p.add_argument("--all-topics", action="store_true")
    scenario = p.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true")
    scenario.add_argument("--to-latest", action="store_true")
    scenario.add_argument("--to-current", action="store_true")
    scenario.add_argument("--to-offset", type=int, metavar="N")
    scenario.add_argument("--shift-by", type=int, metavar="N")
    scenario.add_argument("--to-datetime", metavar="ISO8601")
    scenario.add_argument("--by-duration", metavar="PnDTnHnMnS")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true")
    run_mode.add_argument("--execute", action="store_true")
    p.add_argument("--command-timeout", type=float, default=30.0)
    add_progress_argument(p)  # reset-offsets: partitions planned and committed, on stderr
    p.set_defaults(func=run)


# ============================================================================ helpers


def _fail(msg: str) -> int:
    print(f"Error: {msg}", file=sys.stderr)
    return 1


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    from odradek.client.command_config import admin_config

    conf: dict[str, Any] = admin_config(args.bootstrap_server, getattr(args, "command_config", None))
    conf["socket.timeout.ms"] = int(args.command_timeout * 1000)
    return AdminClient(conf)


def _kafka_error(e: BaseException) -> str:
    arg = e.args[0] if e.args else None
    if arg is not None and hasattr(arg, "name") and hasattr(arg, "str"):
        return f"{arg.name()}: {arg.str()}"
    return str(arg if arg is not None else e)


def _error_code(e: BaseException) -> int | None:
    arg = e.args[0] if e.args else None
    code = getattr(arg, "code", None)
    return int(code()) if callable(code) else None


def state_name(state: Any) -> str:
    value = getattr(state, "value", state)
    return _STATE_NAMES.get(int(value), str(state)) if isinstance(value, int) else str(value)


def parse_states(raw: str) -> set[Any]:
    from confluent_kafka import ConsumerGroupState

    by_name = {name.lower(): ConsumerGroupState(v) for v, name in _STATE_NAMES.items()}
    out = set()
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        if item.lower() not in by_name:
            raise CliError(f"unknown group state {item!r}; valid: {', '.join(_STATE_NAMES.values())}")
        out.add(by_name[item.lower()])
    return out


def parse_topic_spec(raw: str) -> tuple[str, list[int] | None]:
    """``topic`` -> (topic, None); ``topic:0,2`` -> (topic, [0, 2])."""
    topic, sep, parts = raw.partition(":")
    if not topic:
        raise CliError(f"bad --topic {raw!r}")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise CliError(f"bad partition list in --topic {raw!r}") from None


_DURATION = re.compile(
    r"^(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+)D)?(?:T(?:(?P<h>[-+]?\d+)H)?(?:(?P<m>[-+]?\d+)M)?"
    r"(?:(?P<s>[-+]?\d+(?:[.,]\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_duration_ms(raw: str) -> int:
    """An ISO-8601 duration as java.time.Duration.parse takes it (PnDTnHnMn.nS) -> milliseconds."""
    m = _DURATION.match(raw.strip())
    if not m or raw.strip().upper() in ("P", "PT", "-P", "+P") or raw.strip().upper().endswith("T"):
        raise CliError(f"bad --by-duration {raw!r}; expected e.g. PT1H30M or P1DT2H")
    secs = (
        int(m["d"] or 0) * 86400 + int(m["h"] or 0) * 3600 + int(m["m"] or 0) * 60
        + float((m["s"] or "0").replace(",", "."))
    )
    ms = round(secs * 1000)
    return -ms if m["sign"] == "-" else ms


def parse_datetime_ms(raw: str) -> int:
    """ISO-8601 date-time -> epoch milliseconds; without an offset it is local time (as Kafka does)."""
    text = raw.strip()
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"bad --to-datetime {raw!r}; expected YYYY-MM-DDTHH:mm:SS[.sss] with an optional offset (Z, +01:00)"
        ) from None
    return int(round(dt.timestamp() * 1000))


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [list(header)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        lines.append(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


# ============================================================================ broker queries


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


@dataclass
class Group:
    group_id: str
    state: str
    assignor: str
    coordinator: str
    members: list[Member]


def describe_groups(admin: Any, group_ids: list[str], timeout: float) -> dict[str, Group | None]:
    """{group: description}, None for a group the coordinator does not know (Kafka's "Dead")."""
    from confluent_kafka import KafkaException

    futures = admin.describe_consumer_groups(group_ids, request_timeout=timeout)
    out: dict[str, Group | None] = {}
    for gid in group_ids:
        try:
            d = futures[gid].result(timeout)
        except KafkaException as e:
            if _error_code(e) == 69:  # GROUP_ID_NOT_FOUND (DescribeGroups v6+)
                out[gid] = None
                continue
            raise CliError(f"could not describe group '{gid}': {_kafka_error(e)}") from None
        state = state_name(getattr(d, "state", 0))
        if state == "Dead":
            out[gid] = None
            continue
        members = []
        for m in d.members or []:
            tps = m.assignment.topic_partitions if m.assignment is not None else []
            members.append(Member(m.member_id, m.group_instance_id, m.client_id, m.host,
                                  sorted((tp.topic, tp.partition) for tp in tps)))
        coord = d.coordinator
        coord_s = f"{coord.host}:{coord.port} ({coord.id})" if coord is not None else "-"
        out[gid] = Group(gid, state, d.partition_assignor or "", coord_s, members)
    return out


def committed_offsets(admin: Any, group_id: str, timeout: float,
                      partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], int]:
    """The group's committed offsets ({(topic, partition): offset}); partitions without one are left out."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    req = ConsumerGroupTopicPartitions(
        group_id, [TopicPartition(t, p) for t, p in partitions] if partitions is not None else None
    )
    try:
        res = admin.list_consumer_group_offsets([req], request_timeout=timeout)[group_id].result(timeout)
    except KafkaException as e:
        raise CliError(f"could not fetch offsets of group '{group_id}': {_kafka_error(e)}") from None
    out: dict[tuple[str, int], int] = {}
    for tp in res.topic_partitions or []:
        if tp.error is not None:
            raise CliError(f"could not fetch offset of {tp.topic}-{tp.partition}: {tp.error}")
        if tp.offset >= 0:
            out[(tp.topic, tp.partition)] = tp.offset
    return out


def list_offsets(admin: Any, tps: Iterable[tuple[str, int]], spec: Any, timeout: float) -> dict[tuple[str, int], int]:
    """ListOffsets for each partition with one OffsetSpec: {(topic, partition): offset} (-1: none)."""
    from confluent_kafka import KafkaException, TopicPartition

    tps = sorted(set(tps))
    if not tps:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in tps}, request_timeout=timeout)
    out: dict[tuple[str, int], int] = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = int(fut.result(timeout).offset)
        except KafkaException as e:
            raise CliError(f"could not list offsets of {tp.topic}-{tp.partition}: {_kafka_error(e)}") from None
    return out


def end_offsets(admin: Any, tps: Iterable[tuple[str, int]], timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    return list_offsets(admin, tps, OffsetSpec.latest(), timeout)


def start_offsets(admin: Any, tps: Iterable[tuple[str, int]], timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    return list_offsets(admin, tps, OffsetSpec.earliest(), timeout)


def topic_partitions(admin: Any, topics: list[str], timeout: float) -> dict[str, list[int]]:
    md = admin.list_topics(timeout=timeout)
    out = {}
    for t in topics:
        tm = md.topics.get(t)
        if tm is None or (tm.error is not None and tm.error.code() == 3) or not tm.partitions:
            raise CliError(f"topic '{t}' does not exist")
        out[t] = sorted(tm.partitions)
    return out


# ============================================================================ actions


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    try:
        admin = _admin(args)
        if args.list:
            return _list(admin, args)
        groups = _groups(admin, args)
        if args.describe:
            return _describe(admin, args, groups)
        if args.delete:
            return _delete(admin, args, groups)
        if args.delete_offsets:
            return _delete_offsets(admin, args, groups)
        return _reset(admin, args, groups)
    except CliError as e:
        return _fail(str(e))
    except KafkaException as e:
        return _fail(_kafka_error(e))
    except ValueError as e:
        return _fail(str(e))
    except TimeoutError:
        return _fail(f"no answer from {args.bootstrap_server} within {args.command_timeout:g}s")


def _groups(admin: Any, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        if args.group:
            raise CliError("--group and --all-groups are mutually exclusive")
        if args.delete_offsets:
            raise CliError("--delete-offsets takes a single --group")
        return sorted(g.group_id for g in _listings(admin, args, None))
    if not args.group:
        raise CliError("--group or --all-groups is required")
    seen: list[str] = []
    for g in args.group:
        if g not in seen:
            seen.append(g)
    return seen


def _listings(admin: Any, args: argparse.Namespace, states: set[Any] | None) -> list[Any]:
    kwargs: dict[str, Any] = {"request_timeout": args.command_timeout}
    if states:
        kwargs["states"] = states
    res = admin.list_consumer_groups(**kwargs).result(args.command_timeout)
    if res.errors:
        raise CliError("; ".join(_kafka_error(e) for e in res.errors))
    return list(res.valid or [])


def _list(admin: Any, args: argparse.Namespace) -> int:
    states = parse_states(args.state) if args.state else None
    listings = sorted(_listings(admin, args, states), key=lambda g: g.group_id)
    if args.state is None:
        for g in listings:
            print(g.group_id)
        return 0
    print(_table(("GROUP", "STATE"), [(g.group_id, state_name(getattr(g, "state", 0))) for g in listings]))
    return 0


def _describe(admin: Any, args: argparse.Namespace, group_ids: list[str]) -> int:
    timeout = args.command_timeout
    if args.state is not None and args.members:
        raise CliError("--members and --state are mutually exclusive")
    if args.state:
        raise CliError("--state takes no value with --describe")
    described = describe_groups(admin, group_ids, timeout)
    status = 0
    first = True
    for gid in group_ids:
        g = described[gid]
        if not first:
            print()
        first = False
        if args.state is not None:
            if g is None:
                print(_table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                             [(gid, "-", "", "Dead", 0)]))
                print(f"Consumer group '{gid}' does not exist.", file=sys.stderr)
            else:
                print(_table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                             [(gid, g.coordinator, g.assignor or "-", g.state, len(g.members))]))
            continue
        if g is None:
            print(f"Error: Consumer group '{gid}' does not exist.", file=sys.stderr)
            status = 1
            continue
        if not g.members:
            print(f"Consumer group '{gid}' has no active members.", file=sys.stderr)
        elif g.state in ("PreparingRebalance", "CompletingRebalance"):
            print(f"Warning: Consumer group '{gid}' is rebalancing.", file=sys.stderr)
        if args.members:
            _print_members(g, args.verbose)
        else:
            _print_offsets(admin, g, timeout)
    return status


def _print_members(g: Group, verbose: bool) -> None:
    if verbose:
        header: tuple[str, ...] = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                   "ASSIGNMENT")
    else:
        header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    rows: list[tuple[object, ...]] = []
    for m in sorted(g.members, key=lambda m: m.member_id):
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for t, p in m.partitions:
                by_topic.setdefault(t, []).append(p)
            assignment = ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items())) or "-"
            rows.append((g.group_id, m.member_id, m.instance_id or "-", m.host, m.client_id, len(m.partitions),
                         assignment))
        else:
            rows.append((g.group_id, m.member_id, m.host, m.client_id, len(m.partitions)))
    print(_table(header, rows))


def offset_rows(admin: Any, g: Group, timeout: float) -> list[tuple[str, str, str, str, str, str, str, str, str]]:
    """The rows of the default --describe view (all strings, "-" where Kafka prints one)."""
    committed = committed_offsets(admin, g.group_id, timeout)
    owner: dict[tuple[str, int], Member] = {}
    for m in g.members:
        for tp in m.partitions:
            owner[tp] = m
    tps = sorted(set(committed) | set(owner))
    ends = end_offsets(admin, tps, timeout)
    rows = []
    for t, p in tps:
        cur = committed.get((t, p))
        end = ends.get((t, p), -1)
        lag = "-" if cur is None or end < 0 else str(max(end - cur, 0))
        o = owner.get((t, p))
        rows.append((g.group_id, t, str(p), "-" if cur is None else str(cur), "-" if end < 0 else str(end), lag,
                     o.member_id if o else "-", o.host if o else "-", o.client_id if o else "-"))
    for m in sorted(g.members, key=lambda m: m.member_id):
        if not m.partitions:
            rows.append((g.group_id, "-", "-", "-", "-", "-", m.member_id, m.host, m.client_id))
    return rows


def _print_offsets(admin: Any, g: Group, timeout: float) -> None:
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID")
    print(_table(header, offset_rows(admin, g, timeout)))


def _delete(admin: Any, args: argparse.Namespace, group_ids: list[str]) -> int:
    from confluent_kafka import KafkaException

    if args.topic:
        raise CliError("to delete a group's offsets of a topic use --delete-offsets --group G --topic T")
    if not group_ids:
        print("No consumer groups to delete.")
        return 0
    futures = admin.delete_consumer_groups(group_ids, request_timeout=args.command_timeout)
    failed: list[tuple[str, str]] = []
    for gid in group_ids:
        try:
            futures[gid].result(args.command_timeout)
        except KafkaException as e:
            failed.append((gid, _kafka_error(e)))
    ok = [g for g in group_ids if g not in {f for f, _ in failed}]
    if ok:
        quoted = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
    if failed:
        print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
        for gid, err in failed:
            print(f"* Group '{gid}' could not be deleted due to: {err}", file=sys.stderr)
        return 1
    return 0


def _delete_offsets(admin: Any, args: argparse.Namespace, group_ids: list[str]) -> int:
    """OffsetDelete (key 47) at the group's coordinator; confluent-kafka's Python binding lacks it."""
    from kio.schema.offset_delete.v0.request import OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
    from kio.schema.types import TopicName
    from kio.static.primitive import i8, i32

    from odradek.client.command_config import client_security
    from odradek.client.wire import WireClient

    if len(group_ids) != 1:
        raise CliError("--delete-offsets takes a single --group")
    if not args.topic:
        raise CliError("--delete-offsets needs --topic")
    gid = group_ids[0]
    specs = [parse_topic_spec(t) for t in args.topic]
    known = topic_partitions(admin, [t for t, ps in specs if ps is None], args.command_timeout)
    wanted = {t: (ps if ps is not None else known[t]) for t, ps in specs}
    security = client_security(getattr(args, "command_config", None))
    with WireClient(args.bootstrap_server, timeout=args.command_timeout, security=security) as c:
        fc = c.request(10, 1, key=gid, key_type=i8(0))
        if int(fc.error_code):
            raise CliError(f"no coordinator for group '{gid}': {fc.error_code.name}")
        coordinator = f"{fc.host}:{fc.port}"
    with WireClient(coordinator, timeout=args.command_timeout, security=security) as c:
        topics = tuple(
            OffsetDeleteRequestTopic(name=TopicName(t), partitions=tuple(OffsetDeleteRequestPartition(partition_index=i32(p))
                                                              for p in ps))
            for t, ps in sorted(wanted.items())
        )
        resp = c.request(47, 0, group_id=gid, topics=topics)
    if int(resp.error_code):
        raise CliError(f"could not delete offsets of group '{gid}': {resp.error_code.name}")
    rows = []
    status = 0
    for t in resp.topics:
        for p in t.partitions:
            err = int(p.error_code)
            status = status or (1 if err else 0)
            rows.append((t.name, p.partition_index, "Successful" if not err else f"Error: {p.error_code.name}"))
    print(_table(("TOPIC", "PARTITION", "STATUS"), sorted(rows)))
    return status


def _reset(admin: Any, args: argparse.Namespace, group_ids: list[str]) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    timeout = args.command_timeout
    scenarios = [s for s in _RESET_SCENARIOS if getattr(args, s) not in (None, False)]
    if len(scenarios) != 1:
        raise CliError(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, "
            "--to-datetime, --by-duration"
        )
    if bool(args.topic) == bool(args.all_topics):
        raise CliError("--reset-offsets needs --topic (repeatable) or --all-topics")
    scenario = scenarios[0]
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --dry-run to silence this warning.", file=sys.stderr)
    target_ts: int | None = None
    if scenario == "to_datetime":
        target_ts = parse_datetime_ms(args.to_datetime)
    elif scenario == "by_duration":
        target_ts = int(time.time() * 1000) - parse_duration_ms(args.by_duration)

    specs = [parse_topic_spec(t) for t in args.topic]
    described = describe_groups(admin, group_ids, timeout)
    for gid in group_ids:
        g = described[gid]
        if g is not None and g.state not in ("Empty", "Dead"):
            raise CliError(
                f"Assignments can only be reset if the group '{gid}' is inactive, but the current state is {g.state}."
            )

    status = 0
    all_rows: list[tuple[str, str, int, int]] = []
    progress = Progress.for_args(args, "reset offsets")
    for gid in group_ids:
        committed = committed_offsets(admin, gid, timeout)
        if args.all_topics:
            tps = sorted(committed)
        else:
            known = topic_partitions(admin, sorted({t for t, _ in specs}), timeout)
            chosen: set[tuple[str, int]] = set()
            for t, ps in specs:
                for p in ps if ps is not None else known[t]:
                    if p not in known[t]:
                        raise CliError(f"topic '{t}' has no partition {p}")
                    chosen.add((t, p))
            tps = sorted(chosen)
        plan = plan_reset(admin, tps, committed, scenario, args, target_ts, timeout)
        rows = [(gid, t, p, off) for (t, p), off in sorted(plan.items())]
        all_rows += rows
        progress.total = len(all_rows)
        progress.update(len(all_rows) - len(rows), f"group {gid}: {len(rows)} partitions planned", force=True)
        if args.execute and plan:
            items = sorted(plan.items())
            # committed RESET_CHUNK partitions at a time, so the progress line moves on many partitions
            for start in range(0, len(items), RESET_CHUNK):
                chunk = items[start:start + RESET_CHUNK]
                req = ConsumerGroupTopicPartitions(gid, [TopicPartition(t, p, off) for (t, p), off in chunk])
                try:
                    res = admin.alter_consumer_group_offsets([req], request_timeout=timeout)[gid].result(timeout)
                except KafkaException as e:
                    raise CliError(f"could not reset offsets of group '{gid}': {_kafka_error(e)}") from None
                bad = [tp for tp in res.topic_partitions or [] if tp.error is not None]
                if bad:
                    for tp in bad:
                        print(f"Error: could not reset {tp.topic}-{tp.partition}: {tp.error}", file=sys.stderr)
                    status = 1
                progress.update(len(all_rows) - len(rows) + start + len(chunk), f"group {gid}")
        else:
            progress.update(len(all_rows), f"group {gid}")
    progress.done()
    print(_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), all_rows))
    return status


def plan_reset(admin: Any, tps: list[tuple[str, int]], committed: dict[tuple[str, int], int], scenario: str,
               args: argparse.Namespace, target_ts: int | None, timeout: float) -> dict[tuple[str, int], int]:
    """{(topic, partition): new offset} for one group, clamped to [log start, log end] like Kafka."""
    from confluent_kafka.admin import OffsetSpec

    if not tps:
        return {}
    starts = start_offsets(admin, tps, timeout)
    ends = end_offsets(admin, tps, timeout)

    def clamp(tp: tuple[str, int], off: int) -> int:
        if off < starts[tp]:
            print(f"WARN: New offset ({off}) is lower than earliest offset for {tp[0]}-{tp[1]} "
                  f"({starts[tp]}). Using {starts[tp]}.", file=sys.stderr)
            return starts[tp]
        if off > ends[tp]:
            print(f"WARN: New offset ({off}) is higher than latest offset for {tp[0]}-{tp[1]} "
                  f"({ends[tp]}). Using {ends[tp]}.", file=sys.stderr)
            return ends[tp]
        return off

    if scenario == "to_earliest":
        return {tp: starts[tp] for tp in tps}
    if scenario == "to_latest":
        return {tp: ends[tp] for tp in tps}
    if scenario == "to_current":
        return {tp: committed.get(tp, ends[tp]) for tp in tps}
    if scenario == "to_offset":
        return {tp: clamp(tp, args.to_offset) for tp in tps}
    if scenario == "shift_by":
        missing = [tp for tp in tps if tp not in committed]
        if missing:
            t, p = missing[0]
            raise CliError(f"cannot shift the offset of {t}-{p}: the group has no committed offset for it")
        return {tp: clamp(tp, committed[tp] + args.shift_by) for tp in tps}
    assert target_ts is not None
    found = list_offsets(admin, tps, OffsetSpec.for_timestamp(target_ts), timeout)
    # no message at or after the time: the log end offset
    return {tp: found[tp] if found.get(tp, -1) >= 0 else ends[tp] for tp in tps}
