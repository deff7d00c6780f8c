"""Controller-to-broker request channel (Kafka's ControllerChannelManager): one queue and
one sender task per broker, requests sent one at a time in order, reconnecting with
back-off when the broker is unreachable; a broker removed from the cluster has its
queue dropped.

Wire format (framed by :mod:`odradek.client.framer`, the same for a broker's ControlledShutdown
to the controller, :func:`interbroker_request`)::

    request    int32 size, request header v1 (int16 api key, int16 version 0, int32 correlation id,
               string client id "controller-<id>" / "broker-<id>"), the JSON body of
               :mod:`odradek.protocol.interbroker`
    response   int32 size (4 to 64 MiB), response header v0 (int32 correlation id, checked),
               a JSON body with at least ``error_code``
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.client import framer
from odradek.client.async_wire import Connect, plain_connect
from odradek.protocol import interbroker as ib
from odradek.protocol.framing import FrameError

log = logging.getLogger("odradek.controller.channel")

MAX_RESPONSE = 64 << 20  # an inter-broker response is a small JSON object

ResponseCallback = Callable[[int, int, dict[str, Any] | None], None]  # (broker, api, response or None)


@dataclass
class _Request:
    api_key: int
    body: dict[str, Any]
    callback: ResponseCallback | None


class _BrokerSender:
    def __init__(self, owner: ControllerChannel, broker_id: int, host: str, port: int) -> None:
        self.owner = owner
        self.broker_id = broker_id
        self.address = (host, port)
        self.queue: asyncio.Queue[_Request] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-send-{broker_id}")
        self._corr = itertools.count(1)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        backoff = 0.1
        while True:
            try:
                return await self.owner.connect(*self.address, self.owner.timeout_s)
            except (TimeoutError, OSError) as e:
                log.info("controller cannot reach broker %d at %s:%d (%s); retrying", self.broker_id, *self.address, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def _run(self) -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        try:
            while not self.owner.closed:
                req = await self.queue.get()
                while True:
                    if writer is None:
                        reader, writer = await self._connect()
                    assert reader is not None
                    try:
                        resp = await asyncio.wait_for(self._round_trip(reader, writer, req), self.owner.timeout_s)
                        break
                    except (TimeoutError, OSError, asyncio.IncompleteReadError, ib.InterBrokerDecodeError) as e:
                        log.info("request %d to broker %d failed (%s); reconnecting", req.api_key, self.broker_id, e)
                        writer.close()
                        reader = writer = None
                        await asyncio.sleep(0.1)
                if req.callback is not None:
                    try:
                        req.callback(self.broker_id, req.api_key, resp)
                    except Exception:
                        log.exception("controller response callback failed")
        except asyncio.CancelledError:
            if writer is not None:
                writer.close()
            raise

    async def _round_trip(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: _Request
    ) -> dict[str, Any]:
        return await interbroker_request(
            reader, writer, req.api_key, req.body, next(self._corr), f"controller-{self.owner.controller_id}"
        )


async def interbroker_request(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    api_key: int,
    body: dict[str, Any],
    correlation_id: int,
    client_id: str,
) -> dict[str, Any]:
    """One inter-broker request over an open connection, framed by :mod:`odradek.client.framer`
    (request header v1, response header v0): the controller's requests to brokers and a
    broker's ControlledShutdown to the controller. Raises ``InterBrokerDecodeError`` when the
    response cannot be framed or decoded, ``OSError`` / ``IncompleteReadError`` when the
    connection fails."""
    writer.write(framer.encode_request(api_key, ib.VERSION, correlation_id, client_id, ib.encode(api_key, body),
                                       flexible_header=False))
    await writer.drain()
    try:
        frame, offset = await framer.read_response(reader, correlation_id, False, MAX_RESPONSE)
    except FrameError as e:
        raise ib.InterBrokerDecodeError(str(e)) from None
    return ib.decode_response(memoryview(frame)[offset:])


class ControllerChannel:
    """Call ``send(broker, api, body)`` from the controller; requests go out in order per broker."""

    def __init__(self, controller_id: int, timeout_s: float = 30.0, connect: Connect | None = None) -> None:
        self.controller_id = controller_id
        self.timeout_s = timeout_s
        self.connect: Connect = connect or plain_connect  # TLS / SASL of the listener the brokers are reached on
        self.senders: dict[int, _BrokerSender] = {}
        self.on_response: ResponseCallback | None = None
        self.closed = False

    def update_brokers(self, brokers: dict[int, tuple[str, int]]) -> None:
        for b in list(self.senders):
            if b not in brokers or self.senders[b].address != brokers[b]:
                self.senders.pop(b).task.cancel()
        for b, (host, port) in brokers.items():
            if b not in self.senders:
                self.senders[b] = _BrokerSender(self, b, host, port)

    def send(self, broker_id: int, api_key: int, body: dict[str, Any]) -> None:
        sender = self.senders.get(broker_id)
        if sender is None:
            log.warning("no channel to broker %d; dropping request %d", broker_id, api_key)
            return
        sender.queue.put_nowait(_Request(api_key, body, self.on_response))

    __call__ = send

    async def close(self) -> None:
        self.closed = True
        tasks = [s.task for s in self.senders.values()]
        self.senders.clear()
        for t in tasks:
            t.cancel()
        if tasks:
            # bounded: asyncio.wait_for in 3.11 can swallow a cancellation that races with
            # its inner operation finishing; the senders also stop on ``closed``
            await asyncio.wait(tasks, timeout=2.0)
