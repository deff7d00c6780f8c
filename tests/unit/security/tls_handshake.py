"""A TLS handshake between two contexts over memory BIOs, for tests of the broker's TLS contexts."""

from __future__ import annotations

import ssl


def memory_handshake(client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext) -> bool:
    """True when the handshake completes (the client accepted the server's certificate and the
    server the client's, if it asks for one)."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for end in (client, server):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                return False
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    try:
        client.do_handshake()
        return True
    except ssl.SSLError:
        return False
