"""``odradek reassign`` offline: argument checks, JSON parsing and formatting, Kafka's round-robin
proposal, throttle lists, and the --generate/--verify/--list/--cancel/--execute flows against a
fake cluster."""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from odradek.cli import reassign_cmd as rc
from odradek.cli.main import main

TP = tuple[str, int]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="odradek")
    sub = parser.add_subparsers(dest="command", required=True)
    rc.add_parser(sub)
    return parser.parse_args(["reassign", "--bootstrap-server", "h:1", *argv])


class FakeCluster:
    def __init__(self, brokers: list[int], assignment: dict[TP, list[int]],
                 ongoing: dict[TP, rc.Ongoing] | None = None) -> None:
        self.brokers = brokers
        self.current = assignment
        self.ongoing = dict(ongoing or {})
        self.altered: list[dict[TP, list[int] | None]] = []
        self.configs: list[tuple[dict[int, dict[str, str | None]], dict[str, dict[str, str | None]]]] = []
        self.closed = False

    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def assignment(self, topics: Iterable[str] | None = None) -> dict[TP, list[int]]:
        wanted = None if topics is None else set(topics)
        if wanted is not None:
            missing = wanted - {t for t, _ in self.current}
            if missing:
                raise rc.ReassignError(f"Topic(s) {', '.join(sorted(missing))} do not exist")
        return {tp: list(r) for tp, r in self.current.items() if wanted is None or tp[0] in wanted}

    def list_reassignments(self, partitions: Iterable[TP] | None = None) -> dict[TP, rc.Ongoing]:
        wanted = None if partitions is None else set(partitions)
        return {tp: o for tp, o in self.ongoing.items() if wanted is None or tp in wanted}

    def alter_reassignments(self, targets: Mapping[TP, Sequence[int] | None]) -> dict[TP, str]:
        self.altered.append({tp: None if r is None else list(r) for tp, r in targets.items()})
        return {}

    def alter_configs(self, brokers: Mapping[int, Mapping[str, str | None]],
                      topics: Mapping[str, Mapping[str, str | None]]) -> None:
        self.configs.append(({b: dict(c) for b, c in brokers.items()}, {t: dict(c) for t, c in topics.items()}))

    def close(self) -> None:
        self.closed = True


# ------------------------------------------------------------------ arguments

def test_actions_are_mutually_exclusive_and_required() -> None:
    with pytest.raises(SystemExit):
        parse([])
    with pytest.raises(SystemExit):
        parse(["--list", "--verify"])
    args = parse(["--list"])
    assert args.list and rc.validate_args(args) is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--generate", "--broker-list", "1,2"], "--generate needs"),
    (["--generate", "--topics-to-move-json-file", "f"], "--generate needs"),
    (["--execute"], "--execute needs --reassignment-json-file"),
    (["--verify"], "--verify needs --reassignment-json-file"),
    (["--cancel"], "--cancel needs --reassignment-json-file"),
    (["--verify", "--reassignment-json-file", "f", "--throttle", "100"], "--throttle can only be used with --execute"),
    (["--execute", "--reassignment-json-file", "f", "--throttle", "0"], "positive"),
    (["--list", "--additional"], "--additional"),
    (["--execute", "--reassignment-json-file", "f", "--preserve-throttles"], "--preserve-throttles"),
    (["--list", "--broker-list", "1"], "only be used with --generate"),
    (["--list", "--reassignment-json-file", "f"], "cannot be used with --list"),
])
def test_invalid_combinations(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(argv)
    problem = rc.validate_args(args)
    assert problem is not None and message in problem
    assert main(["reassign", "--bootstrap-server", "h:1", *argv]) == 1
    assert message in capsys.readouterr().err


def test_valid_combinations() -> None:
    for argv in (
        ["--generate", "--topics-to-move-json-file", "f", "--broker-list", "1,2"],
        ["--execute", "--reassignment-json-file", "f", "--throttle", "1000", "--additional"],
        ["--verify", "--reassignment-json-file", "f", "--preserve-throttles"],
        ["--cancel", "--reassignment-json-file", "f"],
        ["--list"],
    ):
        assert rc.validate_args(parse(argv)) is None, argv


# ------------------------------------------------------------------ JSON

def test_parse_topics_to_move() -> None:
    assert rc.parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == ["a", "b"]
    assert rc.parse_topics_to_move('{"topics":[{"topic":"a"}]}') == ["a"]  # version defaults to 1
    with pytest.raises(rc.ReassignError, match="duplicate entries: a"):
        rc.parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    with pytest.raises(rc.ReassignError, match="Not supported version field value 2"):
        rc.parse_topics_to_move('{"version":2,"topics":[{"topic":"a"}]}')
    with pytest.raises(rc.ReassignError, match="not valid JSON"):
        rc.parse_topics_to_move("{topics")
    with pytest.raises(rc.ReassignError, match="no topics"):
        rc.parse_topics_to_move('{"topics":[]}')
    with pytest.raises(rc.ReassignError, match="must look like"):
        rc.parse_topics_to_move('{"topics":["a"]}')


def test_parse_broker_list() -> None:
    assert rc.parse_broker_list("3,1,2") == [3, 1, 2]
    with pytest.raises(rc.ReassignError, match="duplicate entries: 1"):
        rc.parse_broker_list("1,2,1")
    with pytest.raises(rc.ReassignError, match="broker ids"):
        rc.parse_broker_list("1,x")
    with pytest.raises(rc.ReassignError, match="empty"):
        rc.parse_broker_list(",")


def test_parse_reassignment() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 0, "replicas": [1, 2]},
    ]})
    assert rc.parse_reassignment(text) == [(("t", 1), [3, 1]), (("t", 0), [1, 2])]
    with pytest.raises(rc.ReassignError, match="different from size of log dirs"):
        rc.parse_reassignment('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}')
    with pytest.raises(rc.ReassignError, match="not supported"):
        rc.parse_reassignment('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}')
    with pytest.raises(rc.ReassignError, match="cannot be empty"):
        rc.parse_reassignment('{"version":1,"partitions":[]}')
    with pytest.raises(rc.ReassignError, match="invalid partition entry"):
        rc.parse_reassignment('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}')
    with pytest.raises(rc.ReassignError, match="invalid partition entry"):
        rc.parse_reassignment('{"partitions":[{"topic":"t","partition":0,"replicas":[true]}]}')


