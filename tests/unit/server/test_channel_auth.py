"""server.channel_auth.ChannelAuthenticator on its own: the SASL gate, the decoder's bound, the
authentication timeout and KIP-368's session expiry, on a fake monotonic clock and a fake loop timer."""

from __future__ import annotations

from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import FrameDecoder
from odradek.security.listeners import ListenerSecurity
from odradek.security.sasl import SaslState
from odradek.security.tls import ANONYMOUS
from odradek.server.channel_auth import ChannelAuthenticator

MAX_REQUEST = 100 << 20


class FakeLoop:
    def __init__(self) -> None:
        self.timers: list[tuple[float, Any, tuple[Any, ...]]] = []

    def call_later(self, delay: float, fn: Any, *args: Any) -> Any:
        self.timers.append((delay, fn, args))
        return FakeTimer()


class FakeTimer:
    def cancel(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _auth(protocol: str, reauth_ms: int = 0) -> tuple[ChannelAuthenticator, FrameDecoder, FakeLoop, Clock]:
    sec = ListenerSecurity("L", protocol, mechanisms={"PLAIN": lambda: None},  # type: ignore[dict-item]
                           max_reauth_ms=reauth_ms, auth_timeout_s=7.0)
    decoder = FrameDecoder(MAX_REQUEST)
    clock = Clock()
    auth = ChannelAuthenticator(sec, decoder, MAX_REQUEST, monotonic=clock)
    loop = FakeLoop()
    return auth, decoder, loop, clock


def test_a_sasl_connection_is_gated_until_authenticated() -> None:
    auth, decoder, loop, _clock = _auth("SASL_PLAINTEXT")
    closed: list[str] = []
    auth.start(loop, closed.append)  # type: ignore[arg-type]
    assert auth.sasl is not None and not auth.authenticated and auth.principal == ANONYMOUS
    assert decoder.max_size == 524288  # sasl.server.max.receive.size before authentication
    assert auth.refusal(ApiKey.API_VERSIONS) is None and auth.refusal(ApiKey.SASL_HANDSHAKE) is None
    assert "during SASL authentication" in (auth.refusal(ApiKey.PRODUCE) or "")
    [(delay, fn, args)] = loop.timers
    assert delay == 7.0
    auth.sasl.state = SaslState.COMPLETE
    assert auth.sasl_authenticated("User:alice") == 0
    assert auth.authenticated and auth.principal == "User:alice" and decoder.max_size == MAX_REQUEST
    assert auth.refusal(ApiKey.PRODUCE) is None
    fn(*args)  # the timer firing late changes nothing once authenticated
    assert closed == []


def test_the_timeout_closes_an_unauthenticated_connection() -> None:
    auth, _decoder, loop, _clock = _auth("SASL_PLAINTEXT")
    closed: list[str] = []
    auth.start(loop, closed.append)  # type: ignore[arg-type]
    _delay, fn, args = loop.timers[0]
    fn(*args)
    assert closed == ["SASL authentication not finished within odradek.authentication.timeout.ms"]


def test_a_session_past_its_lifetime_may_only_reauthenticate() -> None:
    auth, _decoder, loop, clock = _auth("SASL_PLAINTEXT", reauth_ms=60_000)
    auth.start(loop, lambda _why: None)  # type: ignore[arg-type]
    assert auth.sasl is not None
    auth.sasl.state = SaslState.COMPLETE
    assert auth.sasl_authenticated("User:bob") == 60_000
    clock.now += 59.0
    assert auth.refusal(ApiKey.FETCH) is None
    clock.now += 2.0  # past connections.max.reauth.ms
    assert "re-authentication" in (auth.refusal(ApiKey.FETCH) or "")
    assert auth.refusal(ApiKey.SASL_HANDSHAKE) is None and auth.refusal(ApiKey.SASL_AUTHENTICATE) is None
    auth.sasl_authenticated("User:bob")  # re-authenticated: a new lifetime
    assert auth.refusal(ApiKey.FETCH) is None


def test_a_plaintext_connection_is_authenticated_from_the_start() -> None:
    decoder = FrameDecoder(MAX_REQUEST)
    auth = ChannelAuthenticator(None, decoder, MAX_REQUEST)
    loop = FakeLoop()
    auth.start(loop, lambda _why: None)  # type: ignore[arg-type]
    assert auth.authenticated and auth.sasl is None and loop.timers == [] and auth.refusal(ApiKey.PRODUCE) is None
