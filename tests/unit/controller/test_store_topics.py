import json

import pytest

from odradek.controller.store import BadVersionError, LocalStore, NodeExistsError, NoNodeError, Op
from odradek.controller.topics import TopicError, TopicRegistry, validate_topic_name
from odradek.protocol import errors


def test_store_persists_and_versions(tmp_path) -> None:
    f = tmp_path / "m.json"
    s = LocalStore(f)
    s.create("/a/b", b"1", makepath=True)
    assert s.set("/a/b", b"2", 0) == 1
    with pytest.raises(BadVersionError):
        s.set("/a/b", b"3", 0)
    with pytest.raises(NodeExistsError):
        s.create("/a/b")
    s.create("/e", b"x", ephemeral=True)
    s2 = LocalStore(f)
    assert s2.get("/a/b") == (b"2", 1)
    assert s2.exists("/e") is None
    assert s2.children("/a") == ["b"]


def test_multi_is_atomic(tmp_path) -> None:
    s = LocalStore(tmp_path / "m.json")
    s.create("/x", b"")
    with pytest.raises(NoNodeError):
        s.multi([Op("create", "/y/z", b"1"), Op("set", "/missing", b"")])
    assert s.exists("/y/z") is None


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad/name", "sp ace", "ü", "evil\n", "a\n", "\n"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(TopicError) as e:
        validate_topic_name(name)
    assert e.value.error_code == errors.INVALID_TOPIC_EXCEPTION


def test_registry_lifecycle(tmp_path) -> None:
    s = LocalStore(tmp_path / "m.json")
    reg = TopicRegistry(s, lambda: [0])
    events = []
    reg.listeners.append(lambda ev, meta: events.append((ev, meta.name)))
    reg.load()
    meta = reg.create_topic("t.1", 3, 1, configs={"retention.ms": "1000"})
    assert [p.replicas for p in meta.partitions] == [[0], [0], [0]]
    with pytest.raises(TopicError) as e:
        reg.create_topic("t.1", 1, 1)
    assert e.value.error_code == errors.TOPIC_ALREADY_EXISTS
    with pytest.raises(TopicError) as e:
        reg.create_topic("t_1", 1, 1)
    assert e.value.error_code == errors.INVALID_TOPIC_EXCEPTION  # collides with t.1
    with pytest.raises(TopicError) as e:
        reg.create_topic("r", 1, 2)
    assert e.value.error_code == errors.INVALID_REPLICATION_FACTOR
    with pytest.raises(TopicError) as e:
        reg.create_topic("c", 1, 1, configs={"retention.ms": "x"})
    assert e.value.error_code == errors.INVALID_CONFIG
    reg.create_partitions("t.1", 5, None)
    reg.set_topic_configs("t.1", {"cleanup.policy": "compact"})
    # reload from disk
    reg2 = TopicRegistry(LocalStore(tmp_path / "m.json"), lambda: [0])
    reg2.load()
    m2 = reg2.get("t.1")
    assert m2 is not None and len(m2.partitions) == 5 and m2.topic_id == meta.topic_id
    assert m2.configs == {"cleanup.policy": "compact"}
    state = json.loads(s.get("/brokers/topics/t.1/partitions/4/state")[0])
    assert state["leader"] == 0 and state["isr"] == [0]
    reg.delete_topic("t.1")
    assert reg.get("t.1") is None and s.exists("/brokers/topics/t.1") is None
    assert events == [("created", "t.1"), ("partitions", "t.1"), ("config", "t.1"), ("deleted", "t.1")]


def test_registry_ignores_an_illegal_name_left_in_the_store(tmp_path) -> None:
    s = LocalStore(tmp_path / "m.json")
    reg = TopicRegistry(s, lambda: [0])
    reg.load()
    reg.create_topic("good", 1, 1)
    # what a version with the old prefix-match name check wrote
    data, _ = s.get("/brokers/topics/good")
    s.create("/brokers/topics/evil\n", data)
    reg2 = TopicRegistry(s, lambda: [0])
    reg2.load()
    assert set(reg2.topics) == {"good"}


@pytest.mark.parametrize("validate_only", [True, False])
def test_partition_limits_refuse_before_planning(tmp_path, monkeypatch, validate_only: bool) -> None:
    """2^31-1 partitions are refused by comparison alone: the replica assignment is never asked for."""
    from odradek.controller import topics as topics_mod

    reg = TopicRegistry(LocalStore(tmp_path / "m.json"), lambda: [0])
    reg.load()
    reg.create_topic("small", 3, 1)
    planned: list[int] = []
    real = topics_mod.assign_replicas
    monkeypatch.setattr(topics_mod, "assign_replicas", lambda *a, **kw: planned.append(a[2]) or real(*a, **kw))
    for call in (lambda: reg.create_topic("huge", 2**31 - 1, 1, validate_only=validate_only),
                 lambda: reg.create_topic("huge", -1, -1, {p: [0] for p in range(10_001)}, validate_only=validate_only),
                 lambda: reg.create_partitions("small", 2**31 - 1, None, validate_only=validate_only),
                 lambda: reg.create_topic("over", 8, 1, max_partitions=10, validate_only=validate_only),
                 lambda: reg.create_partitions("small", 11, None, max_partitions=10, validate_only=validate_only)):
        with pytest.raises(TopicError) as e:
            call()
        assert e.value.error_code == errors.POLICY_VIOLATION
    assert planned == []
    # exactly at the bounds: allowed
    assert len(reg.create_topic("edge", 10_000, 1, validate_only=True).partitions) == 10_000
    reg.create_topic("fits", 7, 1, max_partitions=10, validate_only=validate_only)
    assert planned == [10_000, 7]
