"""KIP-584 feature control: Kafka's FeatureControlManager checks, the /feature znode payload,
the controller's update against a store, and the broker's finalized-feature cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.controller import features as ft
from odradek.controller import zk_data as zd
from odradek.controller.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, FeatureUpdate
from odradek.controller.store import LocalStore
from odradek.protocol import errors
from odradek.server.finalized_features import FinalizedFeatureCache

CURRENT = {"group.version": 1, "share.version": 1, "transaction.version": 1}


def test_defaults_finalize_the_highest_supported_levels() -> None:
    assert ft.default_finalized() == {"group.version": 1, "share.version": 1, "transaction.version": 1}
    assert ft.default_finalized({"a": (0, 0), "b": (0, 3)}) == {"b": 3}


@pytest.mark.parametrize(
    ("update", "code", "why"),
    [
        (FeatureUpdate("group.version", 2), errors.INVALID_UPDATE_VERSION, "only supports versions 0-1"),
        (FeatureUpdate("transaction.version", 3), errors.INVALID_UPDATE_VERSION, "only supports versions 0-2"),
        (FeatureUpdate("metadata.version", 1), errors.INVALID_UPDATE_VERSION, "does not support the given feature"),
        (FeatureUpdate("group.version", -1, SAFE_DOWNGRADE), errors.INVALID_UPDATE_VERSION, "cannot be less than 0"),
        (FeatureUpdate("group.version", 0, UPGRADE), errors.INVALID_UPDATE_VERSION, "without setting the upgrade type"),
        (FeatureUpdate("group.version", 0, 0), errors.INVALID_REQUEST, "upgrade type"),
        (FeatureUpdate("group.version", 0, 7), errors.INVALID_REQUEST, "upgrade type"),
    ],
)
def test_invalid_updates_get_kafkas_errors(update: FeatureUpdate, code: int, why: str) -> None:
    r = ft.apply_updates([update], CURRENT)
    assert r.error_code == code
    assert r.error_message is not None and why in r.error_message
    assert r.error_message.startswith(f"Invalid update version {update.max_version_level} for feature {update.feature}.")
    assert r.finalized == CURRENT


def test_upgrade_to_a_lower_level_via_downgrade_type_is_refused() -> None:
    r = ft.apply_updates([FeatureUpdate("group.version", 1, SAFE_DOWNGRADE)], {})
    assert r.error_code == errors.INVALID_UPDATE_VERSION and "Can't downgrade to a newer version" in str(r.error_message)


@pytest.mark.parametrize("kind", [SAFE_DOWNGRADE, UNSAFE_DOWNGRADE])
def test_downgrade_to_zero_removes_the_feature(kind: int) -> None:
    r = ft.apply_updates([FeatureUpdate("group.version", 0, kind)], CURRENT)
    assert (r.error_code, r.finalized) == (errors.NONE, {"share.version": 1, "transaction.version": 1})


def test_upgrade_and_same_level_are_accepted() -> None:
    r = ft.apply_updates([FeatureUpdate("group.version", 1)], {})
    assert (r.error_code, r.finalized) == (errors.NONE, {"group.version": 1})
    same = ft.apply_updates([FeatureUpdate("group.version", 1, SAFE_DOWNGRADE)], CURRENT)
    assert (same.error_code, same.finalized) == (errors.NONE, CURRENT)


def test_one_bad_update_fails_the_whole_request() -> None:
    r = ft.apply_updates([FeatureUpdate("group.version", 0, SAFE_DOWNGRADE), FeatureUpdate("transaction.version", 9)],
                         CURRENT)
    assert r.error_code == errors.INVALID_UPDATE_VERSION and r.finalized == CURRENT
    dup = ft.apply_updates([FeatureUpdate("group.version", 1), FeatureUpdate("group.version", 1)], {})
    assert dup.error_code == errors.INVALID_REQUEST and dup.finalized == {}


def test_znode_payload_round_trip_and_layout() -> None:
    data = ft.encode_znode({"group.version": 1, "transaction.version": 0})
    assert json.loads(data) == {
        "version": 1, "status": 1, "features": {"group.version": {"min_version_level": 1, "max_version_level": 1}},
    }
    assert ft.decode_znode(data) == {"group.version": 1}
    # a disabled node finalizes nothing; a node without min levels (later layouts) is read too
    assert ft.decode_znode(b'{"version":1,"status":0,"features":{"group.version":{"max_version_level":1}}}') == {}
    assert ft.decode_znode(b'{"version":2,"status":1,"features":{"group.version":{"max_version_level":1}}}') == {
        "group.version": 1}


@pytest.mark.parametrize("bad", [b"", b"[]", b"{", b'{"features":[]}', b'{"features":{"a":{"max_version_level":"x"}}}',
                                 b"\xff\xfe"])
def test_malformed_znode_is_a_value_error(bad: bytes) -> None:
    with pytest.raises(ValueError):
        ft.decode_znode(bad)


def test_incompatibilities_name_what_the_broker_cannot_serve() -> None:
    assert ft.incompatibilities({"group.version": 1}) == []
    assert ft.incompatibilities({"group.version": 2, "x.version": 1}) == [
        "group.version=2 is finalized but this broker supports 0-1",
        "x.version=1 is finalized but not supported by this broker",
    ]


def test_controller_update_against_the_store(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "meta.json")
    zd.ensure_feature_znode(store, ft.default_finalized())
    zd.ensure_feature_znode(store, {})  # an existing node is kept
    assert FinalizedFeatureCache.read(store) == ({"group.version": 1, "share.version": 1, "transaction.version": 1}, 0)
    # validate only: the answer, no write
    code, _, finalized, epoch = zd.update_features(store, [FeatureUpdate("group.version", 0, SAFE_DOWNGRADE)], True)
    assert (code, finalized, epoch) == (errors.NONE, {"share.version": 1, "transaction.version": 1}, 0)
    assert FinalizedFeatureCache.read(store) == ({"group.version": 1, "share.version": 1, "transaction.version": 1}, 0)
    code, _, finalized, epoch = zd.update_features(store, [FeatureUpdate("group.version", 0, SAFE_DOWNGRADE)], False)
    assert (code, finalized, epoch) == (errors.NONE, {"share.version": 1, "transaction.version": 1}, 1)
    # persisted: a new store on the same file reads it back with its epoch
    assert FinalizedFeatureCache.read(LocalStore(tmp_path / "meta.json")) == ({"share.version": 1, "transaction.version": 1}, 1)
    code, msg, finalized, epoch = zd.update_features(store, [FeatureUpdate("group.version", 3)], False)
    assert code == errors.INVALID_UPDATE_VERSION and finalized == {"share.version": 1, "transaction.version": 1} and epoch == 1


def test_controller_update_of_a_corrupt_znode_fails_without_writing(tmp_path: Path) -> None:
    store = LocalStore(None)
    store.create(ft.FEATURE_ZNODE, b"not json")
    code, _, _, _ = zd.update_features(store, [FeatureUpdate("group.version", 1)], False)
    assert code == errors.FEATURE_UPDATE_FAILED
    assert store.get(ft.FEATURE_ZNODE)[0] == b"not json"
    assert FinalizedFeatureCache.read(store) is None


def test_cache_keeps_the_newest_epoch_and_tells_listeners() -> None:
    cache = FinalizedFeatureCache()
    seen: list[dict[str, int]] = []
    cache.listeners.append(seen.append)
    assert cache.level("group.version") == 0 and cache.snapshot() == ({}, -1)
    cache.update({"group.version": 1}, 3)
    cache.update({}, 2)  # stale
    cache.update({"group.version": 1}, 4)  # same set, newer epoch: no notice
    assert cache.snapshot() == ({"group.version": 1}, 4) and cache.level("group.version") == 1
    assert seen == [{"group.version": 1}]
