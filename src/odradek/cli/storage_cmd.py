"""``odradek storage``: Kafka's ``kafka-storage`` (kafka.tools.StorageTool and org.apache.kafka.metadata.storage.
Formatter), with its flags, output and messages as Kafka 4.4 prints them.

* ``random-uuid``: a new id (a cluster id for ``format -t``), as Kafka's ``Uuid.randomUuid()`` prints one.
* ``format -t CLUSTER_ID -c server.properties [--standalone | --initial-controllers V,... |
  --no-initial-controllers] [--release-version R | --feature NAME=LEVEL ...] [--ignore-formatted]``:
  every directory of ``log.dirs`` (or ``log.dir``) and ``metadata.log.dir`` (default: the first log dir)
  without a ``meta.properties`` gets one, version 1 (cluster.id, node.id, a new directory.id each, KIP-858;
  a voter's metadata directory the id given in ``--initial-controllers``); on a controller, the metadata
  directory first gets the bootstrap snapshot ``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``:
  SnapshotHeader, with a dynamic quorum (KIP-853: no ``controller.quorum.voters`` and one of the three quorum
  flags) the KRaftVersionRecord (kraft.version 1) and, for ``--standalone`` / ``--initial-controllers``, the
  VotersRecord, then the FeatureLevelRecords of the chosen metadata.version and the UserScramCredentialRecords
  of ``--add-scram`` (Kafka's ScramParser), then SnapshotFooter. A directory
  formatted already is refused (``Log directory X is already formatted. Use --ignore-formatted ...``) unless
  ``--ignore-formatted``; one formatted for another cluster or node always is.
* ``info -c server.properties``: what each directory holds, and its problems (exit 1 when there are any).
* ``version-mapping [--release-version R]``: the feature levels a release version starts with.

Exit codes are Kafka's: 0, or 1 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0.data import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kio.static.primitive import i16, u16

from odradek.config import ConfigError, parse_listeners, read_properties
from odradek.metadata import features as ft
from odradek.metadata.batches import ControlMessage
from odradek.metadata.log_store import BOOTSTRAP_SNAPSHOT, PARTITION_DIR, snapshot_bytes, write_snapshot_file
from odradek.metadata.records import FeatureLevelRecord, RecordAndVersion, UserScramCredentialRecord
from odradek.security import scram
from odradek.server import meta_properties as mp


class StorageToolError(Exception):
    """Kafka's TerseFailure / FormatterException: one line on stderr, exit code 1."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("storage", help="format and inspect KRaft log directories (kafka-storage.sh)",
                       description="The Kafka storage tool.")
    ops = p.add_subparsers(dest="storage_command", required=True)
    info = ops.add_parser("info", help="Get information about the Kafka log directories on this node.")
    info.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")
    info.set_defaults(func=run_info)
    fmt = ops.add_parser("format", help="Format the Kafka log directories on this node.")
    fmt.add_argument("--config", "-c", required=True, help="The Kafka configuration file to use.")
    fmt.add_argument("--cluster-id", "-t", required=True, help="The cluster ID to use.")
    fmt.add_argument("--add-scram", "-S", action="append",
                     help="A SCRAM_CREDENTIAL to add to the __cluster_metadata log e.g. "
                          "'SCRAM-SHA-256=[name=alice,password=alice-secret]' "
                          "'SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"N3E=\",saltedpassword=\"YCE=\"]'")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true",
                     help="When this option is passed, the format command will skip over already formatted "
                          "directories rather than failing.")
    fmt.add_argument("--release-version", "-r",
                     help=f"The release version to use for the initial feature settings. The minimum is "
                          f"{ft.NAME_OF[ft.MINIMUM_VERSION]}; the default is {ft.NAME_OF[ft.LATEST_PRODUCTION]}")
    fmt.add_argument("--feature", "-f", action="append",
                     help="The setting to use for a specific feature, in feature=level format. For example: "
                          "`kraft.version=1`.")
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true",
                        help="Used to initialize a controller as a single-node dynamic quorum.")
    quorum.add_argument("--no-initial-controllers", "-N", action="store_true",
                        help="Used to initialize a server without a dynamic quorum topology.")
    quorum.add_argument("--initial-controllers", "-I",
                        help="Used to initialize a server with a specific dynamic quorum topology. The argument "
                             "is a comma-separated list of id@hostname:port:directory. The same values must be "
                             "used to format all nodes.")
    fmt.set_defaults(func=run_format)
    vm = ops.add_parser("version-mapping", help="Look up the corresponding features for a given metadata version.")
    vm.add_argument("--release-version", "-r")
    vm.set_defaults(func=run_version_mapping)
    ru = ops.add_parser("random-uuid", help="Print a random UUID.")
    ru.set_defaults(func=run_random_uuid)