def test_validate_execute() -> None:
    assert rc.validate_execute([(("t", 0), [1, 2])]) == {("t", 0): [1, 2]}
    with pytest.raises(rc.ReassignError, match="duplicate topic partitions: t-0"):
        rc.validate_execute([(("t", 0), [1, 2]), (("t", 0), [2, 3])])
    with pytest.raises(rc.ReassignError, match="t-0 contains multiple entries for 2"):
        rc.validate_execute([(("t", 0), [2, 1, 2])])
    with pytest.raises(rc.ReassignError, match="replica list cannot be empty"):
        rc.validate_execute([(("t", 0), [])])


def test_format_is_kafkas_compact_sorted_json() -> None:
    out = rc.format_reassignment_json({("b", 0): [2], ("a", 1): [1, 3], ("a", 0): [3, 1]})
    assert out == (
        '{"version":1,"partitions":['
        '{"topic":"a","partition":0,"replicas":[3,1],"log_dirs":["any","any"]},'
        '{"topic":"a","partition":1,"replicas":[1,3],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[2],"log_dirs":["any"]}]}'
    )
    # and it parses back
    assert dict(rc.parse_reassignment(out)) == {("a", 0): [3, 1], ("a", 1): [1, 3], ("b", 0): [2]}


# ------------------------------------------------------------------ proposals

def test_round_robin_matches_kafkas_fixed_start() -> None:
    # AdminZkClientTest.testReplicaAssignment: brokers 0-4, 10 partitions, RF 3, fixed start index 0
    expected = {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }
    assert rc.assign_replicas_to_brokers(10, 3, [0, 1, 2, 3, 4], fixed_start_index=0) == expected


def test_round_robin_errors() -> None:
    with pytest.raises(rc.ReassignError, match="Replication factor: 3 larger than available brokers: 2."):
        rc.assign_replicas_to_brokers(4, 3, [1, 2])
    with pytest.raises(rc.ReassignError, match="partitions must be larger than 0"):
        rc.assign_replicas_to_brokers(0, 1, [1, 2])
    with pytest.raises(rc.ReassignError, match="Replication factor must be larger than 0"):
        rc.assign_replicas_to_brokers(1, 0, [1, 2])


