"""``odradek reassign``: kafka-reassign-partitions.sh (KIP-455 APIs).

Actions, as in Kafka's tool:

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: prints the current assignment
  of the topics and a proposal spreading them over the brokers round-robin (Kafka's rack-unaware
  ``assignReplicasToBrokers``: a random start broker and replica shift per topic).
- ``--execute --reassignment-json-file F [--throttle B/s] [--additional]``: prints the current
  assignment (to save for a rollback) and starts the reassignments with
  AlterPartitionReassignments (API 45). With ``--throttle`` it first sets the dynamic broker
  configs ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` on every
  broker and the topic configs ``leader.replication.throttled.replicas`` (partition:broker of the
  current replicas) / ``follower.replication.throttled.replicas`` (of the replicas being added).
- ``--verify --reassignment-json-file F [--wait SECONDS] [--progress]``: the state of each listed
  partition; once all are done (none listed by ListPartitionReassignments, API 46, and the
  metadata's replicas equal the targets) it removes those throttles (unless
  ``--preserve-throttles``). ``--wait`` (odradek's) checks every second until they are done, with
  a progress line on stderr (a terminal, or ``--progress``).
- ``--list``: the reassignments in progress.
- ``--cancel --reassignment-json-file F``: cancels those in progress (replicas = null), then
  removes the throttles (unless ``--preserve-throttles``).

JSON formats (Kafka's)::

    topics to move: {"version": 1, "topics": [{"topic": "t"}, ...]}
    reassignment:   {"version": 1, "partitions": [{"topic": "t", "partition": 0,
                                                  "replicas": [1, 2], "log_dirs": ["any", "any"]}]}

confluent-kafka cannot send APIs 45 and 46: they go through odradek.client.wire to the
controller (NOT_CONTROLLER → find it again and retry); everything else goes through
confluent-kafka's AdminClient.

One concept in one file (over 600 lines): the kafka-reassign-partitions.sh tool, its actions and JSON files.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from odradek.controller.assignment import AssignmentError, assign_rack_unaware
from odradek.progress import Progress, add_progress_argument
from odradek.protocol.errors import NOT_CONTROLLER

TP = tuple[str, int]
Assignment = dict[TP, list[int]]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

ACTIONS = ("generate", "execute", "verify", "list", "cancel")
EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this "
    "and create a new partition assignment in addition to the existing one. The --additional flag can also "
    "be used to change the throttle by resubmitting the current reassignment."
)
VERIFY_MESSAGE = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure "
                  "the throttle is removed.")


class ReassignError(Exception):
    """Reported as ``Error: ...`` with exit code 1."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reassign", help="move partition replicas between brokers (kafka-reassign-partitions.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment of topics over brokers")
    action.add_argument("--execute", action="store_true", help="start the reassignment of a JSON file")
    action.add_argument("--verify", action="store_true", help="check a reassignment; remove throttles when done")
    action.add_argument("--list", action="store_true", help="list the reassignments in progress")
    action.add_argument("--cancel", action="store_true", help="cancel the reassignments of a JSON file")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"version":1,"topics":[{"topic":"t"}]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="with --generate: the brokers to spread over")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="Kafka's reassignment JSON")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_SEC",
                   help="with --execute: replication throttle for the moving replicas (B/s)")
    p.add_argument("--additional", action="store_true",
                   help="with --execute: allow it while other reassignments are in progress")
    p.add_argument("--preserve-throttles", action="store_true", help="with --verify/--cancel: keep the throttles")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="with --verify: check every second until the reassignments are done or SECONDS passed")
    add_progress_argument(p)
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="with --generate: accepted for compatibility (proposals are rack-unaware)")
    p.add_argument("--command-timeout", type=float, default=30.0, help="seconds per request (default 30)")
    p.set_defaults(func=run)


