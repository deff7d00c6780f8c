import pytest

from odradek.protocol import errors
from odradek.protocol.fetch_response import PartitionResult
from odradek.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
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
    assert cache.get(s.session_id, 1) is s
    with pytest.raises(SessionError) as e:
        cache.get(s.session_id, 2)
    assert e.value.error_code == errors.INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(SessionError) as e:
        cache.get(s.session_id + 1, 1)
    assert e.value.error_code == errors.FETCH_SESSION_ID_NOT_FOUND


def test_eviction_only_of_old_sessions() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=1000)
    first = cache.create([], now_ms=0)
    assert cache.create([], now_ms=500) is None  # full, and the only session is too young
    second = cache.create([], now_ms=1500)
    assert second is not None and first is not None and first.session_id not in cache.sessions


def parts(n: int, topic: str = "t") -> list[tuple[tuple[str, int], CachedPartition]]:
    return [((topic, p), cp()) for p in range(n)]


def test_a_flood_of_new_sessions_keeps_the_cache_and_its_sessions() -> None:
    """KIP-227: while every session is younger than the eviction time, newcomers of the same size
    are turned away (no session), and the sessions in use stay."""
    cache = FetchSessionCache(max_slots=10, eviction_ms=1000)
    kept = [cache.create(parts(1), now_ms=i) for i in range(10)]
    assert all(s is not None for s in kept)
    assert all(cache.create(parts(1), now_ms=100 + i // 20) is None for i in range(10_000))
    assert len(cache.sessions) == 10 and cache.evictions == 0 and cache.total_partitions == 10
    assert {s.session_id for s in kept if s is not None} == set(cache.sessions)
    assert len(cache._by_all) + len(cache._by_privileged) <= 4 * 10 + 64  # the heaps stay bounded too


def test_a_stale_session_goes_first() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000)
    a = cache.new_context(12, 0, INITIAL_EPOCH, parts(5), [], 0).session
    b = cache.new_context(12, 0, INITIAL_EPOCH, parts(5), [], 0).session
    assert a is not None and b is not None
    cache.new_context(12, b.session_id, 1, [], [], 900)  # b used since; a last used at 0
    c = cache.create(parts(1), now_ms=1001)  # a is stale (unused for more than 1000 ms)
    assert c is not None and set(cache.sessions) == {b.session_id, c.session_id}


def test_a_bigger_session_evicts_a_smaller_old_one_in_use() -> None:
    """Rule 3 of tryEvict: a newcomer with more partitions evicts the smallest session created more
    than eviction_ms ago, even one in use; never a young one."""
    cache = FetchSessionCache(max_slots=2, eviction_ms=1000)
    small = cache.create(parts(1), now_ms=0)
    big = cache.create(parts(3), now_ms=0)
    assert small is not None and big is not None
    assert cache.create(parts(2), now_ms=500) is None  # both younger than 1000 ms
    for now in (600, 1200):  # used all along: never stale; at 1200 both are old
        for s in (small, big):
            cache.new_context(12, s.session_id, s.epoch, [], [], now)
    assert cache.create(parts(1), now_ms=1300) is None  # not more partitions than the smallest
    new = cache.create(parts(2), now_ms=1300)
    assert new is not None and small.session_id not in cache.sessions and big.session_id in cache.sessions
    assert cache.evictions == 1
    # the newcomer is young and safe; the big one is old and smaller than a 4-partition newcomer
    newer = cache.create(parts(4), now_ms=1400)
    assert newer is not None and big.session_id not in cache.sessions and new.session_id in cache.sessions


def test_a_followers_session_evicts_a_consumers_at_once() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=120_000)
    consumers = [cache.create(parts(50), now_ms=0) for _ in range(2)]
    ctx = cache.new_context(12, 0, INITIAL_EPOCH, parts(1), [], 10, privileged=True)
    assert ctx.session is not None and ctx.session.privileged
    assert sum(s is not None and s.session_id in cache.sessions for s in consumers) == 1
    # a young follower session is not evictable, by consumers or by another follower
    assert cache.create(parts(1000), now_ms=20) is None
    other = cache.new_context(12, 0, INITIAL_EPOCH, parts(1), [], 30, privileged=True)
    assert other.session is not None  # it took the other consumer's place
    assert cache.new_context(12, 0, INITIAL_EPOCH, parts(9), [], 40, privileged=True).session is None


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


# -- the KIP-227 epoch rules (FetchSessionCache.new_context, Kafka's FetchManager.newContext)