@pytest.mark.parametrize("seed", range(20))
def test_proposal_spreads_every_topic_over_the_brokers(seed: int) -> None:
    current = {("a", p): [1, 2, 3] for p in range(7)}
    current.update({("b", p): [1] for p in range(5)})
    brokers = [6, 4, 5, 7]
    proposal = rc.propose_assignment(current, brokers, random.Random(seed))
    assert set(proposal) == set(current)
    for tp, replicas in proposal.items():
        assert len(replicas) == len(current[tp])  # replication factor kept
        assert len(set(replicas)) == len(replicas)
        assert set(replicas) <= set(brokers)
    for topic in ("a", "b"):
        leaders = Counter(r[0] for tp, r in proposal.items() if tp[0] == topic)
        n = sum(1 for tp in proposal if tp[0] == topic)
        assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1, leaders  # round robin
        assert sum(leaders.values()) == n
    replicas_a = Counter(b for tp, r in proposal.items() if tp[0] == "a" for b in r)
    assert max(replicas_a.values()) - min(replicas_a.values()) <= 2, replicas_a


def test_proposal_with_fixed_start_is_deterministic() -> None:
    current = {("t", p): [9, 8] for p in range(4)}
    assert rc.propose_assignment(current, [3, 1, 2], fixed_start_index=0) == {
        ("t", 0): [1, 2], ("t", 1): [2, 3], ("t", 2): [3, 1], ("t", 3): [1, 3],
    }


# ------------------------------------------------------------------ throttles

def test_throttled_replicas_follow_kafka() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3]}
    proposed = {("t", 0): [3, 1], ("t", 1): [2, 3]}
    ongoing = {("u", 0): rc.Ongoing(replicas=[4, 1, 2], adding=[4], removing=[2])}
    moves = rc.move_map(ongoing, proposed, current)
    leader, follower = rc.throttled_replicas(moves)
    assert leader == {"t": "0:1,0:2,1:2,1:3", "u": "0:1,0:2"}
    assert follower == {"t": "0:3", "u": "0:4"}
    with pytest.raises(rc.ReassignError, match="with 0 replicas"):
        rc.move_map({}, {("x", 0): [1]}, {})


# ------------------------------------------------------------------ flows against a fake cluster

def write(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_generate_prints_current_and_proposal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeCluster([1, 2, 3, 4], {("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [1, 2], ("other", 0): [1]})
    monkeypatch.setattr(rc, "connect", lambda args: fake)
    f = write(tmp_path, "move.json", {"version": 1, "topics": [{"topic": "t"}]})
    assert main(["reassign", "--bootstrap-server", "h:1", "--generate",
                 "--topics-to-move-json-file", f, "--broker-list", "3,4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[1] == rc.format_reassignment_json({("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [1, 2]})
    assert lines[2] == ""
    assert lines[3] == "Proposed partition reassignment configuration"
    proposal = dict(rc.parse_reassignment(lines[4]))
    assert set(proposal) == {("t", 0), ("t", 1), ("t", 2)}
    assert all(sorted(r) == [3, 4] for r in proposal.values())
    assert Counter(r[0] for r in proposal.values()) in (Counter({3: 2, 4: 1}), Counter({3: 1, 4: 2}))
    assert fake.closed and not fake.altered and not fake.configs  # --generate changes nothing


def test_generate_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeCluster([1, 2], {("t", 0): [1, 2]})
    monkeypatch.setattr(rc, "connect", lambda args: fake)
    f = write(tmp_path, "move.json", {"version": 1, "topics": [{"topic": "t"}]})
    base = ["reassign", "--bootstrap-server", "h:1", "--generate", "--topics-to-move-json-file", f]
    assert main([*base, "--broker-list", "1,5"]) == 1
    assert "Unknown broker id(s) 5" in capsys.readouterr().err
    assert main([*base, "--broker-list", "1"]) == 1
    assert "Replication factor: 2 larger than available brokers: 1." in capsys.readouterr().err
    g = write(tmp_path, "missing.json", {"version": 1, "topics": [{"topic": "nope"}]})
    assert main(["reassign", "--bootstrap-server", "h:1", "--generate", "--topics-to-move-json-file", g,
                 "--broker-list", "1,2"]) == 1
    assert "nope" in capsys.readouterr().err
    assert main([*base[:-1], str(tmp_path / "absent.json"), "--broker-list", "1,2"]) == 1
    assert "absent.json" in capsys.readouterr().err


def test_execute_with_throttle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeCluster([1, 2, 3], {("t", 0): [1, 2], ("t", 1): [2, 3]})
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]}]}
    rc.execute(fake, json.dumps(plan), throttle=5000)
    out = capsys.readouterr().out
    assert "Current partition replica assignment\n\n" + rc.format_reassignment_json({("t", 0): [1, 2]}) in out
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert "The inter-broker throttle limit was set to 5000 B/s" in out
    assert out.rstrip().endswith("Successfully started partition reassignment for t-0")
    assert fake.altered == [{("t", 0): [3, 1]}]
    brokers, topics = fake.configs[0]
    assert brokers == {b: {rc.LEADER_RATE: "5000", rc.FOLLOWER_RATE: "5000"} for b in (1, 2, 3)}
    assert topics == {"t": {rc.LEADER_REPLICAS: "0:1,0:2", rc.FOLLOWER_REPLICAS: "0:3"}}