def validate_args(args: argparse.Namespace) -> str | None:
    """Kafka's option checks: a message, or None when the combination is valid."""
    action = next(a for a in ACTIONS if getattr(args, a))
    if action == "generate":
        if not args.topics_to_move_json_file or not args.broker_list:
            return "--generate needs --topics-to-move-json-file and --broker-list"
    elif action in ("execute", "verify", "cancel") and not args.reassignment_json_file:
        return f"--{action} needs --reassignment-json-file"
    if args.throttle != -1 and action != "execute":
        return "--throttle can only be used with --execute"
    if args.throttle < -1 or args.throttle == 0:
        return "--throttle must be a positive number of bytes per second"
    if args.additional and action != "execute":
        return "--additional can only be used with --execute"
    if args.wait and action != "verify":
        return "--wait can only be used with --verify"
    if args.wait < 0:
        return "--wait must not be negative"
    if args.preserve_throttles and action not in ("verify", "cancel"):
        return "--preserve-throttles can only be used with --verify or --cancel"
    if action != "generate" and (args.topics_to_move_json_file or args.broker_list):
        return "--topics-to-move-json-file and --broker-list can only be used with --generate"
    if action in ("generate", "list") and args.reassignment_json_file:
        return f"--reassignment-json-file cannot be used with --{action}"
    return None


# ---------------------------------------------------------------------------- JSON and lists

