"""KIP-599's strict and permissive controller mutation quotas over a token bucket."""

from __future__ import annotations

import pytest

from odradek.server.quota.controller_mutation import (
    UNBOUNDED,
    PermissiveControllerMutationQuota,
    StrictControllerMutationQuota,
    ThrottlingQuotaExceeded,
    new_quota,
)
from odradek.server.quota.manager import CONTROLLER_MUTATION, ClientQuotaManager, QuotaConfig, entity
from odradek.server.quota.rate import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def test_strict_takes_a_topic_while_tokens_remain_then_refuses() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, samples=2, window_ms=1000, now_ms=clock.ms)  # burst 4
    q = StrictControllerMutationQuota(bucket, clock)
    q.record(6)  # 4 tokens left: the whole topic is taken, overdrawing to -2
    assert not q.is_exceeded and q.throttle_time_ms() == 0
    with pytest.raises(ThrottlingQuotaExceeded) as e:
        q.record(1)
    assert e.value.throttle_time_ms == 1000  # 2 tokens at 2/s
    assert q.is_exceeded and q.throttle_time_ms() == 1000
    clock.ms += 400
    assert q.throttle_time_ms() == 600
    with pytest.raises(ThrottlingQuotaExceeded):
        q.record(1)  # still in deficit
    clock.ms += 700
    q2 = StrictControllerMutationQuota(bucket, clock)  # the next request
    q2.record(1)
    assert not q2.is_exceeded


def test_permissive_records_everything_and_only_throttles() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, samples=2, window_ms=1000, now_ms=clock.ms)
    q = PermissiveControllerMutationQuota(bucket, clock)
    q.record(3)
    assert q.throttle_time_ms() == 0
    q.record(3)  # -2
    q.record(2)  # -4: never raises
    assert not q.is_exceeded and q.throttle_time_ms() == 2000


def test_version_picks_the_quota_and_no_bucket_is_unbounded() -> None:
    clock = Clock()
    b = TokenBucket(1.0)
    assert isinstance(new_quota(b, clock, 19, 6), StrictControllerMutationQuota)
    assert isinstance(new_quota(b, clock, 19, 5), PermissiveControllerMutationQuota)
    assert isinstance(new_quota(b, clock, 20, 5), StrictControllerMutationQuota)
    assert isinstance(new_quota(b, clock, 20, 4), PermissiveControllerMutationQuota)
    assert isinstance(new_quota(b, clock, 37, 3), StrictControllerMutationQuota)
    assert isinstance(new_quota(b, clock, 37, 2), PermissiveControllerMutationQuota)
    assert new_quota(None, clock, 19, 7) is UNBOUNDED
    UNBOUNDED.record(1_000_000)
    assert UNBOUNDED.throttle_time_ms() == 0 and not UNBOUNDED.bounded


def test_the_manager_shares_one_bucket_per_entity() -> None:
    m = ClientQuotaManager(CONTROLLER_MUTATION, QuotaConfig(samples=2, window_s=1))
    assert m.bucket("alice", "c1", 0) is None  # no quota
    m.update_quota(entity(user="alice"), 5.0)
    b1 = m.bucket("alice", "c1", 0)
    assert b1 is not None and b1.burst == 10.0
    assert m.bucket("alice", "c2", 0) is b1  # a user quota is shared by the user's client ids
    assert m.bucket("bob", "c1", 0) is None
