import pytest

from odradek.protocol import errors
from odradek.protocol.fetch_response import PartitionResult
from odradek.server.fetch_session import (
    CachedPartition,
    FetchSessionCache,
    SessionError,
    apply_incremental,
    has_news,
)


def cp(offset: int = 0) -> CachedPartition:
    return CachedPartition(offset, 1024, -1)


def test_create_get_and_epochs() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000)
    s = cache.create([(("t", 0), cp())], now_ms=0)
    assert s is not None and s.epoch == 1
    assert cache.get(s.session_id, 1, 10) is s
    with pytest.raises(SessionError) as e:
        cache.get(s.session_id, 2, 10)
    assert e.value.error_code == errors.INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(SessionError) as e:
        cache.get(s.session_id + 1, 1, 10)
    assert e.value.error_code == errors.FETCH_SESSION_ID_NOT_FOUND


def test_eviction_only_of_old_sessions() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=1000)
    first = cache.create([], now_ms=0)
    assert cache.create([], now_ms=500) is None  # full, and the only session is too young
    second = cache.create([], now_ms=1500)
    assert second is not None and first is not None and first.session_id not in cache.sessions


def test_incremental_updates_and_news() -> None:
    cache = FetchSessionCache()
    s = cache.create([(("t", 0), cp()), (("t", 1), cp())], 0)
    assert s is not None
    apply_incremental(s, [(("t", 0), cp(5)), (("u", 0), cp())], [("t", 1)])
    assert list(s.partitions) == [("t", 0), ("u", 0)] and s.partitions[("t", 0)].fetch_offset == 5 and s.epoch == 2
    cached = s.partitions[("t", 0)]
    pr = PartitionResult(0, high_watermark=5, last_stable_offset=5, log_start_offset=0)
    assert has_news(cached, pr)  # first time the client hears of these values
    assert not has_news(cached, PartitionResult(0, high_watermark=5, last_stable_offset=5, log_start_offset=0))
    assert has_news(cached, PartitionResult(0, error_code=errors.OFFSET_OUT_OF_RANGE, high_watermark=5,
                                            last_stable_offset=5, log_start_offset=0))
