"""A minimal blocking Kafka client over kio, for admin calls the CLI needs that
confluent-kafka cannot express (e.g. the cluster-wide broker default, resource name "").

Frames (request header v1/v2, response header v0/v1) are :mod:`odradek.client.framer`'s; the
body is a kio entity, its counts checked by :mod:`odradek.protocol.kio_guard` before kio reads it.
With a :class:`~odradek.security.inter_broker.ClientSecurity` the socket is wrapped in TLS (SSL,
SASL_SSL) and authenticated by :mod:`odradek.security.sasl_client` (SASL_PLAINTEXT, SASL_SSL)
before the first request."""

from __future__ import annotations

import io
import socket
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.client import framer
from odradek.client.secure_connect import authenticate_blocking
from odradek.protocol import codec, kio_guard
from odradek.security.inter_broker import ClientSecurity


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "odradek-cli",
                 security: ClientSecurity | None = None) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0
        try:
            ctx = security.current_ssl_context() if security is not None else None
            if ctx is not None:
                self.sock = ctx.wrap_socket(self.sock, server_hostname=host)
            if security is not None and security.uses_sasl:
                authenticate_blocking(self.sock, security, client_id)
        except BaseException:
            self.sock.close()
            raise

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        """Send one request built from ``fields`` (kio entity fields) and return the response."""
        req_cls = load_request_schema(api_key, version)
        self.correlation_id += 1
        buf = io.BytesIO()
        entity_writer(req_cls)(buf, req_cls(**fields))
        self.sock.sendall(
            framer.encode_request(
                api_key, version, self.correlation_id, self.client_id, buf.getvalue(),
                flexible_header=req_cls.__header_schema__.__version__ >= 2,
            )
        )
        data, offset = framer.recv_response(self.sock, self.correlation_id, codec.response_header_flexible(api_key, version))
        resp_cls = load_response_schema(api_key, version)
        kio_guard.check(resp_cls, data, offset)  # a lying count aborts kio's native reader
        value, _ = entity_reader(resp_cls)(data, offset)
        return value
