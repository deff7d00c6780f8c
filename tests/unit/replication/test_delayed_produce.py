import asyncio

from odradek.protocol import errors
from odradek.protocol.records import build_batch, complete_batches_length
from odradek.replication.delayed_produce import DelayedProduce


def test_partial_trailing_batch_is_cut() -> None:
    a = build_batch([(b"k", b"v" * 50)], timestamp=1)
    b = build_batch([(b"k", b"w" * 80)], timestamp=2)
    assert complete_batches_length(a + b) == len(a) + len(b)
    assert complete_batches_length(a + b[:30]) == len(a)
    assert complete_batches_length(a[:5]) == 0
    assert complete_batches_length(b"") == 0


def test_completes_when_every_partition_is_replicated() -> None:
    async def main() -> None:
        hw = {("t", 0): 0, ("t", 1): 0}
        waiters: dict = {}

        def check(tp: tuple[str, int], required: int) -> int | None:
            return errors.NONE if hw[tp] >= required else None

        d = DelayedProduce(waiters, {("t", 0): 5, ("t", 1): 3}, check, 5000, lambda res: dict(res))
        assert not d.future.done()
        hw[("t", 0)] = 5
        d.try_complete(("t", 0))
        assert not d.future.done()
        hw[("t", 1)] = 9
        d.try_complete(("t", 1))
        assert d.future.result() == {("t", 0): errors.NONE, ("t", 1): errors.NONE}
        assert not waiters

    asyncio.run(main())


def test_times_out_with_request_timed_out() -> None:
    async def main() -> None:
        waiters: dict = {}
        d = DelayedProduce(waiters, {("t", 0): 5}, lambda tp, r: None, 20, lambda res: dict(res))
        assert await d.future == {("t", 0): errors.REQUEST_TIMED_OUT}
        assert not waiters

    asyncio.run(main())
