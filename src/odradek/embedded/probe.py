"""Is a broker serving? One ApiVersions v0 round trip on a plain socket.

Request (request header v1)::

    int32 size | int16 api_key=18 | int16 api_version=0 | int32 correlation_id | string client_id

Response (response header v0)::

    int32 size | int32 correlation_id | int16 error_code | ...

Used to wait for start-up: a broker accepts connections only once it serves requests (in cluster
mode, once it is registered), so a successful round trip is the first served request.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from odradek.client.framer import recv_exact

API_VERSIONS = 18
_CORRELATION_ID = 0x0DDA
_CLIENT_ID = b"odradek-probe"


def api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the broker at ``host:port`` answers ApiVersions v0 with error code 0."""
    payload = struct.pack(">hhih", API_VERSIONS, 0, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(payload)) + payload)
            (size,) = struct.unpack(">i", recv_exact(s, 4))
            if size < 6 or size > 1 << 20:
                return False
            corr, error = struct.unpack_from(">ih", recv_exact(s, size), 0)
            return bool(corr == _CORRELATION_ID and error == 0)
    except OSError:
        return False


def wait_serving(host: str, port: int, timeout: float, failed: Callable[[], str | None] = lambda: None) -> bool:
    """Probe until the broker serves (True) or ``timeout`` passes (False). ``failed`` returns a reason
    to give up at once (a child process that exited), raised as RuntimeError."""
    deadline = time.monotonic() + timeout
    while True:
        reason = failed()
        if reason is not None:
            raise RuntimeError(reason)
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            with socket.create_connection((host, port), timeout=min(0.5, left)):
                pass
        except OSError:
            time.sleep(0.02)
            continue
        if api_versions_ok(host, port, timeout=max(0.1, min(5.0, left))):
            return True
        time.sleep(0.05)
