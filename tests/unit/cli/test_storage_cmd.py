"""``odradek storage`` (Kafka's kafka-storage): format, info, random-uuid, with Kafka 4.4's messages. What
Kafka's own tool writes for the same flags is compared in tests/judges/test_kraft_storage.py."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.schema.voters_record.v0.data import VotersRecord

from odradek.cli.main import main
from odradek.cli.storage_cmd import StorageToolError, format_storage, parse_dynamic_voters, storage_info
from odradek.metadata.batches import records_of
from odradek.metadata.image import ScramCredential
from odradek.metadata.log_store import PARTITION_DIR, MetadataLog, read_snapshot_file
from odradek.security import scram
from odradek.server import meta_properties as mp

CID = "AAAAAAAAAAAAAAAAAAAAAA"
OTHER = "BAAAAAAAAAAAAAAAAAAAAA"
BOOTSTRAP = "00000000000000000000-0000000000.checkpoint"


def props(base: Path, *, dynamic: bool = False, roles: str = "broker,controller",
          extra: dict[str, str] | None = None) -> dict[str, str]:
    p = {
        "process.roles": roles,
        "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:39092,CONTROLLER://127.0.0.1:39093",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": f"{base}/data1,{base}/data2",
        "metadata.log.dir": f"{base}/meta",
    }
    if dynamic:
        p["controller.quorum.bootstrap.servers"] = "127.0.0.1:39093"
    else:
        p["controller.quorum.voters"] = "1@127.0.0.1:39093"
    p.update(extra or {})
    return {k: v for k, v in p.items() if v != ""}


def run_format(p: dict[str, str], cluster_id: str = CID, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    rc = format_storage(p, cluster_id, out=out, now_ms=1_700_000_000_000, **kw)
    return rc, out.getvalue()


def test_format_static_quorum(tmp_path: Path) -> None:
    rc, out = run_format(props(tmp_path))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("Bootstrap metadata: BootstrapMetadata(records=[ApiMessageAndVersion(FeatureLevelRecord("
                               "name='metadata.version', featureLevel=33) at version 0), ")
    assert lines[0].endswith("], metadataVersionLevel=33, source=format command)")
    assert lines[1:] == [f"Formatting data directory {tmp_path}/data1 with metadata.version 4.4-IV2.",
                         f"Formatting data directory {tmp_path}/data2 with metadata.version 4.4-IV2.",
                         f"Formatting metadata directory {tmp_path}/meta with metadata.version 4.4-IV2."]
    ids = set()
    for d in ("data1", "data2", "meta"):
        meta = mp.load(tmp_path / d)
        assert meta is not None and (meta.version, meta.cluster_id, meta.node_id) == (1, CID, 1)
        assert meta.directory_id is not None and len(meta.directory_id) == 22
        ids.add(meta.directory_id)
        text = (tmp_path / d / "meta.properties").read_text().splitlines()
        assert text[2:] == ["node.id=1", f"directory.id={meta.directory_id}", "version=1", f"cluster.id={CID}"]
    assert len(ids) == 3
    assert sorted(p.name for p in (tmp_path / "data1").iterdir()) == ["meta.properties"]
    batches = read_snapshot_file(tmp_path / "meta" / PARTITION_DIR / BOOTSTRAP)
    controls = [type(e.control) for b in batches for e in b.entries if e.control is not None]
    assert KRaftVersionRecord not in controls and VotersRecord not in controls  # kraft.version 0
    names = [(r.record.name, r.record.feature_level) for r in records_of(batches)]  # type: ignore[attr-defined]
    assert names == [("metadata.version", 33), ("eligible.leader.replicas.version", 1), ("group.version", 1),
                     ("share.version", 2), ("streams.version", 1), ("transaction.version", 2)]
    # the bootstrap snapshot is where a metadata log starts
    image = MetadataLog.open(tmp_path / "meta", now_ms=0).load()
    assert image.metadata_version == 33 and image.offset == -1


def test_format_standalone_writes_the_voter_set(tmp_path: Path) -> None:
    rc, out = run_format(props(tmp_path, dynamic=True), standalone=True, release_version="3.9-IV0")
    assert rc == 0 and f"Formatting dynamic metadata voter directory {tmp_path}/meta with metadata.version 3.9-IV0." in out
    meta = mp.load(tmp_path / "meta")
    assert meta is not None and meta.directory_id is not None
    batches = read_snapshot_file(tmp_path / "meta" / PARTITION_DIR / BOOTSTRAP)
    header, kraft, voters = (e.control for e in batches[0].entries)
    assert isinstance(header, SnapshotHeaderRecord) and int(header.last_contained_log_timestamp) == 1_700_000_000_000
    assert isinstance(kraft, KRaftVersionRecord) and int(kraft.k_raft_version) == 1
    assert isinstance(voters, VotersRecord)
    [v] = voters.voters
    assert int(v.voter_id) == 1 and v.voter_directory_id == mp.uuid_of(meta.directory_id)
    assert [(e.name, e.host, int(e.port)) for e in v.endpoints] == [("CONTROLLER", "127.0.0.1", 39093)]
    assert [r.record for r in records_of(batches)][0].feature_level == 21  # type: ignore[attr-defined]


def test_format_initial_controllers_takes_the_voters_directory_id(tmp_path: Path) -> None:
    voters = "1@127.0.0.1:39093:JEXY6aqzQY-32P5TStzaFg,2@[::1]:39094:MvDxzVmcRsaTz33bUuRU6A"
    rc, _ = run_format(props(tmp_path, dynamic=True), initial_controllers=voters)
    assert rc == 0
    meta = mp.load(tmp_path / "meta")
    assert meta is not None and meta.directory_id == "JEXY6aqzQY-32P5TStzaFg"
    parsed = parse_dynamic_voters(voters)
    assert parsed[2].host == "::1" and parsed[2].port == 39094


def test_format_no_initial_controllers_and_a_broker(tmp_path: Path) -> None:
    rc, _ = run_format(props(tmp_path / "n", dynamic=True), no_initial_controllers=True)
    batches = read_snapshot_file(tmp_path / "n" / "meta" / PARTITION_DIR / BOOTSTRAP)
    controls = [type(e.control).__name__ for e in batches[0].entries]
    assert rc == 0 and controls == ["SnapshotHeaderRecord", "KRaftVersionRecord"]
    # a broker-only node: meta.properties everywhere, no bootstrap snapshot (only a controller writes one)
    rc, out = run_format(props(tmp_path / "b", dynamic=True, roles="broker"))
    assert rc == 0 and not (tmp_path / "b" / "meta" / PARTITION_DIR).exists()
    assert mp.load(tmp_path / "b" / "meta") is not None


def test_format_refuses_a_formatted_directory_unless_ignore_formatted(tmp_path: Path) -> None:
    p = props(tmp_path)
    assert run_format(p)[0] == 0
    before = {d: (tmp_path / d / "meta.properties").read_bytes() for d in ("data1", "data2", "meta")}
    with pytest.raises(StorageToolError, match=rf"^Log directory {tmp_path}/data1 is already formatted\. Use "
                                              r"--ignore-formatted to ignore this directory and format the others\.$"):
        run_format(p)
    rc, out = run_format(p, ignore_formatted=True)
    assert (rc, out) == (0, "All of the log directories are already formatted.\n")
    # a new log dir beside formatted ones: only it is formatted
    p["log.dirs"] += f",{tmp_path}/data3"
    rc, out = run_format(p, ignore_formatted=True)
    assert rc == 0 and out.splitlines()[1:] == [f"Formatting data directory {tmp_path}/data3 with metadata.version "
                                                "4.4-IV2."]
    assert {d: (tmp_path / d / "meta.properties").read_bytes() for d in ("data1", "data2", "meta")} == before


def test_format_refuses_another_cluster_or_node_even_with_ignore_formatted(tmp_path: Path) -> None:
    p = props(tmp_path)
    run_format(p)
    with pytest.raises(StorageToolError, match=rf"^Invalid cluster.id in: {tmp_path}/data1/meta.properties\. "
                                              rf"Expected {OTHER}, but read {CID}$"):
        run_format(p, OTHER, ignore_formatted=True)
    mp.write_v1(tmp_path / "data2", CID, 7, mp.random_uuid())
    with pytest.raises(StorageToolError, match="Stored node id 7 doesn't match previous node id 1"):
        run_format(p, ignore_formatted=True)


def test_a_missing_metadata_log_dir_is_the_first_log_dir(tmp_path: Path) -> None:
    p = props(tmp_path, extra={"metadata.log.dir": ""})
    assert "metadata.log.dir" not in p
    rc, out = run_format(p)
    assert rc == 0 and f"Formatting metadata directory {tmp_path}/data1 " in out
    assert (tmp_path / "data1" / PARTITION_DIR / BOOTSTRAP).is_file()
    assert not (tmp_path / "meta").exists()
    # a metadata.log.dir that does not exist yet is made
    rc, _ = run_format(props(tmp_path / "x", extra={"metadata.log.dir": f"{tmp_path}/x/deep/meta"}))
    assert rc == 0 and (tmp_path / "x" / "deep" / "meta" / PARTITION_DIR / BOOTSTRAP).is_file()


@pytest.mark.parametrize(("kw", "p_extra", "message"), [
    ({}, {"dynamic": True}, "Because controller.quorum.voters is not set on this controller, you must specify one of "
                            "the following: --standalone, --initial-controllers, or --no-initial-controllers."),
    ({"standalone": True}, {}, "You cannot specify controller.quorum.voters and format the node with "
                               "--initial-controllers or --standalone."),
    ({"standalone": True}, {"dynamic": True, "roles": "broker"}, "You can only use --standalone on a controller."),
    ({"features": ["metadata.version=20"], "release_version": "3.8-IV0"}, {},
     "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."),
    ({"features": ["foo.version=1"]}, {}, "Unsupported feature: foo.version. Supported features are: "
                                          "eligible.leader.replicas.version, group.version, kraft.version, "
                                          "share.version, streams.version, transaction.version"),
    ({"features": ["kraft.version=1"]}, {}, "Cannot set kraft.version to 1 unless controller.quorum.voters is empty"),
    ({"features": ["group.version=5"]}, {}, "No feature:group.version with feature level 5"),
    ({"features": ["eligible.leader.replicas.version=1"], "release_version": "3.8-IV0"}, {},
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"),
    ({"release_version": "3.2-IV0"}, {}, "Unknown metadata.version '3.2-IV0'. Supported metadata.version are: 3.3-IV3, "),
    ({"features": ["group.version"]}, {}, "Can't parse feature=level string group.version: equals sign not found."),
    ({"initial_controllers": "1@127.0.0.1:39093"}, {"dynamic": True}, "No colon following port could be found."),
    ({"initial_controllers": "x"}, {"dynamic": True}, "No @ found in dynamic voter string."),
    ({"initial_controllers": "1@h:1:notauuid"}, {"dynamic": True}, "Failed to parse directory ID in dynamic voter"),
    ({}, {"roles": " "}, "The kafka configuration file appears to be for a legacy cluster."),
], ids=lambda v: str(v)[:40])
def test_format_refusals(tmp_path: Path, kw: dict[str, Any], p_extra: dict[str, Any], message: str) -> None:
    p = props(tmp_path, **p_extra)
    with pytest.raises(StorageToolError) as e:
        run_format(p, **kw)
    assert str(e.value).startswith(message), str(e.value)
    assert not (tmp_path / "meta").exists() and not (tmp_path / "data1").exists()  # nothing written


def test_format_config_errors(tmp_path: Path) -> None:
    p = props(tmp_path)
    del p["process.roles"]
    with pytest.raises(StorageToolError, match='^Missing required configuration "process.roles" which has no'):
        run_format(p)
    p = props(tmp_path)
    del p["controller.quorum.voters"]
    with pytest.raises(StorageToolError, match="either controller.quorum.bootstrap.servers must contain"):
        run_format(p)
    with pytest.raises(StorageToolError, match="the node id 2 must be included in the set of voters"):
        run_format(props(tmp_path, extra={"node.id": "2"}))


def test_info(tmp_path: Path) -> None:
    p = props(tmp_path)
    out = io.StringIO()
    assert storage_info(p, out=out) == 1
    assert out.getvalue() == (f"Found problems:\n  {tmp_path}/data1 does not exist\n  {tmp_path}/data2 does not exist\n"
                              f"  {tmp_path}/meta does not exist\n\n")
    run_format(p)
    out = io.StringIO()
    assert storage_info(p, out=out) == 0
    meta = mp.load(tmp_path / "data1")
    assert meta is not None
    assert out.getvalue() == (f"Found log directories:\n  {tmp_path}/data1\n  {tmp_path}/data2\n  {tmp_path}/meta\n\n"
                              f"Found metadata: {{cluster.id={CID}, directory.id={meta.directory_id}, node.id=1, "
                              "version=1}\n\n")
    # another cluster's directory among them
    mp.write_v1(tmp_path / "data2", OTHER, 1, mp.random_uuid())
    out = io.StringIO()
    assert storage_info(p, out=out) == 1
    assert out.getvalue().endswith("Found problem:\n  Mismatched cluster IDs between storage directories.\n\n")


def test_info_of_zookeeper_mode_directories(tmp_path: Path) -> None:
    """A ZooKeeper-mode broker's log dir (meta.properties version 0, as the broker writes it) is fine for a
    configuration without process.roles, and a problem for a KRaft one."""
    (tmp_path / "zk").mkdir()
    mp.write_missing([tmp_path / "zk"], 3, CID)
    zk = {"log.dirs": f"{tmp_path}/zk", "broker.id": "3"}
    out = io.StringIO()
    assert storage_info(zk, out=out) == 0
    assert out.getvalue() == f"Found log directory:\n  {tmp_path}/zk\n\nFound metadata: {{broker.id=3, cluster.id={CID}, " \
                             "version=0}\n\n"
    kraft = props(tmp_path, extra={"log.dirs": f"{tmp_path}/zk", "metadata.log.dir": f"{tmp_path}/zk", "node.id": "3",
                                   "controller.quorum.voters": "3@127.0.0.1:39093"})
    out = io.StringIO()
    assert storage_info(kraft, out=out) == 1
    assert "appears to be for a cluster in KRaft mode, but the directories are formatted for legacy mode." in out.getvalue()


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "random-uuid"]) == 0
    uid = capsys.readouterr().out.strip()
    assert len(uid) == 22 and not uid.startswith("-") and mp.uuid_of(uid)
    cfg = tmp_path / "server.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props(tmp_path, dynamic=True).items()))
    assert main(["storage", "format", "-t", CID, "-c", str(cfg)]) == 1
    assert capsys.readouterr().err.startswith("Because controller.quorum.voters is not set on this controller")
    assert main(["storage", "format", "-t", CID, "-c", str(cfg), "--standalone"]) == 0
    assert "Formatting dynamic metadata voter directory" in capsys.readouterr().out
    assert main(["storage", "info", "-c", str(cfg)]) == 0
    assert main(["storage", "version-mapping", "-r", "4.0-IV3"]) == 0
    assert capsys.readouterr().out.splitlines()[-7:] == [
        "metadata.version=25 (4.0-IV3)", "eligible.leader.replicas.version=0", "group.version=1", "kraft.version=1",
        "share.version=0", "streams.version=0", "transaction.version=2"]
    with pytest.raises(SystemExit):
        main(["storage", "format", "-c", str(cfg), "--standalone", "--no-initial-controllers", "-t", CID])


def test_add_scram(tmp_path: Path) -> None:
    rc, out = run_format(props(tmp_path), add_scram=[
        'SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]',
        'SCRAM-SHA-256=[name=bob,password=bob-secret,salt="c2FsdA=="]', "SCRAM-SHA-256=[name=carol,password=x]"])
    assert rc == 0
    assert "UserScramCredentialRecord(name='alice', mechanism=2, salt=[55, 113], storedKey=[" in out.splitlines()[0]
    image = MetadataLog.open(tmp_path / "meta", now_ms=0).load()
    alice, bob, carol = image.scram[(2, "alice")], image.scram[(1, "bob")], image.scram[(1, "carol")]
    assert (alice.salt, alice.iterations) == (b"7q", 8192)
    assert alice.stored_key == scram.credential_from_salted("SCRAM-SHA-512", b"`!", b"7q", 8192).stored_key
    assert bob == ScramCredential(*vars(scram.make_credential("SCRAM-SHA-256", "bob-secret", 4096, b"salt")).values())
    assert carol.salt.isalnum() and carol.iterations == 4096  # Kafka's salt: a random number in base 36


@pytest.mark.parametrize(("argument", "message"), [
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
    ("SCRAM-SHA-256=name=a]", "Expected configuration string to start with ["),
    ("SCRAM-SHA-256=[name=a", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,saltedpassword=YCE=]", "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=100]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=99999]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512"),
    ("SCRAM-SHA-256=[name=a,password=b,foo=1]", "Unknown SCRAM configurations: foo"),
    ("SCRAM-SHA-256=[name=a,password=b,salt=!!]", "Failed to decode given salt: !!"),
    ("SCRAM-SHA-256=[name=a,password]", "No equals sign found in SCRAM component: password"),
])
def test_add_scram_refusals(tmp_path: Path, argument: str, message: str) -> None:
    with pytest.raises(StorageToolError) as e:
        run_format(props(tmp_path), add_scram=[argument])
    assert str(e.value) == message
    with pytest.raises(StorageToolError, match=r"^SCRAM is only supported in metadata.version 3.5-IV2 or later\.$"):
        run_format(props(tmp_path), add_scram=["SCRAM-SHA-256=[name=a,password=b]"], release_version="3.5-IV1")


def test_a_broker_given_the_kraft_settings_names_them_as_not_implemented(tmp_path: Path) -> None:
    """The settings the storage tool reads are accepted by the broker (Kafka's names) but not acted on until
    the KRaft quorum exists: the start-up warning names each."""
    from odradek.config_check import check_startup

    settings = {**props(tmp_path), "metadata.max.retention.bytes": "1048576",
                "metadata.log.max.snapshot.interval.ms": "1000"}
    del settings["listeners"]
    warnings = check_startup(settings)
    for name in ("process.roles", "node.id", "controller.quorum.voters", "controller.listener.names",
                 "metadata.log.dir", "metadata.max.retention.bytes", "metadata.log.max.snapshot.interval.ms"):
        named = [w for w in warnings if f"'{name}'" in w]
        assert (name == "node.id") != bool(named and "not implemented, ignored" in named[0]), (name, warnings)