def test_before_v7_there_are_no_sessions() -> None:
    cache = FetchSessionCache()
    req = [(("t", 0), cp())]
    ctx = cache.new_context(6, 0, 0, req, [], 0)  # epoch 0 means nothing before v7
    assert ctx.session is None and not ctx.incremental and ctx.partitions == req and ctx.response_session_id == 0
    assert not cache.sessions


def test_initial_epoch_opens_a_session_and_closes_the_named_one() -> None:
    cache = FetchSessionCache()
    req = [(("t", 0), cp()), (("t", 1), cp())]
    first = cache.new_context(12, 0, INITIAL_EPOCH, req, [], 0)
    assert first.session is not None and not first.incremental and first.partitions == req
    sid = first.response_session_id
    assert sid != 0 and list(cache.sessions) == [sid] and first.session.epoch == 1
    again = cache.new_context(12, sid, INITIAL_EPOCH, req[:1], [], 1)  # a new full fetch replaces it
    assert again.session is not None and again.response_session_id != sid
    assert list(cache.sessions) == [again.response_session_id]


def test_final_epoch_is_sessionless_and_closes_the_session() -> None:
    cache = FetchSessionCache()
    sid = cache.new_context(12, 0, INITIAL_EPOCH, [], [], 0).response_session_id
    ctx = cache.new_context(12, sid, FINAL_EPOCH, [(("t", 0), cp())], [], 1)
    assert ctx.session is None and ctx.response_session_id == 0 and not ctx.incremental
    assert sid not in cache.sessions
    assert cache.new_context(12, 0, FINAL_EPOCH, [], [], 1).error_code == errors.NONE  # sessionless full fetch


def test_incremental_fetch_reads_the_whole_session() -> None:
    cache = FetchSessionCache()
    full = cache.new_context(12, 0, INITIAL_EPOCH, [(("t", 0), cp()), (("t", 1), cp())], [], 0)
    sid = full.response_session_id
    ctx = cache.new_context(12, sid, 1, [(("u", 0), cp(7))], [("t", 1)], 5)
    assert ctx.incremental and ctx.error_code == errors.NONE and ctx.response_session_id == sid
    assert [k for k, _ in ctx.partitions] == [("t", 0), ("u", 0)] and ctx.partitions[1][1].fetch_offset == 7
    assert cache.sessions[sid].epoch == 2 and cache.sessions[sid].last_used_ms == 5


def test_session_errors() -> None:
    cache = FetchSessionCache()
    sid = cache.new_context(12, 0, INITIAL_EPOCH, [(("t", 0), cp())], [], 0).response_session_id
    stale = cache.new_context(12, sid, 5, [], [], 1)
    assert stale.error_code == errors.INVALID_FETCH_SESSION_EPOCH and stale.partitions == []
    assert stale.response_session_id == 0
    assert cache.sessions[sid].epoch == 1  # an error leaves the session as it was
    assert cache.new_context(12, sid + 1, 1, [], [], 1).error_code == errors.FETCH_SESSION_ID_NOT_FOUND
    assert cache.new_context(12, 0, 1, [], [], 1).error_code == errors.FETCH_SESSION_ID_NOT_FOUND


def test_full_cache_answers_without_a_session() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=1000)
    cache.new_context(12, 0, INITIAL_EPOCH, [], [], 0)
    ctx = cache.new_context(12, 0, INITIAL_EPOCH, [(("t", 0), cp())], [], 10)
    assert ctx.session is None and ctx.response_session_id == 0 and ctx.partitions == [(("t", 0), cp())]


def test_update_and_generate_full_vs_incremental() -> None:
    cache = FetchSessionCache()
    full = cache.new_context(12, 0, INITIAL_EPOCH, [(("t", 0), cp()), (("t", 1), cp())], [], 0)
    assert full.session is not None
    reads = [(k, c, PartitionResult(k[1], high_watermark=3, last_stable_offset=3, log_start_offset=0))
             for k, c in full.partitions]
    reads[0][2].records_size = 10  # t-0 returned records: it moves behind t-1
    assert [pr.partition for _k, _c, pr in full.update_and_generate(reads)] == [0, 1]
    assert list(full.session.partitions) == [("t", 1), ("t", 0)]
    inc = cache.new_context(12, full.response_session_id, 1, [], [], 1)
    reads = [(k, c, PartitionResult(k[1], high_watermark=3, last_stable_offset=3, log_start_offset=0))
             for k, c in inc.partitions]
    assert inc.update_and_generate(reads) == []  # nothing new since the full fetch
    reads[1][2].high_watermark = 4
    assert [k for k, _c, _pr in inc.update_and_generate(reads)] == [("t", 0)]
