"""DelayedRemoteFetch: a fetch that reads records below a tiered partition's local log start from the remote
store (Kafka's DelayedRemoteFetch, KIP-405), parked in the replica manager's fetch purgatory until its remote
reads are done or remote.fetch.max.wait.ms passes.

The remote reads run on the remote log manager's reader threads (server/remote_log_manager.py), never on the
event loop: each is a :class:`concurrent.futures.Future` whose completion wakes the loop
(``call_soon_threadsafe``), which checks the operation under its own key. The partitions read from the local
log in the same fetch are answered as they were read; a remote partition's result gets the bytes read (one
in-memory buffer in the response beside the file regions), or its error, or nothing if the wait ran out
first (its read is cancelled, as Kafka's DelayedRemoteFetch.onExpiration does).
"""

from __future__ import annotations

from typing import Any

from odradek.log.fetch_isolation import FetchIsolation
from odradek.protocol import errors
from odradek.purgatory import DelayedOperation
from odradek.replication.delayed_fetch import LogReadResult, RemoteFetchInfo


class DelayedRemoteFetch(DelayedOperation[LogReadResult]):
    __slots__ = ("read", "remote")

    def __init__(self, delay_ms: int, read: LogReadResult, remote: list[RemoteFetchInfo]) -> None:
        super().__init__(delay_ms)
        self.read = read
        self.remote = remote

    def try_complete(self, key: object = None) -> bool:
        if all(r.future is not None and r.future.done() for r in self.remote):
            return self.force_complete()
        return False

    def on_complete(self) -> LogReadResult:
        total = self.read.bytes
        has_error = self.read.has_error
        for r in self.remote:
            pr, fut = r.result, r.future
            if pr is None or fut is None:
                continue
            if not fut.done():  # remote.fetch.max.wait.ms ran out: answered without these records
                fut.cancel()
                continue
            try:
                got: Any = fut.result()
            except Exception:  # noqa: BLE001 - logged by the reader; Kafka answers UNKNOWN_SERVER_ERROR
                pr.error_code = errors.UNKNOWN_SERVER_ERROR
                has_error = True
                continue
            if got.error_code != errors.NONE:
                pr.error_code = got.error_code
                has_error = True
                continue
            if got.records:
                pr.records = [got.records]
                pr.records_size = len(got.records)
                total += len(got.records)
            if r.isolation is FetchIsolation.TXN_COMMITTED:
                pr.aborted_transactions = got.aborted
        return LogReadResult(self.read.partitions, total, has_error, None)