def _fail(err: Exception) -> int:
    print(str(err), file=sys.stderr)
    return 1


def run_random_uuid(args: argparse.Namespace) -> int:
    print(mp.random_uuid())
    return 0


def run_version_mapping(args: argparse.Namespace) -> int:
    release = args.release_version or ft.NAME_OF[ft.LATEST_PRODUCTION]
    try:
        mv = ft.metadata_version_of(release)
    except ft.FeatureError:
        return _fail(StorageToolError(f"Unknown release version '{release}'. Supported versions are: "
                                      f"{ft.NAME_OF[ft.MINIMUM_VERSION]} to {ft.NAME_OF[ft.LATEST_PRODUCTION]}"))
    print(f"metadata.version={mv} ({release})")
    for f in ft.FEATURES.values():
        print(f"{f.name}={f.default_level(mv)}")
    return 0


# ------------------------------------------------------------------------------------------ the node's config


@dataclass(frozen=True)
class NodeConfig:
    """What the storage tool reads of server.properties (Kafka's KafkaConfig, the part StorageTool uses)."""

    roles: frozenset[str]
    node_id: int
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    voters: str
    bootstrap_servers: str
    controller_listener_names: tuple[str, ...]
    controller_listeners: tuple[tuple[str, str, int], ...]  # effectiveAdvertisedControllerListeners

    @property
    def directories(self) -> list[str]:
        """StorageTool.configToLogDirectories: the log dirs and the metadata log dir, sorted, once each."""
        return sorted({*self.log_dirs, self.metadata_log_dir})


def _missing(name: str) -> StorageToolError:
    return StorageToolError(f'Missing required configuration "{name}" which has no default value.')


def node_config(props: Mapping[str, str], *, require_kraft: bool = True) -> NodeConfig:
    roles_raw = props.get("process.roles", "")
    roles = frozenset(r.strip() for r in roles_raw.split(",") if r.strip())
    if require_kraft and "process.roles" not in props:
        raise _missing("process.roles")
    bad = roles - {"broker", "controller"}
    if bad:
        raise StorageToolError(f"Invalid value {roles_raw} for configuration process.roles: Unknown process role "
                               f"'{sorted(bad)[0]}' (only 'broker' and 'controller' are allowed roles)")
    raw_id = props.get("node.id") or props.get("broker.id")
    if raw_id is None:
        if require_kraft:
            raise _missing("node.id")
        raw_id = "-1"
    try:
        node_id = int(raw_id)
    except ValueError:
        raise StorageToolError(f"Invalid value {raw_id} for configuration node.id: Not a number of type INT") from None
    dirs_raw = props.get("log.dirs") or props.get("log.dir") or "./odradek-data"
    log_dirs = tuple(d.strip() for d in dirs_raw.split(",") if d.strip())
    metadata_log_dir = (props.get("metadata.log.dir") or "").strip() or log_dirs[0]
    voters = props.get("controller.quorum.voters", "").strip()
    bootstrap = props.get("controller.quorum.bootstrap.servers", "").strip()
    names_raw = props.get("controller.listener.names")
    names = tuple(n.strip() for n in (names_raw or "").split(",") if n.strip())
    controller_listeners: tuple[tuple[str, str, int], ...] = ()
    if require_kraft and roles:
        if names_raw is None:
            raise _missing("controller.listener.names")
        if not voters and not bootstrap:
            raise StorageToolError("If using process.roles, either controller.quorum.bootstrap.servers must contain "
                                   "the set of bootstrap controllers or controller.quorum.voters must contain a "
                                   "parseable set of controllers.")
        if node_id < 0:
            raise StorageToolError(f"Invalid value {node_id} for configuration node.id: Value must be at least 0")
        if "controller" in roles and voters:
            ids = set()
            for v in voters.split(","):
                head = v.strip().partition("@")[0]
                if head.isdigit():
                    ids.add(int(head))
            if node_id not in ids:
                raise StorageToolError(f"requirement failed: If process.roles contains the 'controller' role, the "
                                       f"node id {node_id} must be included in the set of voters "
                                       f"controller.quorum.voters=Set({', '.join(map(str, sorted(ids)))})")
        try:
            advertised = parse_listeners(props["advertised.listeners"]) if props.get("advertised.listeners") else []
            listeners = parse_listeners(props.get("listeners", "PLAINTEXT://:9092"))
        except ConfigError as e:
            raise StorageToolError(str(e)) from None
        chosen = []
        for name in names:  # KafkaConfig.effectiveAdvertisedControllerListeners
            found = [lst for lst in advertised if lst[0] == name] or [lst for lst in listeners if lst[0] == name]
            chosen += found
        controller_listeners = tuple(chosen)
    return NodeConfig(roles, node_id, log_dirs, metadata_log_dir, voters, bootstrap, names, controller_listeners)


