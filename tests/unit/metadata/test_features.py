"""odradek.metadata.features: Kafka 4.4's metadata versions and the bootstrap feature levels of kafka-storage format."""

from __future__ import annotations

import pytest

from odradek.metadata.features import (
    FeatureError,
    bootstrap_levels,
    bootstrap_records,
    metadata_version_of,
)
from odradek.metadata.records import FeatureLevelRecord


def test_release_versions() -> None:
    assert metadata_version_of("4.4-IV2") == 33
    assert metadata_version_of("3.3-IV3") == 7
    assert metadata_version_of("4.0") == 25  # a release without its IV: its last one
    with pytest.raises(FeatureError, match=r"^Unknown metadata.version '4.5-IV0'\. Supported metadata.version are: "
                                           r"3\.3-IV3, .*, 4\.4-IV2$"):
        metadata_version_of("4.5-IV0")


# Kafka 4.4's `kafka-storage version-mapping` (kraft.version aside: the quorum's shape decides it)
@pytest.mark.parametrize(("release", "expected"), [
    ("3.8-IV0", {"metadata.version": 20}),
    ("4.0-IV0", {"metadata.version": 22, "group.version": 1}),
    ("4.0-IV3", {"metadata.version": 25, "group.version": 1, "transaction.version": 2}),
    ("4.2-IV1", {"metadata.version": 29, "group.version": 1, "transaction.version": 2,
                 "eligible.leader.replicas.version": 1, "share.version": 1, "streams.version": 1}),
    ("4.4-IV2", {"metadata.version": 33, "group.version": 1, "transaction.version": 2,
                 "eligible.leader.replicas.version": 1, "share.version": 2, "streams.version": 1}),
])
def test_default_levels(release: str, expected: dict[str, int]) -> None:
    levels = bootstrap_levels(release, {}, dynamic_quorum=False)
    assert {k: v for k, v in levels.items() if v and k != "kraft.version"} == expected
    assert levels["kraft.version"] == 0
    assert bootstrap_levels(release, {}, dynamic_quorum=True)["kraft.version"] == 1
    records = bootstrap_records(levels)
    assert [(r.record.name, r.record.feature_level) for r in records  # type: ignore[attr-defined]
            ] == [("metadata.version", expected["metadata.version"])] + sorted(
        (k, v) for k, v in expected.items() if k != "metadata.version")
    assert all(isinstance(r.record, FeatureLevelRecord) and r.version == 0 for r in records)


def test_explicit_levels() -> None:
    levels = bootstrap_levels(None, {"metadata.version": 20, "group.version": 1}, dynamic_quorum=False)
    assert levels["metadata.version"] == 20 and levels["group.version"] == 1 and levels["transaction.version"] == 0
    with pytest.raises(FeatureError, match="Cannot set kraft.version to 0 if one of the flags"):
        bootstrap_levels(None, {"kraft.version": 0}, dynamic_quorum=True)
    with pytest.raises(FeatureError, match="^Unknown metadata.version 99"):
        bootstrap_levels(None, {"metadata.version": 99}, dynamic_quorum=False)
