"""``odradek configs --zookeeper HOST:PORT[/chroot]`` and ``--log-dir DIR``: users' SCRAM
credentials written straight into the metadata store, before any broker runs.

A cluster whose brokers authenticate to each other with SCRAM cannot be given its first
credentials through a broker (no broker can log in to another yet). Kafka bootstraps them with
``kafka-configs --zookeeper ... --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type
users`` in ZooKeeper mode (since Kafka 3.0 the only use of ``--zookeeper`` it keeps) and with
``kafka-storage format --add-scram`` in KRaft mode. Here:

- ``--zookeeper``: the credentials go to ``/config/users/<user>`` as Kafka stores them, with a
  ``/config/changes`` notification. The ZooKeeper login is the brokers' one: the JAAS file's
  ``Client`` section named by ``-Djava.security.auth.login.config=...`` in ``KAFKA_OPTS``
  (odradek.security.zk_client); logged in with SASL, the znodes get Kafka's secure ACLs, as
  kafka-configs.sh sets them when ZooKeeper SASL is on.
- ``--log-dir``: the embedded single-node broker's store, ``<dir>/odradek-metadata.json`` (the first
  entry of its ``log.dirs``). Run it while that broker is stopped: a running broker keeps the store in
  memory and would write its own copy over the file.

Only users' SCRAM credentials can be described or altered this way (as with Kafka's
``--zookeeper``); everything else goes through ``--bootstrap-server``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.config import ConfigError
from odradek.controller.store import LocalStore, MetadataFileError, MetadataStore, StoreError
from odradek.security.credentials import ScramCredentialStore
from odradek.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, make_credential


@contextmanager
def open_store(args: argparse.Namespace) -> Iterator[MetadataStore]:
    if args.log_dir:
        d = Path(args.log_dir)
        d.mkdir(parents=True, exist_ok=True)
        props = d / "meta.properties"
        try:
            # as the broker: a log dir a broker ran on must have its metadata file (a new one holding only
            # the credentials would make the broker forget every topic)
            local = LocalStore(d / "odradek-metadata.json",
                               must_exist=f"{props} shows that a broker ran here" if props.exists() else "")
        except MetadataFileError as e:
            raise ConfigError(str(e)) from None
        try:
            yield local
        finally:
            local.close()
        return
    from odradek.controller.zk_data import default_acls
    from odradek.controller.zk_store import ZkAuthFailedError, ZkStore
    from odradek.security.zk_client import zk_client_security

    security = zk_client_security({})
    zk = ZkStore(args.zookeeper, session_timeout_ms=30000,
                 connection_timeout_ms=int(args.command_timeout * 1000), op_timeout_s=args.command_timeout,
                 sasl_options=security.sasl_options(),
                 acls_for=(lambda path: default_acls(path, True)) if security.sasl else None)
    try:
        zk.start()
    except ZkAuthFailedError:
        raise ConfigError(f"ZooKeeper refused the SASL login of {security.describe()}") from None
    except Exception as e:
        zk.close()
        raise ConfigError(f"cannot reach ZooKeeper at {args.zookeeper}: {e}") from None
    try:
        yield zk
    finally:
        zk.close()


def _alterations(args: argparse.Namespace) -> tuple[dict[str, tuple[str, int]], list[str]]:
    from odradek.cli.add_config import parse_add_config

    add: dict[str, tuple[str, int]] = {}
    for mech, value in (parse_add_config(args.add_config) if args.add_config else {}).items():
        mech = mech.strip().upper()
        if mech not in MECHANISMS:
            raise ValueError(f"{mech}: only SCRAM-SHA-256 and SCRAM-SHA-512 credentials can be set here")
        fields = dict(item.split("=", 1) for item in value.split(",") if "=" in item)
        if "password" not in fields:
            raise ValueError(f"{mech} needs password=...")
        iterations = int(fields.get("iterations", str(MIN_ITERATIONS)))
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"{mech}: iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        add[mech] = (fields["password"], iterations)
    delete = [m.strip().upper() for m in args.delete_config.split(",")] if args.delete_config else []
    for mech in delete:
        if mech not in MECHANISMS:
            raise ValueError(f"{mech}: only SCRAM-SHA-256 and SCRAM-SHA-512 credentials can be deleted here")
    return add, delete


def run_direct(args: argparse.Namespace) -> int:
    where = "--zookeeper" if args.zookeeper else "--log-dir"
    if args.entity_type != "users" or len(args.entities) > 1 or args.entity_default:
        print(f"Error: {where} only describes or alters users' SCRAM credentials (--entity-type users "
              "--entity-name NAME); use --bootstrap-server for everything else", file=sys.stderr)
        return 1
    user = args.entity_name
    try:
        add, delete = ({}, []) if args.describe else _alterations(args)
        if args.alter and not (add or delete):
            print("Error: --alter needs --add-config or --delete-config", file=sys.stderr)
            return 1
        if args.alter and not user:
            print("Error: --entity-name is required for users", file=sys.stderr)
            return 1
        with open_store(args) as store:
            creds = ScramCredentialStore(store)
            if args.describe:
                for name in [user] if user else creds.users():
                    described = creds.describe(name)
                    if user and not described:
                        continue
                    shown = ",".join(f"{m}=iterations={i}" for m, i in sorted(described.items()))
                    print(f"SCRAM credential configs for user-principal '{name}' are {shown}")
                return 0
            for mech, (password, iterations) in add.items():
                creds.upsert(user, mech, make_credential(mech, password, iterations))
            for mech in delete:
                creds.delete(user, mech)
            if args.zookeeper:  # AdminZkClient.changeConfigs: tell running brokers, if any
                doc = json.dumps({"version": 2, "entity_path": f"users/{user}"}).encode()
                store.create("/config/changes/config_change_", doc, sequential=True, makepath=True)
        print(f"Completed updating config for user {user}.")
        return 0
    except (ConfigError, StoreError, ValueError, OSError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