def _tp(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def _duplicates(items: Iterable[Any]) -> list[Any]:
    return sorted(x for x, n in Counter(items).items() if n > 1)


def _load_json(text: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReassignError(f"{what} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ReassignError(f"{what} must be a JSON object")
    version = doc.get("version", 1)
    if version != 1:
        raise ReassignError(f"Not supported version field value {version}")
    return doc


def parse_broker_list(raw: str) -> list[int]:
    try:
        brokers = [int(b) for b in raw.split(",") if b.strip()]
    except ValueError:
        raise ReassignError(f"--broker-list expects broker ids like 1,2,3, got {raw!r}") from None
    if not brokers:
        raise ReassignError("--broker-list is empty")
    dups = _duplicates(brokers)
    if dups:
        raise ReassignError(f"Broker list contains duplicate entries: {','.join(map(str, dups))}")
    return brokers


def parse_topics_to_move(text: str) -> list[str]:
    doc = _load_json(text, "the topics-to-move file")
    topics = doc.get("topics")
    if not isinstance(topics, list) or not all(isinstance(t, dict) and isinstance(t.get("topic"), str)
                                               for t in topics):
        raise ReassignError('the topics-to-move file must look like {"version":1,"topics":[{"topic":"t"}]}')
    names = [t["topic"] for t in topics]
    if not names:
        raise ReassignError("the topics-to-move file lists no topics")
    dups = _duplicates(names)
    if dups:
        raise ReassignError(f"List of topics to reassign contains duplicate entries: {','.join(dups)}")
    return names


def parse_reassignment(text: str) -> list[tuple[TP, list[int]]]:
    """Kafka's reassignment JSON, in file order; log_dirs other than "any" are refused
    (moving replicas between a broker's log directories is not supported)."""
    doc = _load_json(text, "the reassignment file")
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise ReassignError('the reassignment file must look like {"version":1,"partitions":[...]}')
    out: list[tuple[TP, list[int]]] = []
    for item in parts:
        if not isinstance(item, dict):
            raise ReassignError(f"invalid partition entry: {json.dumps(item)}")
        topic, partition, replicas = item.get("topic"), item.get("partition"), item.get("replicas")
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool) \
                or not isinstance(replicas, list) \
                or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise ReassignError(f"invalid partition entry: {json.dumps(item)}")
        log_dirs = item.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise ReassignError(
                    f"Size of replicas list {replicas} is different from size of log dirs list {log_dirs} "
                    f"for partition {topic}-{partition}")
            if any(d != "any" for d in log_dirs):
                raise ReassignError(f"log_dirs other than \"any\" (partition {topic}-{partition}) are not "
                                    "supported: replicas cannot be moved between a broker's log directories")
        out.append(((topic, partition), list(replicas)))
    if not out:
        raise ReassignError("Partition reassignment list cannot be empty.")
    return out


def validate_execute(parts: list[tuple[TP, list[int]]]) -> Assignment:
    """Kafka's checks for --execute; the proposal as a mapping."""
    if any(not replicas for _, replicas in parts):
        raise ReassignError("Partition replica list cannot be empty.")
    dups = _duplicates(tp for tp, _ in parts)
    if dups:
        raise ReassignError("Partition reassignment contains duplicate topic partitions: "
                            + ",".join(map(_tp, dups)))
    bad = [(tp, _duplicates(r)) for tp, r in parts if _duplicates(r)]
    if bad:
        msg = ". ".join(f"{_tp(tp)} contains multiple entries for {','.join(map(str, d))}" for tp, d in bad)
        raise ReassignError(f"Partition replica lists may not contain duplicate entries: {msg}")
    return dict(parts)


def format_reassignment_json(assignment: Mapping[TP, Sequence[int]]) -> str:
    """Kafka's compact JSON, partitions sorted by topic and partition."""
    parts = [
        {"topic": t, "partition": p, "replicas": list(assignment[(t, p)]),
         "log_dirs": ["any"] * len(assignment[(t, p)])}
        for t, p in sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


# ---------------------------------------------------------------------------- proposals

def assign_replicas_to_brokers(n_partitions: int, replication_factor: int, brokers: Sequence[int],
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """Kafka's rack-unaware AdminUtils.assignReplicasToBrokers, the controller's own
    (:func:`odradek.controller.assignment.assign_rack_unaware`, brokers taken in id order):
    partition p's first replica is broker ``(p + start) % n``; the others follow at a shift
    that grows by one each time p wraps around the broker list, so followers spread too.
    Random start and shift unless ``fixed_start_index`` is given."""
    try:
        return assign_rack_unaware(list(brokers), n_partitions, replication_factor,
                                   start_partition=start_partition_id, fixed_start=fixed_start_index, rng=rng)
    except AssignmentError as e:
        raise ReassignError(str(e)) from None


def propose_assignment(current: Mapping[TP, Sequence[int]], brokers: Sequence[int],
                       rng: random.Random | None = None, fixed_start_index: int = -1) -> Assignment:
    """Kafka's calculateAssignment: each topic re-spread over ``brokers`` (sorted) with its
    partition count and the replication factor of its first partition."""
    ordered = sorted(brokers)
    by_topic: dict[str, list[int]] = {}
    for t, p in current:
        by_topic.setdefault(t, []).append(p)
    out: Assignment = {}
    for topic in sorted(by_topic):
        parts = sorted(by_topic[topic])
        rf = len(current[(topic, parts[0])])
        spread = assign_replicas_to_brokers(len(parts), rf, ordered, fixed_start_index, rng=rng)
        for p, replicas in spread.items():
            out[(topic, p)] = replicas
    return out


# ---------------------------------------------------------------------------- throttles

@dataclass(frozen=True)
class Ongoing:
    replicas: list[int]
    adding: list[int]
    removing: list[int]


@dataclass
class Move:
    sources: set[int]
    destinations: set[int]


def move_map(ongoing: Mapping[TP, Ongoing], proposed: Mapping[TP, Sequence[int]],
             current: Mapping[TP, Sequence[int]]) -> dict[TP, Move]:
    """Kafka's calculateProposedMoveMap: sources are the replicas a partition has (for one being
    reassigned already, those not being added), destinations the target replicas."""
    moves = {tp: Move(set(o.replicas) - set(o.adding), set(o.adding)) for tp, o in ongoing.items()}
    for tp, target in proposed.items():
        sources = moves[tp].sources if tp in moves else set(current.get(tp, ()))
        if not sources:
            raise ReassignError(f"Trying to reassign a topic partition {_tp(tp)} with 0 replicas")
        moves[tp] = Move(set(sources), set(target))
    return moves


def throttled_replicas(moves: Mapping[TP, Move]) -> tuple[dict[str, str], dict[str, str]]:
    """(leader, follower) ``partition:broker`` lists per topic: leaders throttle what they send
    from the sources, followers what they fetch into the replicas being added."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    for (t, p), m in moves.items():
        leader.setdefault(t, set()).update((p, b) for b in m.sources)
        follower.setdefault(t, set()).update((p, b) for b in m.destinations - m.sources)

    def fmt(d: dict[str, set[tuple[int, int]]]) -> dict[str, str]:
        return {t: ",".join(f"{p}:{b}" for p, b in sorted(v)) for t, v in d.items()}

    return fmt(leader), fmt(follower)


# ---------------------------------------------------------------------------- the cluster

class Cluster(Protocol):
    def broker_ids(self) -> list[int]: ...
    def assignment(self, topics: Iterable[str] | None = None) -> Assignment: ...
    def list_reassignments(self, partitions: Iterable[TP] | None = None) -> dict[TP, Ongoing]: ...
    def alter_reassignments(self, targets: Mapping[TP, Sequence[int] | None]) -> dict[TP, str]: ...
    def alter_configs(self, brokers: Mapping[int, Mapping[str, str | None]],
                      topics: Mapping[str, Mapping[str, str | None]]) -> None: ...
    def close(self) -> None: ...


class LiveCluster:
    """confluent-kafka's AdminClient, plus kio requests to the controller for APIs 45 and 46."""

    def __init__(self, bootstrap: str, timeout: float, command_config: str | None = None) -> None:
        from confluent_kafka.admin import AdminClient

        from odradek.client.command_config import admin_config, client_security

        self.bootstrap = bootstrap
        self.timeout = timeout
        self.admin = AdminClient(dict[str, str | int | float | bool](admin_config(bootstrap, command_config)))
        self.security = client_security(command_config)  # the controller connection's TLS / SASL
        self._wire: Any = None

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None

    # -- metadata
    def broker_ids(self) -> list[int]:
        desc = self.admin.describe_cluster(request_timeout=self.timeout).result(self.timeout + 5)
        return sorted(int(n.id) for n in desc.nodes)

    def assignment(self, topics: Iterable[str] | None = None) -> Assignment:
        md = self.admin.list_topics(timeout=self.timeout)
        names = sorted(md.topics) if topics is None else list(topics)
        out: Assignment = {}
        missing = []
        for name in names:
            t = md.topics.get(name)
            if t is None or (t.error is not None and t.error.code() == 3) or not t.partitions:
                missing.append(name)
                continue
            for pid, pm in t.partitions.items():
                out[(name, int(pid))] = [int(b) for b in pm.replicas]
        if missing and topics is not None:
            raise ReassignError(f"Topic(s) {', '.join(missing)} do not exist")
        return out

    # -- APIs 45 and 46, to the controller
    def _controller_request(self, api_key: int, **fields: Any) -> Any:
        from odradek.client.wire import WireClient

        deadline = time.monotonic() + self.timeout
        while True:
            if self._wire is None:
                desc = self.admin.describe_cluster(request_timeout=self.timeout).result(self.timeout + 5)
                ctrl = desc.controller
                if ctrl is None:
                    raise ReassignError("the cluster has no controller")
                self._wire = WireClient(f"{ctrl.host}:{ctrl.port}", timeout=self.timeout + 5,
                                        client_id="odradek-reassign", security=self.security)
            try:
                resp = self._wire.request(api_key, 0, **fields)
            except (OSError, ConnectionError):
                self.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)
                continue
            if int(resp.error_code) == NOT_CONTROLLER and time.monotonic() < deadline:
                self.close()  # the controller moved: find it again
                time.sleep(0.5)
                continue
            return resp

    def _timeout_field(self) -> Any:
        import datetime

        from kio.static.primitive import i32Timedelta

        return i32Timedelta.parse(datetime.timedelta(milliseconds=int(self.timeout * 1000)))

    def list_reassignments(self, partitions: Iterable[TP] | None = None) -> dict[TP, Ongoing]:
        from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsTopics
        from kio.schema.types import TopicName
        from kio.static.primitive import i32

        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = tuple(ListPartitionReassignmentsTopics(name=TopicName(t), partition_indexes=tuple(i32(p) for p in sorted(ps)))
                           for t, ps in sorted(by_topic.items()))
        resp = self._controller_request(46, timeout=self._timeout_field(), topics=topics)
        _check_top_level(resp, "listing partition reassignments")
        return {
            (str(t.name), int(p.partition_index)): Ongoing([int(b) for b in p.replicas],
                                                        [int(b) for b in p.adding_replicas],
                                                        [int(b) for b in p.removing_replicas])
            for t in resp.topics for p in t.partitions
        }

    def alter_reassignments(self, targets: Mapping[TP, Sequence[int] | None]) -> dict[TP, str]:
        from kio.schema.alter_partition_reassignments.v0.request import (
            ReassignablePartition,
            ReassignableTopic,
        )
        from kio.schema.types import BrokerId, TopicName
        from kio.static.primitive import i32

        by_topic: dict[str, list[tuple[int, Sequence[int] | None]]] = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append((p, replicas))
        topics = tuple(
            ReassignableTopic(name=TopicName(t), partitions=tuple(
                ReassignablePartition(partition_index=i32(p),
                                      replicas=None if r is None else tuple(BrokerId(b) for b in r))
                for p, r in sorted(ps, key=lambda x: x[0])))
            for t, ps in sorted(by_topic.items())
        )
        resp = self._controller_request(45, timeout=self._timeout_field(), topics=topics)
        _check_top_level(resp, "reassigning partitions")
        errors: dict[TP, str] = {}
        for t in resp.responses:
            for p in t.partitions:
                if int(p.error_code):
                    errors[(str(t.name), int(p.partition_index))] = _error_text(p.error_code, p.error_message)
        return errors

    # -- configs
    def alter_configs(self, brokers: Mapping[int, Mapping[str, str | None]],
                      topics: Mapping[str, Mapping[str, str | None]]) -> None:
        """Incremental SET (value) / DELETE (None) of broker and topic configs."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        def entries(cfg: Mapping[str, str | None]) -> list[Any]:
            return [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                                else AlterConfigOpType.DELETE) for k, v in cfg.items()]

        # librdkafka allows one BROKER resource per call (it goes to that broker)
        calls = [[ConfigResource(ConfigResource.Type.BROKER, str(b), incremental_configs=entries(c))]
                 for b, c in brokers.items()]
        if topics:
            calls.append([ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=entries(c))
                          for t, c in topics.items()])
        failures = []
        for resources in calls:
            futures = self.admin.incremental_alter_configs(resources, request_timeout=self.timeout)
            for res, fut in futures.items():
                try:
                    fut.result(self.timeout + 5)
                except KafkaException as e:
                    err = e.args[0] if e.args else e
                    kind = "broker" if res.restype == ConfigResource.Type.BROKER else "topic"
                    failures.append(f"{kind} {res.name}: {err.str() if hasattr(err, 'str') else err}")
        if failures:
            raise ReassignError("altering configs failed: " + "; ".join(failures))


def _error_text(code: Any, message: str | None) -> str:
    if message:
        return message
    name = getattr(code, "name", None)
    return name.upper() if isinstance(name, str) else f"error {int(code)}"


def _check_top_level(resp: Any, what: str) -> None:
    if int(resp.error_code):
        raise ReassignError(f"{what} failed: {_error_text(resp.error_code, resp.error_message)}")


def connect(args: argparse.Namespace) -> Cluster:
    return LiveCluster(args.bootstrap_server, args.command_timeout, getattr(args, "command_config", None))


# ---------------------------------------------------------------------------- actions

def generate(cluster: Cluster, topics_json: str, broker_list: str, rng: random.Random | None = None) -> list[str]:
    topics = parse_topics_to_move(topics_json)
    brokers = parse_broker_list(broker_list)
    known = set(cluster.broker_ids())
    unknown = [b for b in brokers if b not in known]
    if unknown:
        raise ReassignError(f"Unknown broker id(s) {','.join(map(str, unknown))}")
    current = cluster.assignment(topics)
    proposed = propose_assignment(current, brokers, rng)
    return [
        "Current partition replica assignment",
        format_reassignment_json(current),
        "",
        "Proposed partition reassignment configuration",
        format_reassignment_json(proposed),
    ]


def execute(cluster: Cluster, reassignment_json: str, throttle: int = -1, additional: bool = False,
            out: Any = None) -> None:
    def say(line: str) -> None:
        print(line, file=out or sys.stdout, flush=True)

    proposed = validate_execute(parse_reassignment(reassignment_json))
    ongoing = cluster.list_reassignments()
    if ongoing and not additional:
        raise ReassignError(EXISTING_MESSAGE)
    brokers = cluster.broker_ids()
    for b in sorted({b for r in proposed.values() for b in r}):
        if b not in brokers:
            raise ReassignError(f"Unknown broker id {b}")
    current = cluster.assignment(sorted({t for t, _ in proposed}))
    missing = sorted(tp for tp in proposed if tp not in current)
    if missing:
        raise ReassignError(f"Unable to find partition: {', '.join(map(_tp, missing))}")
    say("Current partition replica assignment")
    say("")
    say(format_reassignment_json({tp: current[tp] for tp in proposed}))
    say("")
    say("Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        say(VERIFY_MESSAGE)
        moves = move_map(ongoing, proposed, current)
        leader, follower = throttled_replicas(moves)
        topics = {t: {LEADER_REPLICAS: leader.get(t, ""), FOLLOWER_REPLICAS: follower.get(t, "")}
                  for t in sorted(set(leader) | set(follower))}
        rates: dict[str, str | None] = {LEADER_RATE: str(throttle), FOLLOWER_RATE: str(throttle)}
        cluster.alter_configs(dict.fromkeys(brokers, rates), topics)
        say(f"The inter-broker throttle limit was set to {throttle} B/s")
    errors = cluster.alter_reassignments(proposed)
    if errors:
        raise ReassignError("Error reassigning partition(s):\n"
                            + "\n".join(f"{_tp(tp)}: {errors[tp]}" for tp in sorted(errors)))
    say(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
        + ",".join(map(_tp, sorted(proposed))))


def verify_states(targets: Mapping[TP, Sequence[int]], ongoing: Mapping[TP, Ongoing],
                  current: Mapping[TP, Sequence[int]]) -> tuple[list[str], bool]:
    """Kafka's status lines, and whether every reassignment is complete with its target."""
    lines = ["Status of partition reassignment:"]
    complete = True
    for tp in sorted(targets):
        target = list(targets[tp])
        if tp in ongoing:
            complete = False
            lines.append(f"Reassignment of partition {_tp(tp)} is still in progress.")
        elif list(current.get(tp, [])) == target:
            lines.append(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            complete = False
            have = ",".join(map(str, current.get(tp, [])))
            lines.append(f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                         f"{have} rather than {','.join(map(str, target))}.")
    return lines, complete


def clear_throttles(cluster: Cluster, topics: Iterable[str]) -> list[str]:
    brokers = cluster.broker_ids()
    names = sorted(set(topics))
    lines = [f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
             + ",".join(map(str, brokers)),
             f"Clearing topic-level throttles on topic{'' if len(names) == 1 else 's'} " + ",".join(names)]
    cluster.alter_configs({b: {LEADER_RATE: None, FOLLOWER_RATE: None} for b in brokers},
                          {t: {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None} for t in names})
    return lines


def verify(cluster: Cluster, reassignment_json: str, preserve_throttles: bool = False, wait_s: float = 0.0,
           progress: Progress | None = None) -> list[str]:
    """Kafka's --verify; with ``wait_s`` checked every second until complete or that time passed,
    the partitions done shown on ``progress`` (stderr)."""
    parts = parse_reassignment(reassignment_json)
    targets = dict(parts)
    deadline = time.monotonic() + wait_s
    while True:
        ongoing = cluster.list_reassignments(list(targets))
        current = cluster.assignment(sorted({t for t, _ in targets}))
        lines, complete = verify_states(targets, ongoing, current)
        if progress is not None:
            done = sum(1 for tp, r in targets.items() if tp not in ongoing and list(current.get(tp, [])) == list(r))
            progress.update(done, f"{len(ongoing)} in progress")
        if complete or time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    if progress is not None:
        progress.done()
    if complete and not preserve_throttles:
        lines += clear_throttles(cluster, (t for t, _ in targets))
    return lines


def list_reassignments(cluster: Cluster) -> list[str]:
    ongoing = cluster.list_reassignments()
    if not ongoing:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for tp in sorted(ongoing):
        o = ongoing[tp]
        line = f"{_tp(tp)}: replicas: {','.join(map(str, o.replicas))}."
        if o.adding:
            line += f" adding: {','.join(map(str, o.adding))}."
        if o.removing:
            line += f" removing: {','.join(map(str, o.removing))}."
        lines.append(line)
    return lines


def cancel(cluster: Cluster, reassignment_json: str, preserve_throttles: bool = False) -> list[str]:
    targets = dict(parse_reassignment(reassignment_json))
    ongoing = cluster.list_reassignments(list(targets))
    active = sorted(tp for tp, o in ongoing.items() if tp in targets and (o.adding or o.removing))
    lines: list[str] = []
    if active:
        errors = cluster.alter_reassignments(dict.fromkeys(active))
        if errors:
            raise ReassignError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                                + "\n".join(f"{_tp(tp)}: {errors[tp]}" for tp in sorted(errors)))
        lines.append(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: "
                     + ",".join(map(_tp, active)))
    else:
        lines.append("None of the specified partition reassignments are active.")
    if not preserve_throttles:
        lines += clear_throttles(cluster, (t for t, _ in targets))
    return lines


def run(args: argparse.Namespace) -> int:
    problem = validate_args(args)
    if problem:
        print(f"Error: {problem}", file=sys.stderr)
        return 1
    from confluent_kafka import KafkaException

    cluster: Cluster | None = None
    try:
        cluster = connect(args)
        if args.generate:
            lines = generate(cluster, Path(args.topics_to_move_json_file).read_text(), args.broker_list)
        elif args.execute:
            execute(cluster, Path(args.reassignment_json_file).read_text(), args.throttle, args.additional)
            lines = []
        elif args.verify:
            text = Path(args.reassignment_json_file).read_text()
            progress = Progress.for_args(args, "reassignment", total=len(parse_reassignment(text)))
            lines = verify(cluster, text, args.preserve_throttles, args.wait, progress)
        elif args.list:
            lines = list_reassignments(cluster)
        else:
            lines = cancel(cluster, Path(args.reassignment_json_file).read_text(), args.preserve_throttles)
    except ReassignError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KafkaException as e:
        err = e.args[0] if e.args else e
        print(f"Error: {err.str() if hasattr(err, 'str') else err}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError, ValueError) as e:  # ValueError: ConfigError of --command-config
        print(f"Error: {e or type(e).__name__}", file=sys.stderr)
        return 1
    finally:
        if cluster is not None:
            cluster.close()
    for line in lines:
        print(line)
    return 0
