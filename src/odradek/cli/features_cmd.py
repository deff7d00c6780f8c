"""``odradek features``: kafka-features.sh (KIP-584) through ApiVersions v3 and UpdateFeatures (57).

* ``describe``: one line per supported feature, Kafka's format::

      Feature: group.version	SupportedMinVersion: 0	SupportedMaxVersion: 1	FinalizedVersionLevel: 1	Epoch: 0

* ``upgrade --feature NAME=LEVEL ...`` / ``downgrade --feature NAME=LEVEL ... [--unsafe]`` /
  ``disable --feature NAME ...`` (a downgrade to 0), each with ``--dry-run`` (validate only).
  Lines as Kafka's tool prints them: ``group.version was upgraded to 1.``, ``group.version can be
  downgraded to 0.``, or ``Could not upgrade group.version to 2. <broker's message>``; the exit
  code is 1 when the update failed.

UpdateFeatures goes to the controller (found through Metadata), as Kafka's admin client sends it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.client.wire import WireClient

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


class FeatureArgumentError(ValueError):
    pass


def add_parser(sub: Any) -> None:
    p = sub.add_parser("features", help="describe and change finalized features (kafka-features.sh, KIP-584)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-timeout", type=float, default=30.0)
    p.add_argument("--command-config", metavar="FILE", help="a client properties file (security settings)")
    ops = p.add_subparsers(dest="op", required=True)
    ops.add_parser("describe", help="supported and finalized features")
    for name, what in (("upgrade", "raise finalized levels"), ("downgrade", "lower finalized levels"),
                       ("disable", "downgrade features to level 0")):
        q = ops.add_parser(name, help=what)
        q.add_argument("--feature", action="append", required=True,
                       metavar="NAME" if name == "disable" else "NAME=LEVEL")
        q.add_argument("--dry-run", action="store_true", help="validate only")
        if name != "upgrade":
            q.add_argument("--unsafe", action="store_true", help="allow a lossy (unsafe) downgrade")
    p.set_defaults(func=run)


def parse_features(specs: list[str], *, disable: bool = False) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in specs:
        if disable:
            name, level = spec, 0
        else:
            name, sep, value = spec.partition("=")
            if not sep or not name:
                raise FeatureArgumentError(f"Can't parse feature={spec}: expected NAME=LEVEL")
            try:
                level = int(value)
            except ValueError:
                raise FeatureArgumentError(f"Can't parse feature={spec}: {value!r} is not a level") from None
        if name in out:
            raise FeatureArgumentError(f"Feature {name} was specified more than once.")
        out[name] = level
    return out


def describe_lines(response: Any) -> list[str]:
    finalized = {f.name: int(f.max_version_level) for f in response.finalized_features}
    epoch = int(response.finalized_features_epoch)
    lines = []
    for f in sorted(response.supported_features, key=lambda f: f.name):
        level = finalized.get(f.name)
        lines.append(
            f"Feature: {f.name}\tSupportedMinVersion: {int(f.min_version)}\tSupportedMaxVersion: {int(f.max_version)}"
            f"\tFinalizedVersionLevel: {level if level is not None else '-'}\tEpoch: {epoch if epoch >= 0 else '-'}"
        )
    return lines


def _controller(w: WireClient) -> tuple[str, int]:
    md = w.request(3, 1, topics=())
    for b in md.brokers:
        if int(b.node_id) == int(md.controller_id):
            return str(b.host), int(b.port)
    raise RuntimeError(f"no controller is known (controller id {int(md.controller_id)})")


def update(bootstrap: str, features: dict[str, int], upgrade_type: int, dry_run: bool,
           timeout: float, security: Any = None) -> tuple[int, str | None]:
    """(error code, message) of one UpdateFeatures v1 request at the controller."""
    from kio.schema.update_features.v1.request import FeatureUpdateKey
    from kio.static.primitive import i8, i16

    with WireClient(bootstrap, timeout=timeout, security=security) as w:
        host, port = _controller(w)
    keys = tuple(FeatureUpdateKey(feature=n, max_version_level=i16(lvl), upgrade_type=i8(upgrade_type))
                 for n, lvl in features.items())
    with WireClient(f"{host}:{port}", timeout=timeout, security=security) as c:
        r = c.request(57, 1, feature_updates=keys, validate_only=dry_run)
    code, message = int(r.error_code), r.error_message
    for res in r.results:
        if int(res.error_code) and not code:
            code, message = int(res.error_code), res.error_message
    return code, message


def run(args: argparse.Namespace) -> int:
    from odradek.client.command_config import client_security

    security = client_security(args.command_config)
    if args.op == "describe":
        with WireClient(args.bootstrap_server, timeout=args.command_timeout, security=security) as w:
            r = w.request(18, 4, client_software_name="odradek-features", client_software_version="1")
        for line in describe_lines(r):
            print(line)
        return 0
    try:
        features = parse_features(args.feature, disable=args.op == "disable")
    except FeatureArgumentError as e:
        print(e, file=sys.stderr)
        return 1
    action = "upgrade" if args.op == "upgrade" else "downgrade"
    kind = UPGRADE if args.op == "upgrade" else UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE
    code, message = update(args.bootstrap_server, features, kind, args.dry_run, args.command_timeout, security)
    done = "can be" if args.dry_run else "was"
    for name, level in features.items():
        if code:
            print(f"Could not {'disable' if args.op == 'disable' else action} {name}"
                  f"{'' if args.op == 'disable' else f' to {level}'}. {message or ''}".rstrip())
        elif args.op == "disable":
            print(f"{name} {done} disabled.")
        else:
            print(f"{name} {done} {action}d to {level}.")
    return 1 if code else 0