def test_execute_refusals() -> None:
    fake = FakeCluster([1, 2, 3], {("t", 0): [1, 2]}, {("t", 0): rc.Ongoing([3, 1, 2], [3], [2])})
    plan = json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 3]}]})
    with pytest.raises(rc.ReassignError, match="existing partition assignment"):
        rc.execute(fake, plan)
    rc.execute(fake, plan, additional=True)
    assert fake.altered == [{("t", 0): [1, 3]}]
    with pytest.raises(rc.ReassignError, match="Unknown broker id 9"):
        rc.execute(FakeCluster([1, 2], {("t", 0): [1, 2]}),
                   json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 9]}]}))
    with pytest.raises(rc.ReassignError, match="Unable to find partition: t-5"):
        rc.execute(FakeCluster([1, 2], {("t", 0): [1, 2]}),
                   json.dumps({"partitions": [{"topic": "t", "partition": 5, "replicas": [1]}]}))


def test_verify_clears_throttles_only_when_all_complete() -> None:
    plan = json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]},
                                      {"topic": "t", "partition": 1, "replicas": [2, 3]}]})
    busy = FakeCluster([1, 2, 3], {("t", 0): [3, 1, 2], ("t", 1): [2, 3]},
                       {("t", 0): rc.Ongoing([3, 1, 2], [3], [2])})
    assert rc.verify(busy, plan) == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is still in progress.",
        "Reassignment of partition t-1 is completed.",
    ]
    assert busy.configs == []
    done = FakeCluster([1, 2, 3], {("t", 0): [3, 1], ("t", 1): [2, 3]})
    lines = rc.verify(done, plan)
    assert lines[1:] == [
        "Reassignment of partition t-0 is completed.",
        "Reassignment of partition t-1 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic t",
    ]
    assert done.configs == [({b: {rc.LEADER_RATE: None, rc.FOLLOWER_RATE: None} for b in (1, 2, 3)},
                             {"t": {rc.LEADER_REPLICAS: None, rc.FOLLOWER_REPLICAS: None}})]
    assert rc.verify(done, plan, preserve_throttles=True)[-1] == "Reassignment of partition t-1 is completed."
    other = FakeCluster([1, 2, 3], {("t", 0): [1, 2], ("t", 1): [2, 3]})
    lines = rc.verify(other, plan)
    assert "There is no active reassignment of partition t-0, but replica set is 1,2 rather than 3,1." in lines
    assert other.configs == []


def test_list_and_cancel() -> None:
    ongoing = {("t", 0): rc.Ongoing([3, 1, 2], [3], [2]), ("u", 2): rc.Ongoing([1, 2], [], [])}
    fake = FakeCluster([1, 2, 3], {("t", 0): [3, 1, 2], ("u", 2): [1, 2]}, ongoing)
    assert rc.list_reassignments(fake) == [
        "Current partition reassignments:",
        "t-0: replicas: 3,1,2. adding: 3. removing: 2.",
        "u-2: replicas: 1,2.",
    ]
    assert rc.list_reassignments(FakeCluster([1], {})) == ["No partition reassignments found."]
    plan = json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]},
                                      {"topic": "u", "partition": 2, "replicas": [1, 2]}]})
    lines = rc.cancel(fake, plan)
    assert lines[0] == "Successfully cancelled partition reassignment for: t-0"
    assert fake.altered == [{("t", 0): None}]
    assert lines[1:] == ["Clearing broker-level throttles on brokers 1,2,3", "Clearing topic-level throttles on topics t,u"]
    idle = FakeCluster([1, 2, 3], {("t", 0): [1, 2]})
    assert rc.cancel(idle, plan, preserve_throttles=True) == ["None of the specified partition reassignments are active."]
    assert idle.altered == [] and idle.configs == []


@pytest.mark.parametrize("seed", range(5))
def test_round_robin_is_the_controllers_assignment(seed: int) -> None:
    from odradek.controller.assignment import assign_rack_unaware

    brokers = [1, 3, 4, 8, 9]
    assert rc.assign_replicas_to_brokers(23, 3, brokers, rng=random.Random(seed)) == assign_rack_unaware(
        brokers, 23, 3, rng=random.Random(seed)
    )
