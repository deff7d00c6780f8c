"""Feature versioning (KIP-584): the features this broker supports, the finalized set, and
the validation of UpdateFeatures — pure functions, no I/O.

Features and what their levels gate here (Kafka's names and level meanings):

* ``group.version`` (Kafka's GroupVersion), supported 0-1.
  0: only the classic group protocol; ConsumerGroupHeartbeat and ConsumerGroupDescribe
  (KIP-848) are answered UNSUPPORTED_VERSION, as Kafka 4.0's KafkaApis does.
  1 (GV_1): the consumer rebalance protocol of KIP-848 is served.
* ``share.version`` (Kafka's ShareVersion), supported 0-1.
  0: share groups (KIP-932) are off: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and ShareAcknowledge
  are answered UNSUPPORTED_VERSION. 1 (SV_1, Kafka 4.2+): share groups are served. Kafka 4.4's SV_2 (the
  share groups' dead letter queue, KIP-1191) is not supported here.
* ``transaction.version`` (Kafka's TransactionVersion), supported 0-2.
  0 (TV_0): the transaction coordinator writes TransactionLogValue version 0.
  1 (TV_1): it writes the flexible TransactionLogValue version 1 (KIP-890's tagged fields).
  2 (TV_2, KIP-890 part 2): ApiVersions advertises Produce v12, TxnOffsetCommit v5,
  AddPartitionsToTxn v5 and EndTxn v5; a Produce v12 / TxnOffsetCommit v5 adds its partition
  to the transaction implicitly, and every EndTxn v5 bumps the producer epoch.

Defaults: a cluster without a finalized set gets every feature at its default level
(:data:`DEFAULT_LEVELS`, else its highest supported one). Kafka 4.0 finalizes
transaction.version=2 at format time; here the default stays 1 and 2 is reached with
``odradek features upgrade --feature transaction.version=2``, since no Python client speaks
TV2 yet and TV1 clients are served the same either way.

Finalized features are kept in Kafka's ZooKeeper-mode ``/feature`` znode (Kafka's FeatureZNode);
the finalized epoch is that znode's version. Payload (JSON)::

    {"version": 1, "status": 1,
     "features": {"group.version": {"min_version_level": 1, "max_version_level": 1}, ...}}

``status`` 1 is Enabled, 0 Disabled (a disabled node finalizes nothing). A feature finalized at
level 0 is absent from ``features`` (KIP-584: level 0 means "not finalized"); readers accept a
feature without ``min_version_level`` (level 1 then).

UpdateFeatures validation follows Kafka's FeatureControlManager: every update is checked
before any is applied and one failure fails the whole request (INVALID_UPDATE_VERSION with
Kafka's message; an unknown upgrade type is INVALID_REQUEST).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek.protocol import errors

FEATURE_ZNODE = "/feature"
ZNODE_VERSION = 1
STATUS_ENABLED = 1
STATUS_DISABLED = 0

GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"

# name -> (min supported, max supported)
SUPPORTED: dict[str, tuple[int, int]] = {
    GROUP_VERSION: (0, 1),
    TRANSACTION_VERSION: (0, 2),
    SHARE_VERSION: (0, 1),
}

# name -> the level a cluster without a finalized set starts at (else the highest supported)
DEFAULT_LEVELS: dict[str, int] = {TRANSACTION_VERSION: 1}

# UpdateFeatures' upgrade types (FeatureUpdate.UpgradeType)
UNKNOWN = 0
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3
UPGRADE_TYPE_NAMES = {UPGRADE: "upgrade", SAFE_DOWNGRADE: "safe-downgrade", UNSAFE_DOWNGRADE: "unsafe-downgrade"}


def default_finalized(supported: Mapping[str, tuple[int, int]] = SUPPORTED) -> dict[str, int]:
    """Every supported feature at its default level, else its highest (levels 0 are not listed)."""
    levels = {name: min(DEFAULT_LEVELS.get(name, hi), hi) for name, (_, hi) in supported.items()}
    return {name: lvl for name, lvl in levels.items() if lvl > 0}


def encode_znode(finalized: Mapping[str, int]) -> bytes:
    features = {n: {"min_version_level": 1, "max_version_level": lvl} for n, lvl in sorted(finalized.items()) if lvl > 0}
    return json.dumps({"version": ZNODE_VERSION, "status": STATUS_ENABLED, "features": features},
                      separators=(",", ":")).encode()


def decode_znode(data: bytes) -> dict[str, int]:
    """The finalized levels in a /feature payload; ValueError when it is malformed."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"/feature is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("features", {}), dict):
        raise ValueError("/feature has no features map")
    if int(doc.get("status", STATUS_ENABLED)) != STATUS_ENABLED:
        return {}
    out: dict[str, int] = {}
    for name, rng in doc.get("features", {}).items():
        if not isinstance(rng, dict) or not isinstance(rng.get("max_version_level"), int):
            raise ValueError(f"/feature: bad range for {name!r}")
        if rng["max_version_level"] > 0:
            out[str(name)] = int(rng["max_version_level"])
    return out