# ------------------------------------------------------------------------------------------ dynamic voters


@dataclass(frozen=True)
class DynamicVoter:
    """One voter of ``--initial-controllers`` (Kafka's DynamicVoter): id@host:port:directory-id."""

    node_id: int
    host: str
    port: int
    directory_id: str


def parse_dynamic_voter(text: str) -> DynamicVoter:
    """DynamicVoter.parse, with its messages."""
    text = text.strip()
    at = text.find("@")
    if at < 0:
        raise StorageToolError("No @ found in dynamic voter string.")
    if at == 0:
        raise StorageToolError("Invalid @ at beginning of dynamic voter string.")
    try:
        node_id = int(text[:at])
    except ValueError:
        raise StorageToolError("Failed to parse node id in dynamic voter string.") from None
    if node_id < 0:
        raise StorageToolError("Invalid negative node id " + str(node_id) + " in dynamic voter string.")
    rest = text[at + 1:]
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise StorageToolError("Hostname began with left bracket, but no right bracket was found.")
        host, rest = rest[1:close], rest[close + 1:]
        if not rest.startswith(":"):
            raise StorageToolError("No colon following hostname could be found.")
        rest = rest[1:]
    else:
        colon = rest.find(":")
        if colon < 0:
            raise StorageToolError("No colon following hostname could be found.")
        host, rest = rest[:colon], rest[colon + 1:]
    colon = rest.find(":")
    if colon < 0:
        raise StorageToolError("No colon following port could be found.")
    try:
        port = int(rest[:colon])
    except ValueError:
        raise StorageToolError("Failed to parse port in dynamic voter string.") from None
    if not 0 <= port <= 65535:
        raise StorageToolError(f"Invalid port {port} in dynamic voter string.")
    directory = rest[colon + 1:]
    try:
        mp.uuid_of(directory)
    except ValueError:
        raise StorageToolError("Failed to parse directory ID in dynamic voter string.") from None
    return DynamicVoter(node_id, host, port, directory)


def parse_dynamic_voters(text: str) -> dict[int, DynamicVoter]:
    """DynamicVoters.parse: a comma-separated list, each node id once."""
    voters: dict[int, DynamicVoter] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        v = parse_dynamic_voter(item)
        if v.node_id in voters:
            raise StorageToolError(f"Node id {v.node_id} was specified more than once.")
        voters[v.node_id] = v
    if not voters:
        raise StorageToolError("No voters given.")
    return voters


def voters_record(voters: Mapping[int, DynamicVoter], listener_name: str) -> VotersRecord:
    """DynamicVoters.toVoterSet(controller listener) as the VotersRecord of the bootstrap snapshot."""
    return VotersRecord(version=i16(0), voters=tuple(
        Voter(voter_id=BrokerId(v.node_id), voter_directory_id=mp.uuid_of(v.directory_id),
              endpoints=(Endpoint(name=listener_name, host=v.host, port=u16(v.port)),),
              k_raft_version_feature=KRaftVersionFeature(min_supported_version=i16(0), max_supported_version=i16(1)))
        for v in sorted(voters.values(), key=lambda v: v.node_id)))


# ------------------------------------------------------------------------------------------ --add-scram


