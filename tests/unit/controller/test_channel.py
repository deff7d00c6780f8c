"""The controller channel against a loopback server speaking the inter-broker framing:
in-order delivery, responses to the callback, reconnects after the broker drops."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from odradek.controller.channel import ControllerChannel
from odradek.protocol import interbroker as ib


class FakeBroker:
    def __init__(self) -> None:
        self.received: list[tuple[int, dict[str, Any]]] = []
        self.drop_next = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                api, version, corr, clen = struct.unpack(">hhih", frame[:10])
                body = ib.decode(api, version, frame[10 + clen :])
                if self.drop_next:
                    self.drop_next = False
                    writer.close()
                    return
                self.received.append((api, body))
                out = struct.pack(">i", corr) + json.dumps({"error_code": 0, "n": len(self.received)}).encode()
                writer.write(struct.pack(">i", len(out)) + out)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()


def test_in_order_delivery_and_reconnect() -> None:
    async def main() -> None:
        fb = FakeBroker()
        server = await asyncio.start_server(fb.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        ch = ControllerChannel(9, timeout_s=5)
        responses: list[tuple[int, int, dict[str, Any] | None]] = []
        ch.on_response = lambda b, api, resp: responses.append((b, api, resp))
        ch.update_brokers({1: ("127.0.0.1", port)})
        body = {"controller_id": 9, "controller_epoch": 1, "broker_epoch": 5, "partitions": [],
                "live_brokers": [], "topic_ids": {}, "full": True}
        for i in range(5):
            ch.send(1, ib.UPDATE_METADATA, dict(body, controller_epoch=i))
        fb.drop_next = True  # the next request to arrive is cut off: it must be resent, in order
        for i in range(5, 8):
            ch.send(1, ib.UPDATE_METADATA, dict(body, controller_epoch=i))
        for _ in range(200):
            if len(responses) == 8:
                break
            await asyncio.sleep(0.02)
        assert [b["controller_epoch"] for _, b in fb.received] == list(range(8))
        assert [r[2]["n"] for r in responses if r[2]] == list(range(1, 9))
        await ch.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())
