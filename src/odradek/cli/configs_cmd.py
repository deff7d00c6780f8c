"""``odradek configs``: kafka-configs.sh for topics, brokers, users' SCRAM credentials and client
quotas (users, clients and ips; SCRAM-* keys go to the credentials, the others to quotas).

``--entity-type`` may be given twice for a quota on a (user, client id) pair, each followed by
its ``--entity-name`` or ``--entity-default``, in kafka-configs.sh's order::

    odradek configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \
        --entity-type clients --entity-default --add-config producer_byte_rate=1048576

``--zookeeper HOST:PORT[/chroot]`` or ``--log-dir DIR`` instead of ``--bootstrap-server``: users'
SCRAM credentials written straight into the metadata store before the brokers start
(odradek.cli.scram_direct).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.cli.add_config import parse_add_config

_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    8: "GROUP_CONFIG",
}
# the source of an entity's own (dynamic) configs: what --describe shows without --all
_DYNAMIC_SOURCE = {"topics": 1, "brokers": 2, "groups": 8}


class _Entity(argparse.Action):
    """--entity-type starts an entity; --entity-name / --entity-default complete the last one.
    ``entity_type``/``entity_name``/``entity_default`` mirror the first entity."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        ents: list[list[Any]] = list(getattr(ns, "entities", None) or [])
        if self.dest == "entity_type":
            ents.append([values, None, False])
        elif not ents:
            parser.error(f"{option_string} must follow --entity-type")
        elif self.dest == "entity_name":
            ents[-1][1] = values
        else:
            ents[-1][2] = True
        ns.entities = ents
        ns.entity_type, ns.entity_name, ns.entity_default = ents[0]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe and alter topic, broker and client quota configs")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT")
    where.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                       help="users' SCRAM credentials written in ZooKeeper (bootstrapping a SCRAM cluster)")
    where.add_argument("--log-dir", metavar="DIR",
                       help="users' SCRAM credentials written in a stopped embedded broker's store (its log.dirs)")
    p.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    p.add_argument("--entity-type", required=True, choices=["topics", "brokers", "groups", "users", "clients", "ips"], action=_Entity)
    p.add_argument("--entity-name", help="topic name, broker id, group id (KIP-848 group configs), user principal or client id",
                   action=_Entity)
    p.add_argument("--entity-default", nargs=0, action=_Entity,
                   help="the cluster-wide broker default, or the default user / client id")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--add-config", help="k1=v1,k2=v2 (use [a,b] for list values)")
    p.add_argument("--delete-config", help="k1,k2")
    p.add_argument("--all", action="store_true", help="with --describe: all configs, not only overrides")
    p.add_argument("--command-timeout", type=float, default=30.0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    from odradek.client.command_config import admin_config

    if args.zookeeper or args.log_dir:
        from odradek.cli.scram_direct import run_direct

        return run_direct(args)
    scram = _scram_keys(args)
    if args.entity_type in ("users", "clients", "ips") and scram is not True:
        from odradek.cli.quota_configs import run_quotas

        rc = run_quotas(args)
        if rc or scram is False or len(args.entities) > 1 or args.entity_type != "users":
            return rc
    conf: dict[str, Any] = admin_config(args.bootstrap_server, args.command_config)
    admin = AdminClient(conf)
    timeout = args.command_timeout
    if args.entity_type == "users":
        return _users(args, admin)
    if args.entity_type == "brokers" and args.entity_default:
        try:
            return _broker_default(args)
        except OSError as refused:  # cannot connect, TLS refused, SASL refused (SaslClientError)
            print(f"Error: {refused}", file=sys.stderr)
            return 1
    if args.entity_type in ("topics", "groups"):
        if not args.entity_name:
            print(f"Error: --entity-name is required for {args.entity_type}", file=sys.stderr)
            return 1
        if args.entity_type == "topics":
            res = ConfigResource(ConfigResource.Type.TOPIC, args.entity_name)
            label = f"Topic:{args.entity_name}"
        else:  # the GROUP config resource (type 32 on the wire), KIP-848
            res = ConfigResource(ConfigResource.Type.GROUP, args.entity_name)
            label = f"Group:{args.entity_name}"
    else:
        if not args.entity_name:
            print("Error: --entity-name or --entity-default is required for brokers", file=sys.stderr)
            return 1
        res = ConfigResource(ConfigResource.Type.BROKER, args.entity_name)
        label = f"Broker:{args.entity_name}"
    try:
        if args.describe:
            cfg = admin.describe_configs([res], request_timeout=timeout)[res].result(timeout)
            shown = sorted(cfg.values(), key=lambda e: e.name)
            if not args.all:
                shown = [e for e in shown if int(e.source) == _DYNAMIC_SOURCE[args.entity_type]]
            print(f"Dynamic configs for {label} are:" if not args.all else f"All configs for {label} are:")
            for e in shown:
                value = "null" if e.is_sensitive else e.value
                print(f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} source={_SOURCES.get(int(e.source), e.source)}")
            return 0
        entries = []
        for k, v in (parse_add_config(args.add_config) if args.add_config else {}).items():
            entries.append(ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET))
        for k in (args.delete_config.split(",") if args.delete_config else []):
            entries.append(ConfigEntry(k.strip(), None, incremental_operation=AlterConfigOpType.DELETE))
        if not entries:
            print("Error: --alter needs --add-config or --delete-config", file=sys.stderr)
            return 1
        res = ConfigResource(res.restype, res.name, incremental_configs=entries)
        admin.incremental_alter_configs([res], request_timeout=timeout)[res].result(timeout)
        print(f"Completed updating config for {label}.")
        return 0
    except KafkaException as e:
        print(f"Error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1


def _broker_default(args: argparse.Namespace) -> int:
    """The cluster-wide broker default (resource name ""), which confluent-kafka rejects."""
    from odradek.client.wire import WireClient

    label = "Broker:<default>"
    from odradek.client.command_config import client_security

    security = client_security(args.command_config)
    with WireClient(args.bootstrap_server, timeout=args.command_timeout, security=security) as c:
        if args.describe:
            from kio.schema.describe_configs.v4.request import DescribeConfigsResource
            from kio.static.primitive import i8

            resp = c.request(
                32, 4,
                resources=(DescribeConfigsResource(resource_type=i8(4), resource_name="", configuration_keys=None),),
                include_synonyms=False, include_documentation=False,
            )
            result = resp.results[0]
            if result.error_code:
                print(f"Error: {result.error_message}", file=sys.stderr)
                return 1
            print("Default configs for brokers in the cluster are:" if not args.all else f"All configs for {label} are:")
            for e in sorted(result.configs, key=lambda e: e.name):
                if args.all or int(e.config_source) == 3:
                    print(f"  {e.name}={e.value} sensitive={str(e.is_sensitive).lower()} source={_SOURCES.get(int(e.config_source), e.config_source)}")
            return 0
        from kio.schema.incremental_alter_configs.v1.request import AlterableConfig, AlterConfigsResource
        from kio.static.primitive import i8

        ops = [AlterableConfig(name=k, config_operation=i8(0), value=v)
               for k, v in (parse_add_config(args.add_config) if args.add_config else {}).items()]
        ops += [AlterableConfig(name=k.strip(), config_operation=i8(1), value=None)
                for k in (args.delete_config.split(",") if args.delete_config else [])]
        if not ops:
            print("Error: --alter needs --add-config or --delete-config", file=sys.stderr)
            return 1
        resp = c.request(
            44, 1, resources=(AlterConfigsResource(resource_type=i8(4), resource_name="", configs=tuple(ops)),), validate_only=False,
        )
        r = resp.responses[0]
        if r.error_code:
            print(f"Error: {r.error_message}", file=sys.stderr)
            return 1
        print("Completed updating default config for brokers in the cluster.")
        return 0


def _scram_keys(args: argparse.Namespace) -> bool | None:
    """True: an alteration of SCRAM credentials only; False: of quotas only; None: a describe
    (users: both kinds are shown, as kafka-configs.sh does)."""
    keys = list(parse_add_config(args.add_config)) if args.add_config else []
    keys += [k.strip() for k in args.delete_config.split(",")] if args.delete_config else []
    if args.describe or not keys:
        return None
    scram = [k.upper().startswith("SCRAM-") for k in keys]
    if all(scram):
        return True
    if any(scram):
        raise SystemExit("Error: SCRAM credentials and quotas cannot be altered in one command")
    return False


def _users(args: argparse.Namespace, admin: Any) -> int:
    """SCRAM credentials (KIP-554): ``--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'``,
    ``--delete-config SCRAM-SHA-512``, ``--describe``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    timeout = args.command_timeout
    user = args.entity_name
    try:
        if args.describe:
            users = [user] if user else None
            for name, fut in admin.describe_user_scram_credentials(users, request_timeout=timeout).items():
                desc = fut.result(timeout)
                creds = ",".join(f"{i.mechanism.name.replace('_', '-')}=iterations={i.iterations}"
                                 for i in desc.scram_credential_infos)
                print(f"SCRAM credential configs for user-principal '{name}' are {creds}")
            return 0
        if not user:
            print("Error: --entity-name is required for users", file=sys.stderr)
            return 1
        alterations: list[Any] = []
        for mech, value in (parse_add_config(args.add_config) if args.add_config else {}).items():
            fields = dict(item.split("=", 1) for item in value.split(",") if "=" in item)
            if "password" not in fields:
                print(f"Error: {mech} needs password=...", file=sys.stderr)
                return 1
            info = ScramCredentialInfo(ScramMechanism[mech.strip().replace("-", "_")],
                                       int(fields.get("iterations", "4096")))
            alterations.append(UserScramCredentialUpsertion(user, info, fields["password"].encode()))
        for mech in (args.delete_config.split(",") if args.delete_config else []):
            alterations.append(UserScramCredentialDeletion(user, ScramMechanism[mech.strip().replace("-", "_")]))
        if not alterations:
            print("Error: --alter needs --add-config or --delete-config", file=sys.stderr)
            return 1
        for fut in admin.alter_user_scram_credentials(alterations, request_timeout=timeout).values():
            fut.result(timeout)
        print(f"Completed updating config for user {user}.")
        return 0
    except KafkaException as e:
        print(f"Error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 1
    except (KeyError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
