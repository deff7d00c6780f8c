"""One client connection: non-blocking socket I/O on the event loop, zero-copy writes.

The socket is driven with ``loop.add_reader``/``add_writer`` rather than an asyncio
transport so responses can mix in-memory buffers (``sendmsg``) with file regions sent
by ``os.sendfile`` straight from segment files. Requests are decoded and handed to
their handler in arrival order; responses go out strictly in request order even when
handlers finish out of order (a long-polling fetch ahead of a metadata request).

Resource limits a connection honours (Kafka's names): ``socket.request.max.bytes`` (a larger
declared size closes it, Kafka's InvalidReceiveException); ``queued.max.request.bytes`` (each
request's size is reserved in the broker's RequestMemoryPool when its size field is read and
released when it is answered; refused, the connection stops reading until memory is released);
``connections.max.idle.ms`` (``last_active`` is the monotonic time of the last read or write of
any bytes, which the broker's idle sweep compares, as Kafka's Selector expires idle channels).
A ``MemoryError`` while reading closes the one connection.

Security (odradek.security): an SSL or SASL_SSL listener's connections are
:class:`odradek.server.tls_connection.TlsConnection`, whose reads and writes go through TLS
(:func:`~odradek.server.tls_connection.connection_for` picks the class). On a SASL listener a
:class:`SaslServer` admits only ApiVersions, SaslHandshake and SaslAuthenticate until the client
is authenticated. Who the peer is, and what it may send yet, is the connection's
:class:`~odradek.server.channel_auth.ChannelAuthenticator` (the authentication timeout, KIP-368's
session expiry, the principal); a connection that failed authentication is closed once its error
response is sent. The frames are cut by ``protocol.framing.FrameDecoder``; this module does the
socket I/O, hands each request to its handler and queues the answers in request order.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from odradek.metrics.error_counts import entity_error_counts
from odradek.metrics.stats import FETCH_CONSUMER, FETCH_FOLLOWER
from odradek.protocol import codec
from odradek.protocol import interbroker as ib
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.fetch_response import FileRegion
from odradek.protocol.framing import (
    FrameDecoder,
    FrameError,
    parse_request_header,
    peek_header,
    response_header,
)
from odradek.purgatory import DelayedResponse
from odradek.security import api_acls
from odradek.security.acl import CLUSTER_NAME, ResourceType
from odradek.security.sasl import SaslState
from odradek.security.tls_channel import TlsChannel
from odradek.server.channel_auth import ChannelAuthenticator
from odradek.server.handlers import HandlerError, RawResponse, ResultKind, kind_of, registry
from odradek.server.handlers.api_versions import unsupported_version_response
from odradek.server.quota import request_time
from odradek.server.request_context import RequestContext
from odradek.server.turns import DispatchTurns
from odradek.server.txn_version import transaction_version

if TYPE_CHECKING:
    from odradek.connection_quotas import RequestMemoryPool
    from odradek.metrics.stats import RequestStats
    from odradek.security.listeners import ListenerSecurity
    from odradek.security.sasl import SaslServer
    from odradek.server.request_context import BrokerServices

log = logging.getLogger("odradek.network")

_RECV_SIZE = 256 * 1024
_MAX_OUT_BYTES = 64 * 1024 * 1024  # stop reading while this much is queued for the peer
_MAX_PENDING = 128  # pipelined requests awaiting a response before reading pauses
IOV_MAX = 512  # buffers per sendmsg (the kernel's UIO_MAXIOV is 1024)
# a file region up to this size is read (pread) and sent with the response's other buffers in one
# sendmsg rather than by sendfile between two sends: three segments on the wire for a small fetch
# response cost both ends more than the copy (see docs/architecture.md, "zero-copy fetch")
INLINE_REGION_BYTES = 16 << 10
_scratch = threading.local()


def _fetch_metric_key(request: Any) -> int:
    """Kafka's RequestMetrics name of a Fetch: FetchFollower from a replica, FetchConsumer otherwise."""
    state = getattr(request, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
    return FETCH_FOLLOWER if replica_id is not None and replica_id >= 0 else FETCH_CONSUMER


def _recv_scratch() -> memoryview:
    """This thread's receive buffer. Every connection of an event loop reads into the same
    one: the decoder copies what it needs out of it before the next read."""
    mv: memoryview | None = getattr(_scratch, "buf", None)
    if mv is None:
        mv = _scratch.buf = memoryview(bytearray(_RECV_SIZE))
    return mv


class _Slot:
    __slots__ = ("correlation_id", "flexible", "parts", "size", "done", "mem", "key", "version", "t_recv",
                 "t_start", "t_local", "t_done", "t_queued", "sent_at")

    def __init__(self, correlation_id: int, flexible: bool, mem: int = 0) -> None:
        self.correlation_id = correlation_id
        self.flexible = flexible
        self.parts: list[bytes | FileRegion] = []
        self.size = 0
        self.done = False
        self.mem = mem  # bytes reserved in the request memory pool until answered
        # RequestMetrics (odradek.metrics.stats): the request's name key (-1: not measured) and the
        # perf_counter_ns times of its phases; sent_at: the connection's byte count once it is written
        self.key = -1
        self.version = 0
        self.t_recv = self.t_start = self.t_local = self.t_done = self.t_queued = 0
        self.sent_at = 0


class InterBrokerHandler(Protocol):
    def handle_request(
        self, api_key: int, body: dict[str, Any], listener: str | None = None, peer: str = ""
    ) -> dict[str, Any] | asyncio.Future[Any]: ...


@dataclass(frozen=True, slots=True)
class ConnectionEdges:
    """What a connection needs from the broker (Kafka's Processor is given its RequestChannel,
    MemoryPool and ConnectionQuotas the same way): the services its requests' handlers use,
    the limits, and the broker's hooks."""

    services: BrokerServices
    max_request_bytes: int  # socket.request.max.bytes
    request_memory: RequestMemoryPool | None  # queued.max.request.bytes, None when unbounded
    on_closed: Callable[[Connection], None]  # the broker forgets it (connection quotas, accept)
    on_read: Callable[[], None]  # a read burst was served (the broker's idle detection)
    # cluster mode: the controller-to-broker requests (protocol.interbroker); None when embedded
    inter_broker: InterBrokerHandler | None
    # each listener's security (TLS context, SASL mechanisms); a listener absent is PLAINTEXT
    listener_security: Mapping[str, ListenerSecurity] = field(default_factory=dict)
    # Kafka's RequestMetrics, kept when metrics are served (http.listeners); None: not measured
    request_stats: RequestStats | None = None
    # the requests handled per event loop turn across the broker's connections (server/turns.py)
    turns: DispatchTurns = field(default_factory=DispatchTurns)


class Connection:
    def __init__(self, edges: ConnectionEdges, sock: socket.socket, peer: tuple[Any, ...], listener: str) -> None:
        self.edges = edges
        self.services = edges.services
        self.sock = sock
        self.fd = sock.fileno()
        self.peer_host = str(peer[0]) if peer else ""
        self.quota_ip = ""  # the address the broker's ConnectionQuotas counts this connection under
        self.peer = f"{peer[0]}:{peer[1]}" if len(peer) >= 2 else str(peer)
        self.listener = listener
        self.loop = asyncio.get_running_loop()
        self.pool = edges.request_memory
        self.decoder = FrameDecoder(edges.max_request_bytes, None if self.pool is None else self._reserve)
        self.held = 0  # bytes this connection holds in the request memory pool
        self._frame_mem = 0  # the frame being handled: its reservation, taken by its slot
        self.memory_muted = False
        self.throttled_until = 0.0  # monotonic time a quota mute ends (KIP-219); 0: not muted
        self.last_active = time.monotonic()
        self._scratch = _recv_scratch()
        self.pending: deque[_Slot] = deque()
        self.out: deque[Any] = deque()  # bytes | memoryview | file region tuple
        self.out_bytes = 0
        self.closed = False
        self.reading = False
        self.writing = False
        self.on_close: list[Callable[[], None]] = []
        self._batching = False
        self.security: ListenerSecurity | None = edges.listener_security.get(listener)
        # who is on the other end and what it may send yet (server.channel_auth)
        self.auth = ChannelAuthenticator(self.security, self.decoder, edges.max_request_bytes)
        self._close_when_flushed = False
        self.rstats = edges.request_stats
        self._burst_ns = 0  # when the frames being dispatched were received (perf_counter_ns)
        self._queued_total = 0  # bytes ever queued for the peer (out_bytes of them are not written yet)
        self._sending: deque[_Slot] = deque()  # measured responses queued, not yet written
        # frames read but left for a later loop turn (DispatchTurns); reading waits until they are handled
        self._deferred: list[bytes | memoryview] | None = None
        self._deferred_ns = 0  # when they were received (perf_counter_ns, for RequestMetrics)

    # -- lifecycle
    def start(self) -> None:
        self.sock.setblocking(False)
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.auth.start(self.loop, self.close)
        self._resume_reading()

    # -- authentication (server.channel_auth): the handlers see the principal and the SASL exchange
    @property
    def principal(self) -> str:
        return self.auth.principal

    @property
    def sasl(self) -> SaslServer | None:
        return self.auth.sasl

    @property
    def tls(self) -> TlsChannel | None:
        return self.auth.tls

    @property
    def authenticated(self) -> bool:
        return self.auth.authenticated

    def sasl_authenticated(self, principal: str) -> int:
        """SaslAuthenticate completed (or a re-authentication did): see ChannelAuthenticator."""
        return self.auth.sasl_authenticated(principal)

    @property
    def failed_authentication_delay_s(self) -> float:
        return self.auth.failed_authentication_delay_s

    def close_after_response(self) -> None:
        """Failed authentication: close once what is queued (the error response) is written."""
        self._close_when_flushed = True
        self._pause_reading()

    def close(self, reason: str | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        if reason:
            log.info("closing connection from %s: %s", self.peer, reason)
        if self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False
        if self.writing:
            self.loop.remove_writer(self.fd)
            self.writing = False
        self.auth.cancel()
        if self.pool is not None:
            self.pool.forget(self._memory_available)
            if self.held:
                self.pool.release(self.held)
                self.held = 0
        with contextlib.suppress(OSError):
            self.sock.close()
        self.pending.clear()
        self.out.clear()
        self._deferred = None
        for cb in list(self.on_close):
            try:
                cb()
            except Exception:
                log.exception("close callback failed")
        self.on_close.clear()
        self.edges.on_closed(self)

    def _pause_reading(self) -> None:
        if self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False

    def _resume_reading(self) -> None:
        if not self.reading and not self.closed and not self._close_when_flushed:
            self.loop.add_reader(self.fd, self._on_readable)
            self.reading = True

    def _maybe_resume(self) -> None:
        if (
            not self.reading
            and self.out_bytes < _MAX_OUT_BYTES
            and len(self.pending) < _MAX_PENDING
            and not self.memory_muted
            and not self.throttled_until
            and self._deferred is None
        ):
            self._resume_reading()

    def throttle(self, ms: int) -> None:
        """KIP-219: a client over its quota is not read from for ``ms`` (its response still goes out)."""
        until = time.monotonic() + ms / 1000.0
        if ms <= 0 or self.closed or until <= self.throttled_until:
            return
        self.throttled_until = until
        self._pause_reading()
        self.loop.call_later(ms / 1000.0, self._end_throttle)

    def _end_throttle(self) -> None:
        if self.throttled_until and time.monotonic() + 0.001 >= self.throttled_until:
            self.throttled_until = 0.0
            self._maybe_resume()

    # -- request memory (queued.max.request.bytes)
    def _reserve(self, n: int) -> bool:
        assert self.pool is not None
        if self.pool.try_reserve(n):
            self.held += n
            return True
        return False

    def _release(self, n: int) -> None:
        if n and self.pool is not None and not self.closed:  # close() released all it held
            self.held -= n
            self.pool.release(n)

    def _memory_available(self) -> bool:
        """The pool has memory again: decode what was left waiting, then read on."""
        if self.closed:
            return True
        self.memory_muted = False
        try:
            frames = self.decoder.feed(b"")
        except FrameError as e:  # pragma: no cover - the bytes were checked when first fed
            log.warning("bad frame from %s: %s", self.peer, e)
            self.close()
            return True
        self._dispatch(frames)
        if self.closed:
            return True
        if self.decoder.blocked:
            self._mute_for_memory()
            return False
        self._maybe_resume()
        return True

    def _mute_for_memory(self) -> None:
        assert self.pool is not None
        self.memory_muted = True
        self._pause_reading()
        self.pool.wait(self._memory_available)

    # -- reading
    def _on_readable(self) -> None:
        decoder = self.decoder
        sock = self.sock
        scratch = self._scratch
        while True:
            target = decoder.recv_target()
            try:
                n = sock.recv_into(scratch if target is None else target)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.close(f"read error: {e}")
                return
            if not n:
                self.close()
                return
            try:
                frames = decoder.feed(scratch[:n]) if target is None else decoder.advance(n)
            except (FrameError, MemoryError) as e:
                self._refuse_input(e)
                return
            # a large frame still filling: read on while the socket has data (one event loop
            # round trip per socket-buffer's worth of a 1 MB produce request costs more)
            if frames or decoder.recv_target() is None:
                break
        self.last_active = time.monotonic()
        self.edges.on_read()
        self._dispatch(frames)
        if decoder.blocked and not self.closed:
            self._mute_for_memory()

    def _refuse_input(self, e: FrameError | MemoryError) -> None:
        """A frame that cannot be read (malformed, or no memory for its buffer) closes this
        connection only: the broker and its other connections stay."""
        if isinstance(e, MemoryError):
            log.error("out of memory reading a request from %s; closing the connection", self.peer)
        else:
            log.warning("bad frame from %s: %s", self.peer, e)
        self.close()

    def _dispatch(self, frames: list[bytes | memoryview], received_ns: int = 0) -> None:
        if self._deferred is not None:  # behind the frames already waiting for a later turn
            self._deferred += frames
            return
        if self.rstats is not None:
            self._burst_ns = received_ns or time.perf_counter_ns()
        turns = self.edges.turns
        loop = self.loop
        # responses finished while handling this burst go out in one write
        self._batching = True
        try:
            for i, frame in enumerate(frames):
                if self.closed:
                    return
                if turns.spent(loop) and i:
                    self._defer(frames[i:])
                    break
                if self.pool is not None:
                    self._frame_mem = len(frame)
                    self._on_frame(frame)
                    if self._frame_mem:  # no slot took it (no response, or the connection closed)
                        self._release(self._frame_mem)
                        self._frame_mem = 0
                else:
                    self._on_frame(frame)
        finally:
            self._batching = False
        if self._output_waiting() and not self.writing and not self.closed:
            self._flush()
        if self.out_bytes >= _MAX_OUT_BYTES or len(self.pending) >= _MAX_PENDING:
            self._pause_reading()

    def _defer(self, frames: list[bytes | memoryview]) -> None:
        """Leave ``frames`` for a later loop turn (this one has spent its budget) and read no more
        until they are handled."""
        self._deferred = frames
        self._deferred_ns = self._burst_ns
        self._pause_reading()
        self.edges.turns.defer(self.loop, self._run_deferred)

    def _run_deferred(self) -> None:
        frames, self._deferred = self._deferred, None
        if self.closed or not frames:
            return
        self._dispatch(frames, self._deferred_ns)
        if not self.closed:
            self._maybe_resume()

    def _output_waiting(self) -> bool:
        """Whether a flush has anything to write (a TLS connection may always have records)."""
        return bool(self.out)

    def _slot(self, correlation_id: int, flexible: bool) -> _Slot:
        """The response slot of the frame being handled; it carries the frame's pool reservation."""
        slot = _Slot(correlation_id, flexible, self._frame_mem)
        self._frame_mem = 0
        self.pending.append(slot)
        return slot

    def _on_frame(self, frame: bytes | memoryview) -> None:
        sasl = self.sasl
        if sasl is not None and sasl.raw_tokens and sasl.state is SaslState.AUTHENTICATE:
            self._on_raw_token(sasl, bytes(frame))
            return
        try:
            api_key, api_version, correlation_id = peek_header(frame)
        except FrameError as e:
            log.warning("bad request header from %s: %s", self.peer, e)
            self.close()
            return
        refused = self.auth.refusal(api_key)
        if refused is not None:
            self.close(refused)
            return
        handler = registry.get(api_key)
        if handler is None and api_key in ib.SCHEMAS and self.edges.inter_broker is not None:
            self._on_interbroker(frame, api_key, api_version, correlation_id)
            return
        if handler is None:
            log.warning("unknown api key %d from %s; closing", api_key, self.peer)
            self.close()
            return
        if not handler.min_version <= api_version <= handler.max_version:
            if api_key == ApiKey.API_VERSIONS:
                slot = self._slot(correlation_id, False)
                self._complete(slot, unsupported_version_response(transaction_version(self.services.features)))
                return
            log.warning(
                "unsupported version %d of api %d from %s (supported %d-%d); closing",
                api_version, api_key, self.peer, handler.min_version, handler.max_version,
            )
            self.close()
            return
        try:
            if handler.decode is not None:  # hand-written codec (Produce)
                flexible = api_version >= handler.first_flexible
                header = parse_request_header(frame, flexible)
                request = handler.decode(api_version, frame, header.body_offset)
            else:
                flexible = codec.response_header_flexible(api_key, api_version)
                header = parse_request_header(frame, codec.request_header_flexible(api_key, api_version))
                if handler.check_frame is not None:
                    why = handler.check_frame(self.services, api_version, frame, header.body_offset)
                    if why is not None:
                        log.warning("refusing a request (api %d v%d) from %s before decoding it: %s; closing",
                                    api_key, api_version, self.peer, why)
                        self.close()
                        return
                request = codec.decode_request(api_key, api_version, frame, header.body_offset)
        except (FrameError, codec.DecodeError) as e:
            log.warning("malformed request (api %d v%d) from %s: %s", api_key, api_version, self.peer, e)
            self.close()
            return
        slot = self._slot(correlation_id, flexible)
        ctx = RequestContext(self.services, self, api_key, api_version, correlation_id, header.client_id)
        try:
            started = time.perf_counter_ns()
            result = handler.handle(ctx, request)
            local_done = time.perf_counter_ns()
            result = request_time.charge(ctx, local_done - started, result)  # request_percentage
        except HandlerError as e:
            log.warning("invalid request (api %d v%d) from %s: %s", api_key, api_version, self.peer, e)
            self.close()
            return
        except Exception:
            log.exception("handler for api %d v%d failed; closing connection from %s", api_key, api_version, self.peer)
            self.close()
            return
        stats = self.rstats
        if stats is not None:
            slot.key = api_key if api_key != ApiKey.FETCH else _fetch_metric_key(request)
            slot.version = api_version
            slot.t_recv, slot.t_start, slot.t_local = self._burst_ns or started, started, local_done
        kind = kind_of(result)
        if kind is ResultKind.NONE:
            self.pending.remove(slot)
            self._release(slot.mem)
            if stats is not None:
                stats.record(slot.key, api_version, slot.t_recv, started, local_done, local_done, local_done,
                             local_done)
        elif kind is ResultKind.DELAYED:
            assert isinstance(result, DelayedResponse)
            self._answer_when_done(slot, result)
        elif kind is ResultKind.FUTURE:
            assert isinstance(result, asyncio.Future)
            result.add_done_callback(lambda f, s=slot: self._on_future(s, f))  # type: ignore[misc]
        else:
            self._complete(slot, result)

    def _on_raw_token(self, sasl: SaslServer, token: bytes) -> None:
        """A SASL token after SaslHandshake v0: answered by a bare size-prefixed token; a
        refused one closes the connection (there is no error field to carry it)."""
        result = sasl.authenticate(token)
        if result.error_code != 0:
            log.info("SASL authentication failed from %s: %s", self.peer, result.error_message)
            self.close_after_response()
            if not self.out and not self.pending:
                self.close("authentication failed")
            return
        if sasl.principal is not None and sasl.state is SaslState.COMPLETE:
            self.sasl_authenticated(sasl.principal)
        self.out.append(len(result.token).to_bytes(4, "big"))
        self.out.append(result.token)
        self.out_bytes += 4 + len(result.token)
        if not self._batching and not self.writing:
            self._flush()

    def park(self, fut: asyncio.Future[Any], cancel: Callable[[], None]) -> None:
        """A delayed operation of this connection: cancelled if the connection closes first;
        forgotten once it completes (so long-lived connections do not accumulate them)."""
        self.on_close.append(cancel)

        def forget(_f: asyncio.Future[Any]) -> None:
            with contextlib.suppress(ValueError):
                self.on_close.remove(cancel)

        fut.add_done_callback(forget)

    def _answer_when_done(self, slot: _Slot, delayed: DelayedResponse) -> None:
        """Answer ``slot`` from the delayed operation's completion itself (no Future in between: see
        purgatory.DelayedResponse); the operation is cancelled if the connection closes first."""
        cancel = delayed.op.cancel
        on_close = self.on_close
        on_close.append(cancel)

        def done(response: Any, error: BaseException | None) -> None:
            with contextlib.suppress(ValueError):
                on_close.remove(cancel)
            if self.closed:
                return
            if error is not None:
                if isinstance(error, asyncio.CancelledError):
                    self.close("request cancelled")
                else:
                    log.error("delayed request failed on connection %s", self.peer, exc_info=error)
                    self.close()
                return
            try:
                result = delayed.build(response)
            except Exception:
                log.exception("building the answer to a delayed request failed; closing the connection from %s",
                              self.peer)
                self.close()
                return
            self._complete(slot, result)

        delayed.op.then(done)

    def _cluster_action_allowed(self, api_key: int) -> bool:
        security = self.services.security
        if security.acls is None:
            return True
        return security.authorize(self.principal, self.peer_host, api_acls.operation(api_key, ResourceType.CLUSTER),
                                  ResourceType.CLUSTER, CLUSTER_NAME)

    def _on_interbroker(self, frame: bytes | memoryview, api_key: int, api_version: int, correlation_id: int) -> None:
        """Controller-to-broker requests of cluster mode (protocol.interbroker): JSON bodies,
        response header v0."""
        cluster = self.edges.inter_broker
        assert cluster is not None
        try:
            header = parse_request_header(frame, False)
            body = ib.decode(api_key, api_version, frame[header.body_offset :])
        except (FrameError, ib.InterBrokerDecodeError) as e:
            log.warning("malformed inter-broker request (api %d v%d) from %s: %s", api_key, api_version, self.peer, e)
            self.close()
            return
        if not self._cluster_action_allowed(api_key):
            # Kafka answers a controller request without CLUSTER_ACTION with CLUSTER_AUTHORIZATION_FAILED;
            # these JSON requests have no error field: the connection is closed
            log.warning("inter-broker request %d from %s (%s) without CLUSTER_ACTION on the cluster; closing",
                        api_key, self.peer, self.principal)
            self.close()
            return
        slot = self._slot(correlation_id, False)
        try:
            result = cluster.handle_request(api_key, body, self.listener, self.peer)
        except Exception:
            log.exception("inter-broker request %d from %s failed; closing", api_key, self.peer)
            self.close()
            return
        if isinstance(result, asyncio.Future):
            def done(f: asyncio.Future[Any], s: _Slot = slot) -> None:
                if f.cancelled() or f.exception() is not None:
                    self.close("inter-broker request failed")
                    return
                self._complete(s, ib.encode_response(f.result()))

            result.add_done_callback(done)
            return
        self._complete(slot, ib.encode_response(result))

    def _on_future(self, slot: _Slot, fut: asyncio.Future[Any]) -> None:
        if self.closed:
            return
        if fut.cancelled():
            self.close("request cancelled")
            return
        exc = fut.exception()
        if exc is not None:
            log.error("delayed request failed on connection %s", self.peer, exc_info=exc)
            self.close()
            return
        self._complete(slot, fut.result())

    def _complete(self, slot: _Slot, result: Any) -> None:
        if self.closed:
            return
        head = response_header(slot.correlation_id, slot.flexible)
        counts: dict[int, int] | None = None
        if isinstance(result, RawResponse):
            slot.parts = [head, *result.parts]
            slot.size = len(head) + result.size
            counts = result.errors
        else:
            try:
                body = result if isinstance(result, bytes) else codec.encode(result)
            except Exception:
                # a response we cannot encode must not leave the client waiting forever
                log.exception("could not encode a %s for %s; closing the connection", type(result).__name__, self.peer)
                self.close()
                return
            slot.parts = [head, body]
            slot.size = len(head) + len(body)
            if slot.key >= 0 and not isinstance(result, bytes):
                counts = entity_error_counts(result)
        if counts and slot.key >= 0 and self.rstats is not None:
            self.rstats.record_errors(1 if slot.key in (FETCH_CONSUMER, FETCH_FOLLOWER) else slot.key, counts)
        slot.done = True
        if slot.mem:
            self._release(slot.mem)
            slot.mem = 0
        measured = self.rstats is not None
        now = 0
        if measured:
            now = slot.t_done = time.perf_counter_ns()
        # release every finished response at the head of the queue, in order
        pending = self.pending
        queued = False
        while pending and pending[0].done:
            s = pending.popleft()
            self.out.append(s.size.to_bytes(4, "big"))
            self.out.extend(s.parts)
            self.out_bytes += s.size + 4
            queued = True
            if measured:
                self._queued_total += s.size + 4
                if s.key >= 0:
                    s.t_queued = now
                    s.sent_at = self._queued_total
                    self._sending.append(s)
        if queued and not self.writing and not self._batching:
            self._flush()
        self._maybe_resume()

    def _record_sent(self) -> None:
        """RequestMetrics of the responses now written in full (through TLS: encrypted)."""
        stats = self.rstats
        written = self._queued_total - self.out_bytes
        sending = self._sending
        if stats is None or not sending or sending[0].sent_at > written:
            return
        now = time.perf_counter_ns()
        while sending and sending[0].sent_at <= written:
            s = sending.popleft()
            stats.record(s.key, s.version, s.t_recv, s.t_start, s.t_local, s.t_done, s.t_queued, now)

    # -- writing
    def _read_region(self, region: tuple[Any, int, int]) -> bytes | None:
        """A small file region's bytes, read to go out in the same ``sendmsg`` as the buffers around
        it; None (and the connection closed) when the file can no longer give them."""
        f, position, length = region
        try:
            data = os.pread(f.fileno(), length, position)
        except (ValueError, OSError):
            self.close("segment file closed before its region was sent")
            return None
        if len(data) < length:  # the file shrank under us (deleted/truncated segment)
            self.close("file region no longer readable")
            return None
        return data

    def _flush(self) -> None:
        out = self.out
        sock = self.sock
        try:
            while out:
                item = out[0]
                if isinstance(item, tuple) and item[2] > INLINE_REGION_BYTES:  # (file, position, length)
                    try:
                        in_fd = item[0].fileno()
                    except (ValueError, OSError):
                        self.close("segment file closed before its region was sent")
                        return
                    n = os.sendfile(self.fd, in_fd, item[1], item[2])
                    self.last_active = time.monotonic()
                    if n == 0:
                        # the file shrank under us (deleted/truncated segment): cannot honour the frame
                        self.close("file region no longer readable")
                        return
                    self.out_bytes -= n
                    if n < item[2]:
                        out[0] = (item[0], item[1] + n, item[2] - n)
                        break
                    out.popleft()
                    continue
                # gather consecutive in-memory buffers, small file regions read in, into one sendmsg
                bufs: list[bytes | memoryview] = []
                for i in range(min(len(out), IOV_MAX)):
                    it = out[i]
                    if isinstance(it, tuple):
                        if it[2] > INLINE_REGION_BYTES:
                            break
                        data = self._read_region(it)
                        if data is None:
                            return
                        out[i] = it = data
                    bufs.append(it)
                n = sock.sendmsg(bufs) if len(bufs) > 1 else sock.send(bufs[0])
                self.last_active = time.monotonic()
                self.out_bytes -= n
                partial = False
                while out and not isinstance(out[0], tuple):
                    head = out[0]
                    size = len(head)
                    if n >= size:  # fully sent (zero-length buffers are dropped here too)
                        n -= size
                        out.popleft()
                    else:
                        out[0] = memoryview(head)[n:]
                        partial = True
                        break
                if partial:
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.close(f"write error: {e}")
                return
        if out:
            if not self.writing:
                self.loop.add_writer(self.fd, self._flush)
                self.writing = True
        elif self.writing:
            self.loop.remove_writer(self.fd)
            self.writing = False
        if self._sending:
            self._record_sent()
        if self._close_when_flushed and not out and not self.pending:
            self.close("authentication failed")
            return
        self._maybe_resume()