def incompatibilities(finalized: Mapping[str, int], supported: Mapping[str, tuple[int, int]] = SUPPORTED) -> list[str]:
    """Why a broker with ``supported`` cannot serve ``finalized`` (empty: it can). Kafka's
    BrokerFeatures.incompatibleFeatures: a finalized feature unknown here or out of range."""
    out = []
    for name, level in sorted(finalized.items()):
        rng = supported.get(name)
        if rng is None:
            out.append(f"{name}={level} is finalized but not supported by this broker")
        elif not rng[0] <= level <= rng[1]:
            out.append(f"{name}={level} is finalized but this broker supports {rng[0]}-{rng[1]}")
    return out


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: int = UPGRADE


@dataclass(frozen=True, slots=True)
class UpdateResult:
    error_code: int
    error_message: str | None
    finalized: dict[str, int]  # the finalized set after the update (unchanged on error)


def _invalid(feature: str, level: int, why: str) -> tuple[int, str]:
    return errors.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {feature}. {why}"


def check_update(
    u: FeatureUpdate, current: Mapping[str, int], supported: Mapping[str, tuple[int, int]] = SUPPORTED
) -> tuple[int, str] | None:
    """Kafka's FeatureControlManager.updateFeature checks for one update; None when valid."""
    if u.upgrade_type not in UPGRADE_TYPE_NAMES:
        return errors.INVALID_REQUEST, f"Invalid update version {u.max_version_level} for feature {u.feature}. " \
            "The controller does not support the given upgrade type."
    level = u.max_version_level
    if level < 0:
        return _invalid(u.feature, level, "A feature version cannot be less than 0.")
    rng = supported.get(u.feature)
    if rng is None:
        return _invalid(u.feature, level, "The controller does not support the given feature.")
    if not rng[0] <= level <= rng[1]:
        return _invalid(u.feature, level, f"The controller only supports versions {rng[0]}-{rng[1]}.")
    now = current.get(u.feature, 0)
    if level < now and u.upgrade_type == UPGRADE:
        return _invalid(u.feature, level, "Can't downgrade the version of this feature without setting the "
                        "upgrade type to either safe or unsafe downgrade.")
    if level > now and u.upgrade_type != UPGRADE:
        return _invalid(u.feature, level, "Can't downgrade to a newer version.")
    return None


def apply_updates(
    updates: Sequence[FeatureUpdate],
    current: Mapping[str, int],
    supported: Mapping[str, tuple[int, int]] = SUPPORTED,
) -> UpdateResult:
    """All updates or none: the first invalid one fails the request (Kafka's atomic update)."""
    seen: set[str] = set()
    out = dict(current)
    for u in updates:
        if u.feature in seen:
            return UpdateResult(errors.INVALID_REQUEST, f"Feature {u.feature} appears more than once in the request.",
                                dict(current))
        seen.add(u.feature)
        bad = check_update(u, current, supported)
        if bad is not None:
            return UpdateResult(bad[0], bad[1], dict(current))
        if u.max_version_level == 0:
            out.pop(u.feature, None)
        else:
            out[u.feature] = u.max_version_level
    return UpdateResult(errors.NONE, None, out)
