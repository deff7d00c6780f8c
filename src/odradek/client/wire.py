"""A minimal blocking Kafka client over kio, for admin calls the CLI needs that
confluent-kafka cannot express (e.g. the cluster-wide broker default, resource name "")."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from odradek.protocol import kio_guard


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "odradek-cli") -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        """Send one request built from ``fields`` (kio entity fields) and return the response."""
        req_cls = load_request_schema(api_key, version)
        self.correlation_id += 1
        buf = io.BytesIO()
        if req_cls.__header_schema__.__version__ >= 2:
            entity_writer(RequestHeaderV2)(
                buf, RequestHeaderV2(request_api_key=i16(api_key), request_api_version=i16(version),
                                     correlation_id=i32(self.correlation_id), client_id=self.client_id)
            )
        else:
            entity_writer(RequestHeaderV1)(
                buf, RequestHeaderV1(request_api_key=i16(api_key), request_api_version=i16(version),
                                     correlation_id=i32(self.correlation_id), client_id=self.client_id)
            )
        entity_writer(req_cls)(buf, req_cls(**fields))
        payload = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv_exact(4))[0]
        data = self._recv_exact(size)
        resp_cls = load_response_schema(api_key, version)
        offset = 4  # correlation id
        if resp_cls.__header_schema__.__version__ >= 1 and api_key != 18:
            offset += 1  # empty tagged fields
        kio_guard.check(resp_cls, data, offset)  # a lying count aborts kio's native reader
        value, _ = entity_reader(resp_cls)(data, offset)
        return value
