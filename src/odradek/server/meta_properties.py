"""``meta.properties`` in each log dir: which broker (and cluster) the directory belongs to.

Layout (Java properties, ZooKeeper-mode version 0 as Kafka's ``BrokerMetadataCheckpoint`` writes it)::

    #<comment lines>
    version=0
    broker.id=<int>
    node.id=<int>            (the same id, for readers that expect KRaft's name)
    cluster.id=<22-character base64 id>

Written once, when a broker first starts on the directory (temporary file, fsync, rename, fsync of
the directory). On every start each existing file is checked before anything else is read from
the directory: an id that differs from the configured ``broker.id`` refuses the start with Kafka's
``InconsistentBrokerIdException`` message, and a file that cannot be read as properties (not UTF-8,
no integer id) refuses it naming the file, as Kafka does, rather than guess which broker it was.
The cluster id is compared once it is known (:func:`check_cluster_id`,
``InconsistentClusterIdException``).
"""

from __future__ import annotations

import time
from pathlib import Path

from odradek.config import ConfigError
from odradek.log.checkpoint import write_atomic

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
