from odradek.replication.isr import LeaderState


def leader(isr=(1, 2, 3)) -> LeaderState:
    s = LeaderState(1, 5, [1, 2, 3], list(isr), epoch_start_offset=0, high_watermark=0)
    s.start(0)
    return s


def test_high_watermark_is_min_leo_over_isr_and_never_moves_back() -> None:
    s = leader()
    s.on_follower_fetch(2, 10, 10, 100)
    s.on_follower_fetch(3, 7, 10, 100)
    assert s.maybe_advance_high_watermark(10) and s.high_watermark == 7
    s.on_follower_fetch(3, 10, 10, 200)
    assert s.maybe_advance_high_watermark(10) and s.high_watermark == 10
    s.isr = [1]  # after a shrink the leader alone decides, but never backwards
    assert not s.maybe_advance_high_watermark(9) and s.high_watermark == 10


def test_lagging_follower_leaves_and_rejoins_the_isr() -> None:
    s = leader()
    s.on_follower_fetch(2, 100, 100, 1000)
    s.on_follower_fetch(3, 50, 100, 1000)  # behind
    assert s.isr_to_shrink(20_000, 30_000) == []
    assert s.isr_to_shrink(31_000, 30_000) == [3]
    s.isr = [1, 2]
    s.high_watermark = 100
    assert not s.joins_isr(3)
    s.on_follower_fetch(3, 100, 120, 32_000)
    assert s.joins_isr(3)
    assert not s.joins_isr(2)  # already in


def test_a_stopped_follower_is_not_taken_back_on_another_follower_s_fetch() -> None:
    """Nothing produced: follower 3 stopped fetching with its log end at the high watermark and was shrunk
    out; the leader's record of it still says "caught up", but only a fetch of its own may bring it back
    (the broker asks only about the follower whose fetch it served)."""
    s = leader()
    s.on_follower_fetch(2, 10, 10, 100)
    s.on_follower_fetch(3, 10, 10, 100)
    assert s.maybe_advance_high_watermark(10)
    assert s.isr_to_shrink(40_000, 30_000) == [2, 3]
    s.on_follower_fetch(2, 10, 10, 40_000)
    s.isr = [1, 2]  # 3 shrunk out
    assert not s.joins_isr(4)  # not a replica at all


def test_caught_up_at_previous_fetch_time() -> None:
    s = leader()
    s.on_follower_fetch(2, 0, 100, 1000)  # leader had 100 at this fetch
    s.on_follower_fetch(2, 100, 150, 5000)  # now reached what the leader had at the last fetch
    assert s.followers[2].last_caught_up_ms == 1000
    assert s.isr_to_shrink(30_500, 30_000) == [3]  # 3 never fetched; 2 caught up at 1,000
    assert s.isr_to_shrink(31_500, 30_000) == [2, 3]
