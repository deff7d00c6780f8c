"""A connection of an SSL or SASL_SSL listener: the socket's bytes go through a :class:`TlsChannel`
(an ``ssl.SSLObject`` over memory BIOs, so reads and writes stay non-blocking and the handshake never
holds the event loop), as Kafka's SslTransportLayer wraps a SocketChannel.

Reading: what the socket has is decrypted, a large frame being filled straight into its buffer (as a
plaintext connection receives into it). Writing: queued responses are encrypted while less than
``_TLS_RAW_HIGH`` bytes of TLS records wait for the socket; a file region cannot go through
``sendfile`` here and is read (``os.pread``) and encrypted ``_TLS_CHUNK`` bytes at a time. The
handshake ends in :meth:`ChannelAuthenticator.tls_handshaken` (an SSL listener's principal is the client
certificate's mapped subject).
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import time
from collections import deque
from typing import Any

from odradek.protocol.framing import FrameError
from odradek.security.tls_channel import TlsChannel
from odradek.server.connection import IOV_MAX, Connection, ConnectionEdges

_TLS_RAW_HIGH = 1024 * 1024  # encrypt queued responses while less than this waits for the socket
_TLS_CHUNK = 256 * 1024  # a file region is read and encrypted this much at a time


def connection_for(edges: ConnectionEdges, sock: socket.socket, peer: tuple[Any, ...], listener: str) -> Connection:
    """The connection an accepted socket of ``listener`` gets: TLS when the listener's security
    has a TLS context (SSL, SASL_SSL), plaintext otherwise."""
    security = edges.listener_security.get(listener)
    context = security.ssl_context if security is not None else None
    if context is None:
        return Connection(edges, sock, peer, listener)
    return TlsConnection(edges, sock, peer, listener, context)


class TlsConnection(Connection):
    def __init__(self, edges: ConnectionEdges, sock: socket.socket, peer: tuple[Any, ...], listener: str,
                 context: ssl.SSLContext) -> None:
        super().__init__(edges, sock, peer, listener)
        self.channel = TlsChannel(context)
        self.auth.tls = self.channel
        self._raw_out: deque[bytes | memoryview] = deque()  # TLS records waiting for the socket
        self._raw_bytes = 0

    def close(self, reason: str | None = None) -> None:
        self._raw_out.clear()
        super().close(reason)

    def _output_waiting(self) -> bool:
        return True  # the TLS session may have records of its own (handshake, alerts) to send

    # -- reading
    def _on_readable(self) -> None:
        """Read what the socket has, decrypt it, decode the plaintext's frames."""
        tls = self.channel
        frames: list[bytes | memoryview] = []
        scratch = self._scratch
        was_handshaken = tls.handshaken
        while True:
            try:
                n = self.sock.recv_into(scratch)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                self.close(f"read error: {e}")
                return
            if not n:
                self.close()
                return
            try:
                tls.feed(scratch[:n])
                self._decrypt_frames(tls, frames)
            except ssl.SSLError as e:
                detail = getattr(e, "verify_message", None)  # why a certificate was refused
                self.close(f"TLS failure: {e.reason or e}" + (f" ({detail})" if detail else ""))
                return
            except (FrameError, MemoryError) as e:
                self._refuse_input(e)
                return
            if tls.peer_closed or n < len(scratch) or frames:
                break
        self.last_active = time.monotonic()
        if not was_handshaken and tls.handshaken:
            self.auth.tls_handshaken()
        if tls.peer_closed and not frames:
            self.close()
            return
        self.edges.on_read()
        if not tls.handshaken:
            self._flush()  # the handshake's own messages
            return
        self._dispatch(frames)
        if not self.closed and not self.writing and self._raw_out:
            self._flush()
        if self.decoder.blocked and not self.closed:
            self._mute_for_memory()

    def _decrypt_frames(self, tls: TlsChannel, frames: list[bytes | memoryview]) -> None:
        """The plaintext of the records received so far into the decoder: a large frame being
        filled is decrypted straight into its buffer, as a plaintext socket's bytes are received
        into it."""
        decoder = self.decoder
        while True:
            target = decoder.recv_target()
            if target is not None:
                n = tls.read_into(target)
                if not n:
                    return
                frames.extend(decoder.advance(n))
            else:
                data = tls.read()
                if not data:
                    return
                frames.extend(decoder.feed(data))

    # -- writing
    def _encrypt_queued(self, tls: TlsChannel) -> bool:
        """Move queued responses through TLS while little waits for the socket; False if the
        connection had to close."""
        out = self.out
        while out and self._raw_bytes < _TLS_RAW_HIGH:
            item = out[0]
            if isinstance(item, tuple):  # a file region: read it, no sendfile through TLS
                f, pos, length = item
                try:
                    data = os.pread(f.fileno(), min(length, _TLS_CHUNK), pos)
                except (ValueError, OSError):
                    self.close("segment file closed before its region was sent")
                    return False
                if not data:
                    self.close("file region no longer readable")
                    return False
                if len(data) < length:
                    out[0] = (f, pos + len(data), length - len(data))
                else:
                    out.popleft()
                tls.send(data)
                self.out_bytes -= len(data)
            else:
                # consecutive small buffers become one TLS record
                bufs: list[bytes | memoryview] = []
                size = 0
                while out and not isinstance(out[0], tuple) and size < _TLS_CHUNK:
                    b = out.popleft()
                    bufs.append(b)
                    size += len(b)
                tls.send(bufs[0] if len(bufs) == 1 else b"".join(bufs))
                self.out_bytes -= size
            raw = tls.take_output()
            if raw:
                self._raw_out.append(raw)
                self._raw_bytes += len(raw)
        return True

    def _flush(self) -> None:
        tls = self.channel
        raw = tls.take_output()  # handshake messages, alerts
        if raw:
            self._raw_out.append(raw)
            self._raw_bytes += len(raw)
        while True:
            try:
                if not self._encrypt_queued(tls):
                    return
            except ssl.SSLError as e:  # the session ended under us (an alert, close_notify)
                self.close(f"TLS failure while writing: {e.reason or e}")
                return
            if not self._raw_out:
                break
            try:
                bufs = list(self._raw_out)[:IOV_MAX]
                n = self.sock.sendmsg(bufs) if len(bufs) > 1 else self.sock.send(bufs[0])
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    self.close(f"write error: {e}")
                    return
                break
            self.last_active = time.monotonic()
            self._raw_bytes -= n
            while n and self._raw_out:
                head = self._raw_out[0]
                if n >= len(head):
                    n -= len(head)
                    self._raw_out.popleft()
                else:
                    self._raw_out[0] = memoryview(head)[n:]
                    n = 0
                    break
            if self._raw_out and not self.out:
                # the socket took less than offered: wait for it
                break
        waiting = bool(self._raw_out or self.out)
        if waiting and not self.writing:
            self.loop.add_writer(self.fd, self._flush)
            self.writing = True
        elif not waiting and self.writing:
            self.loop.remove_writer(self.fd)
            self.writing = False
        if self._sending:
            self._record_sent()
        if self._close_when_flushed and not waiting and not self.pending:
            self.close("authentication failed")
            return
        self._maybe_resume()
