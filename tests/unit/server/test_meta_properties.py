"""server/meta_properties.py: ZooKeeper mode's version 0 stays as it was; KRaft's version 1 is read and written."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.config import ConfigError
from odradek.server import meta_properties as mp

CID = "AAAAAAAAAAAAAAAAAAAAAA"


def test_zookeeper_mode_version_0_is_unchanged(tmp_path: Path) -> None:
    mp.write_missing([tmp_path], 4, CID)
    lines = (tmp_path / "meta.properties").read_text().splitlines()
    assert lines[2:] == ["version=0", "broker.id=4", "node.id=4", f"cluster.id={CID}"]
    meta = mp.load(tmp_path)
    assert meta == mp.MetaProperties(0, CID, 4, None)
    assert meta.as_properties() == {"version": "0", "cluster.id": CID, "broker.id": "4"}
    assert mp.check_broker_id([tmp_path], 4)


def test_kraft_version_1(tmp_path: Path) -> None:
    did = mp.random_uuid()
    mp.write_v1(tmp_path / "new", CID, 2, did)
    lines = (tmp_path / "new" / "meta.properties").read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#") and lines[1].endswith(lines[1][-4:])
    assert lines[2:] == ["node.id=2", f"directory.id={did}", "version=1", f"cluster.id={CID}"]
    meta = mp.load(tmp_path / "new")
    assert meta == mp.MetaProperties(1, CID, 2, did)
    assert meta.as_properties() == {"version": "1", "cluster.id": CID, "node.id": "2", "directory.id": did}
    # the broker's ZooKeeper-mode checks read it too (node.id is the broker id)
    assert mp.check_broker_id([tmp_path / "new"], 2)
    with pytest.raises(ConfigError, match="doesn't match stored broker.id 2"):
        mp.check_broker_id([tmp_path / "new"], 3)


def test_unreadable_version_1_files(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(f"version=1\ncluster.id={CID}\n")
    with pytest.raises(ConfigError, match="node.id was not found"):
        mp.load(tmp_path)
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=1\n")
    with pytest.raises(ConfigError, match="cluster.id was not found"):
        mp.load(tmp_path)
    (tmp_path / "meta.properties").write_text("version=2\nnode.id=1\n")
    with pytest.raises(ConfigError, match="unknown meta.properties version 2"):
        mp.load(tmp_path)
    assert mp.load(tmp_path / "none") is None


def test_uuids_as_kafka_prints_them() -> None:
    u = uuid.UUID("6a8e0f3c-1d2b-4c5d-9e7f-0a1b2c3d4e5f")
    assert mp.uuid_text(u) == "ao4PPB0rTF2efwobLD1OXw"  # Kafka's Uuid.toString of the same bits
    assert mp.uuid_of("ao4PPB0rTF2efwobLD1OXw") == u
    for bad in ("", "short", "ao4PPB0rTF2efwobLD1OXw=", "!!!!PB0rTF2efwobLD1OXw"):
        with pytest.raises(ValueError):
            mp.uuid_of(bad)
    drawn = {mp.random_uuid() for _ in range(200)}
    assert len(drawn) == 200 and not any(d.startswith("-") for d in drawn)
