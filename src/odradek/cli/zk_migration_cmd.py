"""``odradek zookeeper-security-migration``: Kafka's ZkSecurityMigrator.

Sets the ACLs of every znode under Kafka's secure root paths (ZkData.SecureRootPaths: ``/brokers``,
``/config``, ``/controller``, ``/kafka-acl``, ...) to what brokers with ``zookeeper.set.acl=true``
give the znodes they create (``--zookeeper.acl secure``: ALL for this SASL identity, READ for
everyone outside the sensitive paths), or back to open ACLs (``--zookeeper.acl unsecure``). This is
how a cluster started without ``zookeeper.set.acl`` is secured: restart the brokers with SASL and
``zookeeper.set.acl=true``, then run this once. The ZooKeeper login is the brokers' one: the JAAS
file's ``Client`` section, named by ``-Djava.security.auth.login.config=...`` in ``KAFKA_OPTS``;
``secure`` without a SASL login is refused, as Kafka refuses it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("zookeeper-security-migration",
                       help="set Kafka's znode ACLs on an existing cluster (zookeeper-security-migration.sh)")
    p.add_argument("--zookeeper.acl", dest="zookeeper_acl", required=True, choices=["secure", "unsecure"])
    p.add_argument("--zookeeper.connect", dest="zookeeper_connect", required=True, metavar="HOST:PORT[/chroot]")
    p.add_argument("--zookeeper.session.timeout", dest="session_timeout", type=int, default=30000, metavar="MS")
    p.add_argument("--zookeeper.connection.timeout", dest="connection_timeout", type=int, default=30000,
                   metavar="MS")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from odradek.config import ConfigError
    from odradek.controller.store import NoNodeError, StoreError
    from odradek.controller.zk_data import SECURE_ROOT_PATHS, default_acls
    from odradek.controller.zk_store import ZkAuthFailedError, ZkStore
    from odradek.security.zk_client import zk_client_security

    secure = args.zookeeper_acl == "secure"
    try:
        login = zk_client_security({}, set_acl=secure)
    except ConfigError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    zk = ZkStore(args.zookeeper_connect, session_timeout_ms=args.session_timeout,
                 connection_timeout_ms=args.connection_timeout, sasl_options=login.sasl_options())
    try:
        zk.start()
    except ZkAuthFailedError:
        print(f"Error: ZooKeeper refused the SASL login of {login.describe()}", file=sys.stderr)
        return 1
    except StoreError as e:
        print(f"Error: cannot reach ZooKeeper at {args.zookeeper_connect}: {e}", file=sys.stderr)
        return 1
    changed = 0
    try:
        def walk(path: str) -> None:
            nonlocal changed
            try:
                zk.set_acls(path, default_acls(path, secure))
                changed += 1
                kids = zk.children(path)
            except NoNodeError:
                return  # deleted meanwhile (an ephemeral node, a notification)
            for kid in kids:
                walk(f"{path}/{kid}")

        for root in SECURE_ROOT_PATHS:
            if zk.exists(root) is not None:
                walk(root)
    except StoreError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    finally:
        zk.close()
    print(f"Set {'secure' if secure else 'open'} ACLs on {changed} znode(s).")
    return 0
