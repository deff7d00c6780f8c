"""One TLS session over memory BIOs (sans-I/O): the connection reads the socket into
:meth:`TlsChannel.receive`, which returns the plaintext, and sends what :meth:`take_output`
returns. Nothing here blocks; a handshake may take several round trips."""

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

    def receive(self, data: bytes | memoryview) -> bytes:
        """Feed bytes read from the socket; the plaintext they complete (b"" during the handshake).
        Raises ``ssl.SSLError`` for anything that is not TLS or fails verification."""
        self._in.write(data)
        if not self.handshaken:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshaken = True
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._obj.read(_READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.peer_closed = True
                break
            if not chunk:
                break
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

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
