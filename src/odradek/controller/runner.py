"""Hosts the controller on a broker: its event queue and thread, its channel to the brokers,
and the embedded broker's requests to itself (what Kafka's KafkaController gets from
KafkaServer: the ControllerEventManager and the ControllerChannelManager).

Every broker runs a controller (controller.controller); only the one that created
/controller acts. Two deployments:

- cluster mode (``threaded``): events run on "controller-event-thread"
  (controller.event_manager); the controller's requests go out through the
  ControllerChannel (controller.channel) on the broker's event loop, to each broker's
  control plane listener, else its inter-broker listener;
- embedded: events run on the event loop; the controller's only broker is this one, so
  its requests are queued and served in order on the loop (:meth:`ControllerRunner._serve_self`),
  a slice of SELF_SLICE LeaderAndIsr partitions per loop turn so creating many partitions
  does not stall other clients; UpdateMetadata is queued behind the LeaderAndIsr of its batch,
  so metadata never names this broker leader of a partition before it leads it.

Threads: :meth:`put` may be called from any thread; ``before_event`` and ``after_event``
(the broker's link to the metadata store) run on the controller's thread; answers of
:meth:`call_controller` and responses to the controller's requests are settled on the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from odradek.client.async_wire import Connect
from odradek.controller.channel import ControllerChannel
from odradek.controller.controller import Controller
from odradek.controller.event_manager import ControllerEventManager
from odradek.controller.store import MetadataStore
from odradek.controller.zk_data import BrokerInfo
from odradek.protocol import errors
from odradek.protocol import interbroker as ib

log = logging.getLogger("odradek.controller.runner")

SELF_SLICE = 16  # LeaderAndIsr partitions an embedded broker applies per event loop turn

# embedded: apply one of the controller's requests to this broker; its response
LocalRequests = Callable[[int, dict[str, Any]], "dict[str, Any] | asyncio.Future[Any]"]


class ControllerRunner:
    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        *,
        threaded: bool,
        unclean_leader_election: Callable[[str], bool],
        imbalance_percentage: int,
        endpoint_of: Callable[[BrokerInfo], tuple[str, int]],
        serve_local: LocalRequests,
        before_event: Callable[[str], str | None] = lambda kind: kind,
        after_event: Callable[[str, Controller], None] = lambda kind, controller: None,
    ) -> None:
        self.broker_id = broker_id
        self.threaded = threaded
        self.endpoint_of = endpoint_of  # where the controller's requests to a broker go
        self.serve_local = serve_local
        # the broker's part of an event, on the controller's thread: the kind to run (None: drop it)
        self.before_event = before_event
        self.after_event = after_event
        self.controller = Controller(
            broker_id,
            store,
            self._send_from_controller,
            unclean_leader_election=unclean_leader_election,
            imbalance_percentage=imbalance_percentage,
        )
        self.events = ControllerEventManager(self._process, threaded=threaded)
        # an event the controller continues later (a large topic's next batch) waits its turn on
        # the event queue, so the loop (embedded) and other events run in between
        self.controller.defer = lambda kind: self.put(kind)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.channel: ControllerChannel | None = None
        self._to_self: deque[tuple[int, dict[str, Any]]] = deque()
        self._serve_scheduled = False
        self.stopping = False

    # ------------------------------------------------------------------ lifecycle
    def open_channel(self, timeout_s: float, connect: Connect | None = None) -> None:
        """Cluster mode: the controller's connections to the brokers (used once it is elected);
        ``connect`` opens them with the listener's security (plain TCP when None)."""
        self.channel = ControllerChannel(self.broker_id, timeout_s, connect)
        self.channel.on_response = self._on_broker_response

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.events.start(loop)

    def start_embedded(self, loop: asyncio.AbstractEventLoop) -> None:
        """Embedded start-up: elect this broker and serve the controller's requests to it until
        none is left, so it leads every partition before the listeners open."""
        self.start(loop)
        self.put("Startup")
        self.events.drain()
        self._serve_self(until_empty=True)

    def stop(self) -> None:
        """No more events or requests to self (the first step of shutdown)."""
        self.stopping = True
        self.events.stop()
        self._to_self.clear()

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close()

    def join(self, timeout: float) -> None:
        self.events.join(timeout=timeout)

    @property
    def active(self) -> bool:
        return self.controller.active

    # ------------------------------------------------------------------ events
    def put(self, kind: str, **args: Any) -> None:
        """Queue a controller event (any thread)."""
        self.events.put(kind, **args)

    def _process(self, kind: str, args: dict[str, Any]) -> None:
        c = self.controller
        on_error: Callable[[BaseException], None] | None = args.pop("on_error", None)
        try:
            run = self.before_event(kind)
            if run is None:
                if on_error is not None:
                    on_error(RuntimeError(f"controller event {kind} was not run"))
                return
            c.put(run, **args)
            c.process_all()
            self.after_event(run, c)
        except Exception as e:
            log.exception("controller event %s failed", kind)
            if on_error is not None:  # a request waits on this event: fail it rather than leave it hanging
                on_error(e)
        self._sync_channel()

    def call_controller(self, kind: str, then: Callable[[Any], Any], **args: Any) -> asyncio.Future[Any]:
        """Run a controller event that answers through ``reply``; the future resolves on the loop
        with ``then(answer)``."""
        assert self.loop is not None
        loop = self.loop
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(answer: Any) -> None:
            if not fut.done():
                fut.set_result(then(answer))

        def reply(*result: Any) -> None:
            loop.call_soon_threadsafe(settle, result if len(result) != 1 else result[0])

        def fail(exc: BaseException) -> None:
            if not fut.done():
                fut.set_exception(exc)

        def on_error(exc: BaseException) -> None:
            loop.call_soon_threadsafe(fail, exc)

        self.put(kind, reply=reply, on_error=on_error, **args)
        return fut

    # ------------------------------------------------------------------ the controller's requests
    def _channel_endpoints(self) -> dict[int, tuple[str, int]]:
        return {b: self.endpoint_of(i) for b, i in self.controller.ctx.brokers.items()}

    def _sync_channel(self) -> None:
        brokers = self._channel_endpoints() if self.controller.active else {}
        if self.loop is not None and self.channel is not None:
            self.loop.call_soon_threadsafe(self.channel.update_brokers, brokers)

    def _send_from_controller(self, broker_id: int, api_key: int, body: dict[str, Any]) -> None:
        if not self.threaded:  # embedded: the controller's only broker is this one
            if broker_id == self.broker_id and not self.stopping:
                q = self._to_self
                i = len(q)
                if api_key == ib.LEADER_AND_ISR:  # Kafka's batch order: LeaderAndIsr, then UpdateMetadata
                    while i > 0 and q[i - 1][0] == ib.UPDATE_METADATA:
                        i -= 1
                q.insert(i, (api_key, body))
                if not self._serve_scheduled and self.loop is not None:
                    self._serve_scheduled = True
                    self.loop.call_soon(self._serve_self)
            return
        info = self.controller.ctx.brokers.get(broker_id)
        if info is None or self.loop is None or self.channel is None:
            return
        brokers = self._channel_endpoints()
        channel = self.channel

        def send() -> None:
            channel.update_brokers(brokers)
            channel.send(broker_id, api_key, body)

        self.loop.call_soon_threadsafe(send)

    def _serve_self(self, until_empty: bool = False) -> None:
        """Embedded: serve the controller's queued requests in order, a slice of a large
        LeaderAndIsr per loop turn (see the module docstring)."""
        self._serve_scheduled = False
        queue_ = self._to_self
        while queue_ and not self.stopping:
            api_key, body = queue_[0]
            parts = body.get("partitions") if api_key == ib.LEADER_AND_ISR else None
            if not until_empty and parts is not None and len(parts) > SELF_SLICE:
                head = dict(body, partitions=parts[:SELF_SLICE])
                body["partitions"] = parts[SELF_SLICE:]
                self._answer_self(api_key, head)
                self._serve_scheduled = True
                assert self.loop is not None
                self.loop.call_soon(self._serve_self)
                return
            queue_.popleft()
            self._answer_self(api_key, body)

    def _answer_self(self, api_key: int, body: dict[str, Any]) -> None:
        resp = self.serve_local(api_key, body)
        if isinstance(resp, dict):
            self._on_broker_response(self.broker_id, api_key, resp)

    def _on_broker_response(self, broker_id: int, api_key: int, resp: dict[str, Any] | None) -> None:
        """A LeaderAndIsr answer naming replicas in an offline log dir goes to the controller."""
        if api_key != ib.LEADER_AND_ISR or not resp:
            return
        bad = [(str(p["topic"]), int(p["partition"])) for p in resp.get("partitions", [])
               if p.get("error_code") == errors.KAFKA_STORAGE_ERROR]
        if bad:
            self.put("LeaderAndIsrResponse", broker_id=broker_id, storage_errors=bad)
