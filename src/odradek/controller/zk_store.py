"""ZkStore: the MetadataStore interface over a ZooKeeper ensemble (kazoo).

Every call is bounded in time (kazoo's blocking calls hang without quorum): the
``*_async(...).get(timeout)`` form is used throughout, and a timed-out write is
reported as :class:`StoreTimeoutError` (it may still be applied later; callers use
versioned writes). Connection state is exposed so a broker can stop trusting its
controllership or leadership while SUSPENDED.

Watches are one-shot in ZooKeeper; :meth:`watch` re-arms them after each event and the
callback re-reads state (changes in between may be merged into one event).

Security (odradek.security.zk_client): ``sasl_options`` log the session in with SASL
DIGEST-MD5 (kazoo over pure-sasl); ``acls_for(path)`` gives the ACL of every znode this store
creates, parents made by ``makepath`` included (each gets its own path's ACL, as Kafka's
ZkData.defaultAcls is asked per path). kazoo reports CONNECTED before the SASL exchange has
finished: :meth:`start` therefore waits for a first request to be answered, so that a refused
login is :class:`ZkAuthFailedError` at start-up rather than a session that silently never comes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import AuthFailedError as ZkAuthFailed
from kazoo.exceptions import (
    BadVersionError as ZkBadVersion,
)
from kazoo.exceptions import NoAuthError as ZkNoAuth
from kazoo.exceptions import (
    NodeExistsError as ZkNodeExists,
)
from kazoo.exceptions import (
    NoNodeError as ZkNoNode,
)
from kazoo.exceptions import (
    NotEmptyError as ZkNotEmpty,
)
from kazoo.handlers.threading import KazooTimeoutError

from odradek.controller.store import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    StoreError,
    Watcher,
)
from odradek.controller.zk_data import AclSpec

log = logging.getLogger("odradek.zookeeper")


class StoreTimeoutError(StoreError):
    """ZooKeeper did not answer in time (no quorum, or the connection is down)."""


class ZkAuthFailedError(StoreError):
    """ZooKeeper refused the SASL login (a wrong username or password)."""


class ZkNoAuthError(StoreError):
    """The znode's ACL does not allow this session the operation (ZooKeeper's NOAUTH)."""


def _translate(e: Exception, path: str) -> StoreError:
    if isinstance(e, ZkNoNode):
        return NoNodeError(path)
    if isinstance(e, ZkNodeExists):
        return NodeExistsError(path)
    if isinstance(e, ZkBadVersion):
        return BadVersionError(path)
    if isinstance(e, ZkNotEmpty):
        return NotEmptyError(path)
    if isinstance(e, KazooTimeoutError):
        return StoreTimeoutError(path)
    if isinstance(e, ZkAuthFailed):
        return ZkAuthFailedError(f"{path}: ZooKeeper refused the SASL authentication")
    if isinstance(e, ZkNoAuth):
        return ZkNoAuthError(f"{path}: not allowed by the znode's ACL (NOAUTH)")
    return StoreError(f"{path}: {type(e).__name__}: {e}")


class ZkStore:
    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        op_timeout_s: float = 10.0,
        chroot: str | None = None,
        sasl_options: dict[str, str] | None = None,
        acls_for: Callable[[str], tuple[AclSpec, ...]] | None = None,
        create_chroot: bool = False,
    ) -> None:
        self._create_chroot = create_chroot
        if chroot:
            hosts = hosts.rstrip("/") + "/" + chroot.strip("/")
        self.op_timeout = op_timeout_s
        self._root_client_options: dict[str, Any] = {
            "hosts": hosts.partition("/")[0], "timeout": session_timeout_ms / 1000.0,
            "sasl_options": dict(sasl_options) if sasl_options else None}
        self.client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000.0,
            connection_retry={"max_tries": -1, "max_delay": 1},
            command_retry={"max_tries": 0},
            sasl_options=dict(sasl_options) if sasl_options else None,
        )
        self._acls_for = acls_for
        self._sasl = bool(sasl_options)
        self._sasl_error: Exception | None = None
        self.state: str = KazooState.LOST
        self.state_listeners: list[Callable[[str], None]] = []
        self.client.add_listener(self._on_state)
        self._connect_timeout = (connection_timeout_ms or session_timeout_ms) / 1000.0
        self._watchers: dict[str, list[Watcher]] = {}
        self._fires: dict[str, Callable[[Any], None]] = {}
        self._lock = threading.Lock()

    # -- connection
    def _record_sasl_errors(self) -> None:
        """Keep the exception of a failed SASL exchange: a server that requires SASL
        (``enforce.auth.schemes=sasl``) closes the session with an error kazoo raises in its
        connection thread, which then ends without telling the client's callers."""
        conn = self.client._connection  # noqa: SLF001 - kazoo has no hook for this
        inner = conn._authenticate_with_sasl  # noqa: SLF001

        def authenticate(host: str, timeout: float) -> None:
            try:
                inner(host, timeout)
            except Exception as e:
                self._sasl_error = e
                raise

        conn._authenticate_with_sasl = authenticate  # noqa: SLF001

    def start(self) -> None:
        self._sasl_error = None
        if self._sasl:
            self._record_sasl_errors()
        try:
            with warnings.catch_warnings():
                if self._create_chroot:  # kazoo warns of a missing chroot, which is about to be made
                    warnings.filterwarnings("ignore", message="No chroot path exists")
                self.client.start(timeout=self._connect_timeout)
        except Exception as e:
            self.close()
            if self._sasl_error is not None:  # the session closed before start() saw it connected
                raise ZkAuthFailedError(
                    f"ZooKeeper refused the SASL authentication ({type(self._sasl_error).__name__})") from e
            raise _translate(e, "/") from e
        # a first answered request: the SASL exchange (done after CONNECTED is reported) is over
        probe = self.client.exists_async("/")
        deadline = time.monotonic() + self._connect_timeout
        while not probe.ready() and self._sasl_error is None and time.monotonic() < deadline:
            probe.wait(0.05)
        if self._sasl_error is not None:
            self.close()
            raise ZkAuthFailedError(f"ZooKeeper refused the SASL authentication ({type(self._sasl_error).__name__})")
        try:
            root = probe.get(timeout=0)
        except ZkAuthFailed as e:
            self.close()
            raise ZkAuthFailedError("ZooKeeper refused the SASL authentication (AuthFailedError)") from e
        except Exception as e:
            self.close()
            raise _translate(e, "/") from e
        if root is None and self.client.chroot and self._create_chroot:
            try:
                self._make_chroot()
            except Exception as e:
                self.close()
                raise _translate(e, self.client.chroot) from e

    def _make_chroot(self) -> None:
        """Create the missing chroot path (Kafka's ``KafkaServer.createChrootIfNecessary``), through a
        short-lived session on the ensemble's root: the chrooted session cannot name the chroot's
        parents. Each created znode gets the ACL it would get under ``zookeeper.set.acl``."""
        chroot: str = self.client.chroot
        root = KazooClient(**self._root_client_options)
        root.start(timeout=self._connect_timeout)
        try:
            parts = chroot.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                path = "/" + "/".join(parts[:i])
                if root.exists(path) is None:
                    with contextlib.suppress(ZkNodeExists):
                        root.create(path, b"", acl=self._acl(path))
            log.info("Created the ZooKeeper chroot %s", chroot)
        finally:
            root.stop()
            root.close()

    def _acl(self, path: str) -> list[Any] | None:
        if self._acls_for is None:
            return None
        from kazoo.security import ACL, Id

        return [ACL(a.perms, Id(a.scheme, a.id)) for a in self._acls_for(path)]

    def _make_parents(self, path: str) -> None:
        """Create the missing ancestors of ``path``, each with its own ACL."""
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:i])
            if self._wait(self.client.exists_async(parent), parent) is not None:
                continue
            with contextlib.suppress(NodeExistsError):
                self._wait(self.client.create_async(parent, b"", acl=self._acl(parent)), parent)

    def _on_state(self, state: str) -> None:
        self.state = state
        log.info("ZooKeeper session state: %s", state)
        for cb in list(self.state_listeners):
            try:
                cb(state)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    @property
    def connected(self) -> bool:
        connected: bool = self.state == KazooState.CONNECTED  # kazoo is untyped: its states are Any to mypy
        return connected

    @property
    def session_id(self) -> int | None:
        sid = self.client.client_id
        return None if sid is None else int(sid[0])

    def close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:
            log.exception("closing the ZooKeeper client failed")

    # -- MetadataStore
    def _check(self, path: str) -> None:
        # fail fast without a connection rather than queue the call (calls
        # without quorum block, and a timed-out write may still be applied later)
        if self.state != KazooState.CONNECTED:
            raise StoreTimeoutError(f"{path}: ZooKeeper is not connected ({self.state})")

    def _wait(self, result: Any, path: str) -> Any:
        try:
            return result.get(timeout=self.op_timeout)
        except Exception as e:
            raise _translate(e, path) from e

    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False, sequential: bool = False
    ) -> str:
        self._check(path)
        if self._acls_for is not None and makepath:
            self._make_parents(path)
            makepath = False
        return str(
            self._wait(
                self.client.create_async(path, data, acl=self._acl(path), ephemeral=ephemeral, sequence=sequential,
                                         makepath=makepath),
                path,
            )
        )

    def get(self, path: str) -> tuple[bytes, int]:
        self._check(path)
        data, stat = self._wait(self.client.get_async(path), path)
        return bytes(data or b""), int(stat.version)

    def sync(self, path: str) -> None:
        """ZooKeeper's sync: the server this session talks to catches up with the leader, so the
        reads that follow see every write committed before it (bounded, as every call here)."""
        self._check(path)
        self._wait(self.client.sync_async(path), path)

    def get_with_stat(self, path: str) -> tuple[bytes, Any]:
        self._check(path)
        data, stat = self._wait(self.client.get_async(path), path)
        return bytes(data or b""), stat

    def set_acls(self, path: str, acls: tuple[AclSpec, ...]) -> None:
        """Replace the znode's ACL (zookeeper-security-migration)."""
        from kazoo.security import ACL, Id

        self._check(path)
        self._wait(self.client.set_acls_async(path, [ACL(a.perms, Id(a.scheme, a.id)) for a in acls]), path)

    def ctime_ms(self, path: str) -> int | None:
        """The znode's creation time (ZooKeeper's ctime, ms since the epoch); None if absent."""
        self._check(path)
        stat = self._wait(self.client.exists_async(path), path)
        return None if stat is None else int(stat.ctime)

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        self._check(path)
        stat = self._wait(self.client.set_async(path, data, version), path)
        return int(stat.version)

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        if recursive:
            for child in self.children(path):
                self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
        self._check(path)
        self._wait(self.client.delete_async(path, version), path)

    def exists(self, path: str) -> int | None:
        self._check(path)
        stat = self._wait(self.client.exists_async(path), path)
        return None if stat is None else int(stat.version)

    def children(self, path: str) -> list[str]:
        self._check(path)
        return sorted(self._wait(self.client.get_children_async(path), path))

    def multi(self, ops: list[Op]) -> None:
        self._check(ops[0].path if ops else "/")
        tx = self.client.transaction()
        for op in ops:
            if op.kind == "create":
                tx.create(op.path, op.data, acl=self._acl(op.path), ephemeral=op.ephemeral)
            elif op.kind == "set":
                tx.set_data(op.path, op.data, op.version)
            elif op.kind == "delete":
                tx.delete(op.path, op.version)
            elif op.kind == "check":
                tx.check(op.path, op.version)
            else:
                raise StoreError(f"unknown op {op.kind}")
        results = self._wait(tx.commit_async(), ops[0].path if ops else "/")
        for op, r in zip(ops, results, strict=False):
            if isinstance(r, Exception) and not isinstance(r, _RolledBack):
                raise _translate(r, op.path)

    def watch(self, path: str, callback: Watcher) -> None:
        """Call ``callback(path)`` on every change of the node's data or children."""
        with self._lock:
            first = path not in self._watchers
            self._watchers.setdefault(path, []).append(callback)
        if first:
            self._arm(path)

    def rearm_watches(self) -> None:
        """Arm every watch again (after a new session: the old session's watches are gone)."""
        with self._lock:
            paths = list(self._watchers)
        for path in paths:
            self._arm(path)

    def _arm(self, path: str) -> None:
        fire = self._fires.get(path)
        if fire is None:

            def fire(event: Any) -> None:
                self._arm(path)  # re-arm before the callbacks read state
                for cb in list(self._watchers.get(path, ())):
                    try:
                        cb(path)
                    except Exception:
                        log.exception("ZooKeeper watcher for %s failed", path)

            self._fires[path] = fire  # one function per path: kazoo keeps watchers in a set
        try:
            stat = self._wait(self.client.exists_async(path, watch=fire), path)
            if stat is not None:
                self._wait(self.client.get_children_async(path, watch=fire), path)
        except StoreError:
            log.warning("could not arm a watch on %s", path)


try:
    from kazoo.exceptions import RolledBackError as _RolledBack
except ImportError:  # pragma: no cover
    class _RolledBack(Exception):  # type: ignore[no-redef]
        pass
