"""``meta.properties`` in each log dir: which broker (and cluster) the directory belongs to.

Layout (Java properties), ZooKeeper-mode version 0 as Kafka's ``BrokerMetadataCheckpoint`` wrote it::

    #<comment lines>
    version=0
    broker.id=<int>
    node.id=<int>            (the same id, for readers that expect KRaft's name)
    cluster.id=<22-character base64 id>

and KRaft's version 1 (Kafka's MetaProperties / MetaPropertiesEnsemble), written by ``odradek storage format``
(:func:`write_v1`) into every log dir and ``metadata.log.dir``, in the order Kafka 4.4's
``kafka-storage format`` leaves it::

    #
    #<date>
    node.id=<int>
    directory.id=<22-character base64 uuid, one per directory (KIP-858)>
    version=1
    cluster.id=<the cluster id given to format>

Written once, when a broker first starts on the directory, by :func:`odradek.fsutil.write_atomic`
(temporary file, fsync, rename, fsync of the directory). On every start each existing file is checked before anything else is read from
the directory: an id that differs from the configured ``broker.id`` refuses the start with Kafka's
``InconsistentBrokerIdException`` message, and a file that cannot be read as properties (not UTF-8,
no integer id) refuses it naming the file, as Kafka does, rather than guess which broker it was.
The cluster id is compared once it is known (:func:`check_cluster_id`,
``InconsistentClusterIdException``).
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from odradek.config import ConfigError
from odradek.fsutil import write_atomic

META_PROPERTIES = "meta.properties"


def read(path: Path) -> dict[str, str] | None:
    """The file's properties, None if it does not exist; ConfigError naming it if unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a properties file (not UTF-8 text); restore it or, for a new broker, "
                          "empty the log dir") from None
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def stored_broker_id(path: Path, props: dict[str, str]) -> int:
    raw = props.get("broker.id", props.get("node.id"))
    if raw is None:
        raise ConfigError(f"{path} has no broker.id (it may be damaged); restore it, or write "
                          "'version=0' and 'broker.id=<this broker's id>' into it")
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{path} has a broker.id that is not an integer: {raw[:40]!r}") from None


def check_broker_id(log_dirs: list[Path], broker_id: int) -> bool:
    """Refuse (ConfigError) a log dir whose meta.properties names another broker; True when any
    log dir has one (a broker ran there before)."""
    found = False
    for d in log_dirs:
        p = d / META_PROPERTIES
        props = read(p)
        if props is None:
            continue
        found = True
        stored = stored_broker_id(p, props)
        if stored != broker_id:
            raise ConfigError(
                f"Configured broker.id {broker_id} doesn't match stored broker.id {stored} in {p}. If you moved "
                "your data, make sure your configured broker.id matches. If you intend to create a new broker, "
                "you should remove all data in your data directories (log.dirs)."
            )
    return found


def check_cluster_id(log_dirs: list[Path], cluster_id: str) -> None:
    """Refuse (ConfigError) a log dir that belongs to another cluster."""
    for d in log_dirs:
        p = d / META_PROPERTIES
        props = read(p)
        stored = (props or {}).get("cluster.id")
        if stored and cluster_id and stored != cluster_id:
            raise ConfigError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored} in {p}. The broker is "
                "trying to join the wrong cluster. Configured zookeeper.connect may be wrong."
            )


def write_missing(log_dirs: list[Path], broker_id: int, cluster_id: str) -> None:
    """Write meta.properties into each log dir that has none."""
    for d in log_dirs:
        p = d / META_PROPERTIES
        if p.exists():
            continue
        body = (f"#\n#{time.ctime()}\nversion=0\nbroker.id={broker_id}\nnode.id={broker_id}\n"
                f"cluster.id={cluster_id}\n")
        write_atomic(p, body.encode())


# ---------------------------------------------------------------------------------------------- KRaft (version 1)


@dataclass(frozen=True)
class MetaProperties:
    """A parsed meta.properties (Kafka's MetaProperties): version 0 (ZooKeeper mode) or 1 (KRaft)."""

    version: int
    cluster_id: str | None
    node_id: int
    directory_id: str | None = None

    def as_properties(self) -> dict[str, str]:
        """Kafka's MetaProperties.toProperties (what ``kafka-storage info`` prints, sorted)."""
        out = {"version": str(self.version)}
        if self.cluster_id is not None:
            out["cluster.id"] = self.cluster_id
        out["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            out["directory.id"] = self.directory_id
        return out


def parse(path: Path, props: dict[str, str]) -> MetaProperties:
    """MetaProperties.Builder(props).build(), with Kafka's complaints as :class:`ConfigError`."""
    raw_version = props.get("version", "0")
    try:
        version = int(raw_version)
    except ValueError:
        raise ConfigError(f"{path}: invalid meta.properties version {raw_version!r}") from None
    if version not in (0, 1):
        raise ConfigError(f"{path}: unknown meta.properties version {version}")
    if version == 0:
        return MetaProperties(0, props.get("cluster.id"), stored_broker_id(path, props), props.get("directory.id"))
    raw = props.get("node.id")
    if raw is None:
        raise ConfigError(f"{path}: node.id was not found.")
    try:
        node_id = int(raw)
    except ValueError:
        raise ConfigError(f"{path}: node.id {raw[:40]!r} is not an integer") from None
    cluster_id = props.get("cluster.id")
    if cluster_id is None:
        raise ConfigError(f"{path}: cluster.id was not found.")
    return MetaProperties(1, cluster_id, node_id, props.get("directory.id"))


def load(directory: Path) -> MetaProperties | None:
    """The directory's meta.properties, None when it has none (an unformatted directory)."""
    path = directory / META_PROPERTIES
    props = read(path)
    return None if props is None else parse(path, props)


def random_uuid() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes in URL-safe base64 without padding, drawn
    again when the text starts with "-" (Kafka does, so that a command line never reads it as an option)
    or the uuid is one of Kafka's reserved ones (the first 100 with the high 64 bits 0)."""
    while True:
        u = uuid.uuid4()
        text = uuid_text(u)
        if not text.startswith("-") and u.int >> 64 != 0:
            return text


def uuid_text(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def uuid_of(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; ValueError when ``text`` is not 16 bytes of URL-safe base64."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise ValueError(f"Invalid UUID: {text!r} is not URL-safe base64") from None
    if len(raw) != 16 or len(text) != 22:
        raise ValueError(f"Invalid UUID: {text!r} must be 16 bytes (22 characters of base64)")
    return uuid.UUID(bytes=raw)


def write_v1(directory: Path, cluster_id: str, node_id: int, directory_id: str) -> None:
    """Write KRaft's meta.properties (version 1) into ``directory`` (made when missing), atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    body = (f"#\n#{stamp}\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\n"
            f"cluster.id={cluster_id}\n")
    write_atomic(directory / META_PROPERTIES, body.encode())
