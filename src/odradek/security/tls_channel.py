"""One TLS session over memory BIOs (sans-I/O): the connection feeds what it reads from the
socket to :meth:`TlsChannel.feed`, takes the plaintext with :meth:`read` / :meth:`read_into`, and
sends what :meth:`take_output` returns. Nothing here blocks; a handshake may take several round trips."""

from __future__ import annotations

import ssl

_READ_CHUNK = 256 * 1024


class TlsChannel:
    __slots__ = ("_in", "_out", "_obj", "handshaken", "peer_closed")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=True)
        self.handshaken = False
        self.peer_closed = False

    def feed(self, data: bytes | memoryview) -> None:
        """Bytes read from the socket; the handshake advances with them. Plaintext is then taken
        with :meth:`read` or :meth:`read_into`. Raises ``ssl.SSLError``."""
        self._in.write(data)
        if not self.handshaken:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                return
            self.handshaken = True

    def read(self, n: int = _READ_CHUNK) -> bytes:
        """Up to ``n`` bytes of plaintext; b"" when no whole record is buffered (or at close_notify)."""
        if not self.handshaken:
            return b""
        try:
            return self._obj.read(n)
        except ssl.SSLWantReadError:
            return b""
        except ssl.SSLZeroReturnError:
            self.peer_closed = True
            return b""

    def read_into(self, buffer: memoryview) -> int:
        """Decrypt straight into ``buffer`` (a large request's frame buffer): bytes written, 0 if none."""
        if not self.handshaken:
            return 0
        try:
            n: int = self._obj.read(len(buffer), buffer)  # type: ignore[assignment]
            return n
        except ssl.SSLWantReadError:
            return 0
        except ssl.SSLZeroReturnError:
            self.peer_closed = True
            return 0

    def send(self, data: bytes | memoryview) -> None:
        """Encrypt ``data`` (whole; the output grows until taken)."""
        self._obj.write(data)

    def take_output(self) -> bytes:
        """Bytes to write to the socket (handshake messages, records)."""
        return self._out.read() if self._out.pending else b""

    def peer_certificate(self) -> dict[str, object] | None:
        cert = self._obj.getpeercert()
        return dict(cert) if cert else None

    @property
    def version(self) -> str | None:
        return self._obj.version()
