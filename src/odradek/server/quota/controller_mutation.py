"""The controller mutation quota of one request (KIP-599) — pure, the clock passed in.

``controller_mutation_rate`` bounds the partitions a principal creates or deletes per second:
CreateTopics counts each new topic's partitions, CreatePartitions the partitions added,
DeleteTopics each deleted topic's partitions (validate-only requests count nothing). The rate is
a token bucket (:class:`odradek.server.quota.rate.TokenBucket`, refilled at the quota per second
up to ``quota * quota.window.num * quota.window.size.seconds``); a bucket in deficit is the
violation, and the throttle time is the time to earn the deficit back.

As Kafka's ControllerMutationQuotaManager, a request gets one of:

- :class:`StrictControllerMutationQuota`, for the versions that know THROTTLING_QUOTA_EXCEEDED
  (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): before each topic's mutation the
  bucket is checked; in deficit, that topic (and every later one of the request) fails with
  THROTTLING_QUOTA_EXCEEDED, otherwise the topic's partitions are taken even when that overdraws
  the bucket (a topic is never refused for its own size).
- :class:`PermissiveControllerMutationQuota`, for older versions: every mutation is recorded and
  done; a deficit only sets the throttle time.

Either way the response carries the throttle time and the connection is muted for it (KIP-219).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.server.quota.rate import TokenBucket

THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."

# the first version of each API answered with THROTTLING_QUOTA_EXCEEDED (KafkaApis' strictSinceVersion)
STRICT_SINCE_VERSION = {19: 6, 20: 5, 37: 3}  # CreateTopics, DeleteTopics, CreatePartitions


class ThrottlingQuotaExceeded(Exception):
    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__(THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        self.throttle_time_ms = throttle_time_ms


class ControllerMutationQuota:
    """No quota applies (Kafka's UnboundedControllerMutationQuota); the base of the other two."""

    def __init__(self) -> None:
        self._last_throttle_ms = 0
        self._last_recorded_ms = 0
        self.now_ms: Callable[[], int] = lambda: 0

    @property
    def bounded(self) -> bool:
        return False

    @property
    def is_exceeded(self) -> bool:
        return False

    def record(self, permits: float) -> None:
        """Count ``permits`` partition mutations; raises :class:`ThrottlingQuotaExceeded` (strict only)."""

    def _update_throttle(self, throttle_ms: int, now_ms: int) -> None:
        self._last_throttle_ms = throttle_ms
        self._last_recorded_ms = now_ms

    def throttle_time_ms(self) -> int:
        """What is left of the last violation's throttle time (Kafka's AbstractControllerMutationQuota)."""
        if self._last_throttle_ms <= 0:
            return 0
        return max(0, self._last_throttle_ms - (self.now_ms() - self._last_recorded_ms))


UNBOUNDED = ControllerMutationQuota()


class _Bounded(ControllerMutationQuota):
    def __init__(self, bucket: TokenBucket, now_ms: Callable[[], int]) -> None:
        super().__init__()
        self.bucket = bucket
        self.now_ms = now_ms

    @property
    def bounded(self) -> bool:
        return True


class StrictControllerMutationQuota(_Bounded):
    @property
    def is_exceeded(self) -> bool:
        return self._last_throttle_ms > 0

    def record(self, permits: float) -> None:
        now = self.now_ms()
        if self.bucket.measure(now) < 0:  # Kafka's Sensor.checkQuotas on a TokenBucket
            self._update_throttle(self.bucket.throttle_time_ms(now), now)
            raise ThrottlingQuotaExceeded(self._last_throttle_ms)
        self.bucket.record(permits, now)


class PermissiveControllerMutationQuota(_Bounded):
    def record(self, permits: float) -> None:
        now = self.now_ms()
        self.bucket.record(permits, now)
        throttle = self.bucket.throttle_time_ms(now)
        if throttle > 0:
            self._update_throttle(throttle, now)


def new_quota(bucket: TokenBucket | None, now_ms: Callable[[], int], api_key: int,
              api_version: int) -> ControllerMutationQuota:
    """The quota of one request: unbounded without a bucket, strict or permissive by version."""
    if bucket is None:
        return UNBOUNDED
    if api_version >= STRICT_SINCE_VERSION[api_key]:
        return StrictControllerMutationQuota(bucket, now_ms)
    return PermissiveControllerMutationQuota(bucket, now_ms)