def _scram_component(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep:
        raise StorageToolError(f"No equals sign found in SCRAM component: {item}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise StorageToolError(f"Failed to decode given {what}: {value}") from None


def _kafka_salt() -> bytes:
    """ScramFormatter.secureRandomBytes: a random 130-bit number in base 36, as ASCII."""
    n = secrets.randbits(130)
    digits = ""
    while True:
        n, r = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
        if n == 0:
            return digits.encode()


def scram_record(argument: str) -> UserScramCredentialRecord:
    """Kafka's ScramParser: ``MECHANISM=[name=...,password=...]`` or with ``salt`` and ``saltedpassword`` (base64),
    ``iterations`` (4096 by default) in the mechanism's bounds."""
    text = argument.strip()
    mechanism, sep, config = text.partition("=")
    if not sep:
        raise StorageToolError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in scram.MECHANISMS:
        raise StorageToolError(f"The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise StorageToolError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise StorageToolError("Expected configuration string to end with ]")
    parts = dict(_scram_component(c) for c in config[1:-1].split(","))
    name = parts.pop("name", None)
    if name is None:
        raise StorageToolError("You must supply 'name' to add-scram")
    salt_text = parts.pop("salt", None)
    salt = _b64(salt_text, "salt") if salt_text is not None else None
    iterations_text = parts.pop("iterations", None)
    try:
        iterations = int(iterations_text) if iterations_text is not None else scram.MIN_ITERATIONS
    except ValueError:
        raise StorageToolError(f"Failed to parse iterations count: {iterations_text}") from None
    password = parts.pop("password", None)
    salted_text = parts.pop("saltedpassword", None)
    if password is None:
        if salted_text is None:
            raise StorageToolError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise StorageToolError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salted: bytes | None = _b64(salted_text, "saltedPassword")
    else:
        salted = None
    if parts:
        raise StorageToolError(f"Unknown SCRAM configurations: {', '.join(sorted(parts))}")
    if salt is None:
        salt = _kafka_salt()
    java_name = mechanism.replace("-", "_")
    if iterations < scram.MIN_ITERATIONS:
        raise StorageToolError(f"The 'iterations' value must be >= {scram.MIN_ITERATIONS} for add-scram using "
                               f"{java_name}")
    if iterations > scram.MAX_ITERATIONS:
        raise StorageToolError(f"The 'iterations' value must be <= {scram.MAX_ITERATIONS} for add-scram using "
                               f"{java_name}")
    if salted is None:
        assert password is not None
        salted = scram.salted_password(mechanism, password.encode(), salt, iterations)
    cred = scram.credential_from_salted(mechanism, salted, salt, iterations)
    return UserScramCredentialRecord(name=name, mechanism=scram.MECHANISM_NUMBERS[mechanism], salt=cred.salt,
                                     stored_key=cred.stored_key, server_key=cred.server_key, iterations=iterations)


# ------------------------------------------------------------------------------------------ format


def _parse_features(raw: Sequence[str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in raw or ():
        name, sep, level = item.partition("=")
        if not sep:
            raise StorageToolError(f"Can't parse feature=level string {item}: equals sign not found.")
        try:
            out[name.strip()] = int(level.strip())
        except ValueError:
            raise StorageToolError(f"Can't parse feature=level string {item}: unable to parse {level.strip()} as "
                                   "a short.") from None
    return out


def _java_bytes(b: bytes) -> str:
    """Arrays.toString(byte[]): signed bytes."""
    return "[" + ", ".join(str(x - 256 if x > 127 else x) for x in b) + "]"


def _shown(r: RecordAndVersion) -> str:
    """A bootstrap record as BootstrapMetadata.toString prints it (the generated messages' toString)."""
    rec = r.record
    if isinstance(rec, FeatureLevelRecord):
        body = f"FeatureLevelRecord(name='{rec.name}', featureLevel={rec.feature_level})"
    else:
        assert isinstance(rec, UserScramCredentialRecord)
        body = (f"UserScramCredentialRecord(name='{rec.name}', mechanism={rec.mechanism}, salt={_java_bytes(rec.salt)}, "
                f"storedKey={_java_bytes(rec.stored_key)}, serverKey={_java_bytes(rec.server_key)}, "
                f"iterations={rec.iterations})")
    return f"ApiMessageAndVersion({body} at version {r.version})"


def _bootstrap_line(records: Sequence[RecordAndVersion], metadata_version: int) -> str:
    """The line Kafka's Formatter prints first (BootstrapMetadata.toString)."""
    return (f"Bootstrap metadata: BootstrapMetadata(records=[{', '.join(_shown(r) for r in records)}], "
            f"metadataVersionLevel={metadata_version}, source=format command)")


def format_storage(
    props: Mapping[str, str],
    cluster_id: str,
    *,
    out: TextIO,
    standalone: bool = False,
    initial_controllers: str | None = None,
    no_initial_controllers: bool = False,
    release_version: str | None = None,
    features: Sequence[str] | None = None,
    add_scram: Sequence[str] | None = None,
    ignore_formatted: bool = False,
    now_ms: int | None = None,
) -> int:
    """StorageTool.runFormatCommand and Formatter.run: raises :class:`StorageToolError` with Kafka's message."""
    cfg = node_config(props)
    if not cfg.roles:
        raise StorageToolError("The kafka configuration file appears to be for a legacy cluster. Formatting is "
                               "only supported for clusters in KRaft mode.")
    is_controller = "controller" in cfg.roles
    voters: dict[int, DynamicVoter] | None = None
    if initial_controllers is not None:
        voters = parse_dynamic_voters(initial_controllers)
    if standalone:
        if not is_controller:
            raise StorageToolError("You can only use --standalone on a controller.")
        if not cfg.controller_listeners:
            raise StorageToolError("No controller listeners found.")
        _name, host, port = cfg.controller_listeners[0]
        voters = {cfg.node_id: DynamicVoter(cfg.node_id, host or "localhost", port, mp.random_uuid())}
    if voters is not None and cfg.voters:
        raise StorageToolError("You cannot specify controller.quorum.voters and format the node with "
                               "--initial-controllers or --standalone. If you want to use dynamic quorum, please "
                               "remove controller.quorum.voters and specify controller.quorum.bootstrap.servers "
                               "instead.")
    if not no_initial_controllers and is_controller and not cfg.voters and voters is None:
        raise StorageToolError("Because controller.quorum.voters is not set on this controller, you must specify "
                               "one of the following: --standalone, --initial-controllers, or "
                               "--no-initial-controllers.")
    dynamic = not cfg.voters and (voters is not None or no_initial_controllers)
    if not cfg.controller_listener_names:
        raise StorageToolError("You must specify the name of the initial controller listener.")
    try:
        levels = ft.bootstrap_levels(release_version, _parse_features(features), dynamic_quorum=dynamic)
    except ft.FeatureError as e:
        raise StorageToolError(str(e)) from None
    bootstrap = ft.bootstrap_records(levels)
    if add_scram:
        if levels[ft.METADATA_VERSION] < ft.IBP_3_5_IV2:
            raise StorageToolError(f"SCRAM is only supported in metadata.version {ft.NAME_OF[ft.IBP_3_5_IV2]} or later.")
        bootstrap += [RecordAndVersion(scram_record(a), 0) for a in add_scram]

    # MetaPropertiesEnsemble.Loader + verify: every directory's meta.properties, checked against the cluster
    # and the node before anything is written
    directories = cfg.directories
    formatted: list[str] = []
    empty: list[str] = []
    for d in directories:
        try:
            meta = mp.load(Path(d))
        except ConfigError as e:
            print(f"I/O error trying to read log directory {d}. Ignoring... ({e})", file=out)
            continue
        if meta is None:
            empty.append(d)
            continue
        path = Path(d) / mp.META_PROPERTIES
        if meta.cluster_id is not None and meta.cluster_id != cluster_id:
            raise StorageToolError(f"Invalid cluster.id in: {path}. Expected {cluster_id}, but read {meta.cluster_id}")
        if meta.node_id != cfg.node_id:
            raise StorageToolError(f"Stored node id {meta.node_id} doesn't match previous node id {cfg.node_id} in "
                                   f"{path}. If you moved your data, make sure your configured node id matches. If "
                                   "you intend to create a new node, you should remove all data in your data "
                                   "directories.")
        formatted.append(d)
    if formatted and not ignore_formatted:
        raise StorageToolError(f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to ignore "
                               "this directory and format the others.")
    if not empty:
        print("All of the log directories are already formatted.", file=out)
        return 0
    print(_bootstrap_line(bootstrap, levels[ft.METADATA_VERSION]), file=out)
    mv_name = ft.NAME_OF[levels[ft.METADATA_VERSION]]
    t = int(time.time() * 1000) if now_ms is None else now_ms
    for d in empty:
        if d != cfg.metadata_log_dir:
            kind, directory_id = "data directory", mp.random_uuid()
        elif voters is None:
            kind, directory_id = "metadata directory", mp.random_uuid()
        elif cfg.node_id in voters:
            kind, directory_id = "dynamic metadata voter directory", voters[cfg.node_id].directory_id
        else:
            kind, directory_id = "dynamic metadata non voter directory", mp.random_uuid()
        print(f"Formatting {kind} {d} with metadata.version {mv_name}.", file=out)
        Path(d).mkdir(parents=True, exist_ok=True)
        if d == cfg.metadata_log_dir and is_controller:
            controls: list[ControlMessage] = []
            if levels[ft.KRAFT_VERSION] > 0:
                controls.append(KRaftVersionRecord(version=i16(0), k_raft_version=i16(levels[ft.KRAFT_VERSION])))
            if voters is not None:
                controls.append(voters_record(voters, cfg.controller_listener_names[0]))
            data = snapshot_bytes(bootstrap, epoch=BOOTSTRAP_SNAPSHOT.epoch, timestamp=t,
                                  controls=controls)
            try:
                write_snapshot_file(Path(d) / PARTITION_DIR, BOOTSTRAP_SNAPSHOT, data)
            except FileExistsError:
                raise StorageToolError(f"Error while writing the bootstrap snapshot of {d}: "
                                       f"{PARTITION_DIR}/{BOOTSTRAP_SNAPSHOT.file_name} exists already") from None
        try:
            mp.write_v1(Path(d), cluster_id, cfg.node_id, directory_id)
        except OSError as e:
            raise StorageToolError(f"Error while writing meta.properties file {d}: {e}") from None
    return 0


def run_format(args: argparse.Namespace) -> int:
    try:
        props = read_properties(args.config)
    except OSError as e:
        return _fail(StorageToolError(f"{args.config}: {e.strerror or e}"))
    try:
        return format_storage(props, args.cluster_id, out=sys.stdout, standalone=args.standalone,
                              initial_controllers=args.initial_controllers,
                              no_initial_controllers=args.no_initial_controllers,
                              release_version=args.release_version, features=args.feature,
                              add_scram=args.add_scram,
                              ignore_formatted=args.ignore_formatted)
    except StorageToolError as e:
        return _fail(e)


# ------------------------------------------------------------------------------------------ info


def storage_info(props: Mapping[str, str], *, out: TextIO) -> int:
    """StorageTool.infoCommand. A configuration without process.roles is ZooKeeper mode (odradek's other
    mode, meta.properties version 0)."""
    cfg = node_config(props, require_kraft=False)
    kraft = bool(cfg.roles)
    problems: list[str] = []
    found: list[str] = []
    prev: mp.MetaProperties | None = None
    for d in cfg.directories:
        path = Path(d)
        if not path.is_dir():
            problems.append(f"{d} does not exist" if not path.exists() else f"{d} is not a directory")
            continue
        found.append(d)
        meta_path = path / mp.META_PROPERTIES
        if not meta_path.exists():
            problems.append(f"{d} is not formatted.")
            continue
        try:
            meta = mp.load(path)
        except ConfigError as e:
            problems.append(f"Error loading {meta_path}: {e}")
            continue
        assert meta is not None
        if prev is None:
            prev = meta
        elif prev.cluster_id != meta.cluster_id:
            problems.append("Mismatched cluster IDs between storage directories.")
        elif prev.node_id != meta.node_id:
            problems.append("Mismatched node IDs between storage directories.")
    if prev is not None:
        if kraft and prev.version == 0:
            problems.append("The kafka configuration file appears to be for a cluster in KRaft mode, but the "
                            "directories are formatted for legacy mode.")
        elif not kraft and prev.version == 1:
            problems.append("The kafka configuration file appears to be for a legacy cluster, but the directories "
                            "are formatted for a cluster in KRaft mode.")
    if not cfg.directories:
        print("No directories specified.", file=out)
        return 0
    if found:
        print("Found log directory:" if len(found) == 1 else "Found log directories:", file=out)
        for d in found:
            print(f"  {d}", file=out)
        print("", file=out)
    if prev is not None:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(prev.as_properties().items()))
        print(f"Found metadata: {{{shown}}}", file=out)
        print("", file=out)
    if problems:
        print("Found problem:" if len(problems) == 1 else "Found problems:", file=out)
        for p in problems:
            print(f"  {p}", file=out)
        print("", file=out)
        return 1
    return 0


def run_info(args: argparse.Namespace) -> int:
    try:
        props = read_properties(args.config)
    except OSError as e:
        return _fail(StorageToolError(f"{args.config}: {e.strerror or e}"))
    try:
        return storage_info(props, out=sys.stdout)
    except StorageToolError as e:
        return _fail(e)

