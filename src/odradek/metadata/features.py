"""Kafka 4.4's metadata versions and feature levels, and the bootstrap records a new cluster starts with.

``METADATA_VERSIONS`` is Kafka's MetadataVersion enum from the first KRaft bootstrap version (3.3-IV3,
level 7, MetadataVersion.MINIMUM_VERSION) to 4.4-IV2 (level 33, LATEST_PRODUCTION); 4.5-IV0 (34) is not
production-ready and ``kafka-storage format`` refuses it, as here. ``FEATURES`` are Kafka's production
features (server-common's ``Feature.PRODUCTION_FEATURES``) with the highest level each supports and the
default level a given metadata.version gives it (``Feature.defaultLevel``); ``kraft.version`` is decided
by the quorum's shape instead (Kafka's ``Formatter.effectiveKRaftFeatureLevel``: 1 with a dynamic quorum,
KIP-853, else 0). The tables were read from Kafka 4.4's jars (``MetadataVersion.VERSIONS``,
``Feature.defaultLevel``, ``FeatureVersion.dependencies``).

:func:`bootstrap_levels` is ``Formatter.calculateEffectiveReleaseVersion`` and
``calculateEffectiveFeatureLevels``, with Kafka's messages; :func:`bootstrap_records` the
FeatureLevelRecords of ``BootstrapMetadata.fromVersions``: metadata.version first, then each other
feature by name, a level of 0 left out, kraft.version never (it is a KRaftVersionRecord control record
of the bootstrap snapshot, KIP-853).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.metadata.records import FeatureLevelRecord, RecordAndVersion

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

# MetadataVersion.VERSIONS of Kafka 4.4 that are production-ready: (version string, feature level)
METADATA_VERSIONS: tuple[tuple[str, int], ...] = (
    ("3.3-IV3", 7), ("3.4-IV0", 8), ("3.5-IV0", 9), ("3.5-IV1", 10), ("3.5-IV2", 11), ("3.6-IV0", 12),
    ("3.6-IV1", 13), ("3.6-IV2", 14), ("3.7-IV0", 15), ("3.7-IV1", 16), ("3.7-IV2", 17), ("3.7-IV3", 18),
    ("3.7-IV4", 19), ("3.8-IV0", 20), ("3.9-IV0", 21), ("4.0-IV0", 22), ("4.0-IV1", 23), ("4.0-IV2", 24),
    ("4.0-IV3", 25), ("4.1-IV0", 26), ("4.1-IV1", 27), ("4.2-IV0", 28), ("4.2-IV1", 29), ("4.3-IV0", 30),
    ("4.4-IV0", 31), ("4.4-IV1", 32), ("4.4-IV2", 33),
)
LEVEL_OF: dict[str, int] = dict(METADATA_VERSIONS)
NAME_OF: dict[int, str] = {level: name for name, level in METADATA_VERSIONS}
LATEST_PRODUCTION = 33
MINIMUM_VERSION = 7
IBP_3_5_IV2 = 11  # SCRAM records (MetadataVersion.isScramSupported)


@dataclass(frozen=True)
class Feature:
    """One of Kafka's production features: its highest level and the metadata.version each default starts at."""

    name: str
    max_level: int
    defaults: tuple[tuple[int, int], ...]  # (from metadata.version level, default level), ascending
    requires: Mapping[int, Mapping[str, int]]  # level -> the features (and levels) it depends on

    def default_level(self, metadata_version: int) -> int:
        level = 0
        for since, value in self.defaults:
            if metadata_version >= since:
                level = value
        return level


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("eligible.leader.replicas.version", 1, ((26, 1),), {1: {METADATA_VERSION: 23}}),
    Feature("group.version", 1, ((22, 1),), {}),
    Feature(KRAFT_VERSION, 1, ((21, 1),), {}),
    Feature("share.version", 2, ((28, 1), (31, 2)), {}),
    Feature("streams.version", 1, ((29, 1),), {}),
    Feature("transaction.version", 2, ((24, 2),), {}),
)}


class FeatureError(ValueError):
    """A release version or feature level ``kafka-storage format`` refuses (Kafka's FormatterException)."""


def metadata_version_of(release: str) -> int:
    """MetadataVersion.fromVersionString: "4.4-IV2", or a release without its IV ("4.4": its latest)."""
    if release in LEVEL_OF:
        return LEVEL_OF[release]
    last = [level for name, level in METADATA_VERSIONS if name.split("-")[0] == release]
    if last:
        return last[-1]
    raise FeatureError(f"Unknown metadata.version '{release}'. Supported metadata.version are: "
                       + ", ".join(name for name, _ in METADATA_VERSIONS))


def bootstrap_levels(
    release_version: str | None, features: Mapping[str, int], *, dynamic_quorum: bool
) -> dict[str, int]:
    """Every feature's starting level, metadata.version's included, as Kafka's Formatter decides them from
    ``--release-version`` and ``--feature name=level`` (``features``)."""
    if METADATA_VERSION in features:
        if release_version is not None:
            raise FeatureError(f"Use --release-version instead of --feature {METADATA_VERSION}=X to avoid "
                               "ambiguity.")
        mv = features[METADATA_VERSION]
        if mv not in NAME_OF:
            raise FeatureError(f"Unknown metadata.version {mv}. Supported metadata.version are: "
                               + ", ".join(f"{level} ({name})" for name, level in METADATA_VERSIONS))
    elif release_version is not None:
        mv = metadata_version_of(release_version)
    else:
        mv = LATEST_PRODUCTION
    for name in features:
        if name != METADATA_VERSION and name not in FEATURES:
            raise FeatureError(f"Unsupported feature: {name}. Supported features are: {', '.join(sorted(FEATURES))}")
    levels: dict[str, int] = dict(features)
    levels[METADATA_VERSION] = mv
    for f in FEATURES.values():
        if f.name == KRAFT_VERSION:
            levels[KRAFT_VERSION] = _kraft_level(features.get(KRAFT_VERSION), dynamic_quorum)
        elif f.name not in levels:
            levels[f.name] = f.default_level(mv)
    for name, level in sorted(levels.items()):
        if name == METADATA_VERSION:
            continue
        f = FEATURES[name]
        if not 0 <= level <= f.max_level:
            raise FeatureError(f"No feature:{name} with feature level {level}")
        for dep, dep_level in f.requires.get(level, {}).items():
            if levels.get(dep, 0) < dep_level:  # Feature.validateVersion
                raise FeatureError(f"{name} could not be set to {level} because it depends on {dep} level "
                                   f"{dep_level}")
    return levels


def _kraft_level(given: int | None, dynamic_quorum: bool) -> int:
    """Formatter.effectiveKRaftFeatureLevel (Kafka 4.4's messages)."""
    if given is None:
        return 1 if dynamic_quorum else 0
    if given == 0 and dynamic_quorum:
        raise FeatureError(f"Cannot set kraft.version to {given} if one of the flags --standalone, "
                           "--initial-controllers, or --no-initial-controllers is used. For dynamic controllers "
                           "support, try removing the --feature flag for kraft.version.")
    if given != 0 and not dynamic_quorum:
        raise FeatureError(f"Cannot set kraft.version to {given} unless controller.quorum.voters is empty and one "
                           "of the flags --standalone, --initial-controllers, or --no-initial-controllers is used. "
                           "For dynamic controllers support, try using one of --standalone, --initial-controllers, "
                           "or --no-initial-controllers and removing controller.quorum.voters.")
    return given


def bootstrap_records(levels: Mapping[str, int]) -> list[RecordAndVersion]:
    """BootstrapMetadata.fromVersions: metadata.version's FeatureLevelRecord, then the other features with a
    level above 0 by name (kraft.version is not a metadata record)."""
    out = [RecordAndVersion(FeatureLevelRecord(name=METADATA_VERSION, feature_level=levels[METADATA_VERSION]), 0)]
    for name in sorted(levels):
        if name in (METADATA_VERSION, KRAFT_VERSION) or levels[name] <= 0:
            continue
        out.append(RecordAndVersion(FeatureLevelRecord(name=name, feature_level=levels[name]), 0))
    return out
