"""http.auth.token: the token as a Bearer header and through the login form's session cookie, the
principal it acts as, CSRF for sessions but not for Bearer requests, the per-address limit on
failed logins (a fake clock), and /metrics behind the login (http.metrics.auth.required)."""

from __future__ import annotations

import asyncio

from odradek.console.app import ConsoleApp
from odradek.console.auth import ANONYMOUS, CredentialCheck
from odradek.console.login import LoginThrottle, Sessions, cookie, parse_bearer, token_matches
from odradek.http.server import HttpRequest, HttpResponse

from .test_auth_app import SAME_ORIGIN, FakeKafka, NoRecords, basic, req, run

TOKEN = "s3cret-token-of-some-length"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def token_app(k: FakeKafka, clock: Clock | None = None, principal: str = "User:admin") -> ConsoleApp:
    return ConsoleApp(k, NoRecords(), CredentialCheck({"admin": "pw"}, None), lambda: {"messages_in": 1},
                      secret=b"k", token=TOKEN, token_principal=principal, failure_delay_s=0,
                      clock=clock or Clock())


def bearer(t: str) -> dict[str, str]:
    return {"authorization": f"Bearer {t}"}


def from_peer(r: HttpRequest, peer: str) -> HttpRequest:
    r.peer = peer
    return r


def session_of(r: HttpResponse) -> str:
    set_cookie = r.headers["Set-Cookie"]
    value = cookie(set_cookie.split(";", 1)[0], "odradek_session")
    assert value
    return value


def test_parsing_and_comparison() -> None:
    assert parse_bearer("Bearer abc") == "abc" and parse_bearer("bearer  abc ") == "abc"
    for bad in (None, "", "Bearer", "Bearer ", "Basic abc", "Token abc"):
        assert parse_bearer(bad) is None
    assert token_matches(TOKEN, TOKEN)
    assert not token_matches(TOKEN, TOKEN[:-1]) and not token_matches(TOKEN, TOKEN + "x")
    assert not token_matches(TOKEN, "") and not token_matches(TOKEN, "\udcff")
    assert cookie("a=1; odradek_session=xyz; b=2", "odradek_session") == "xyz"
    assert cookie("odradek_sessionx=1", "odradek_session") is None and cookie(None, "x") is None


def test_sessions_end_and_are_bounded() -> None:
    clock = Clock()
    s = Sessions(clock, ttl_s=60, max_sessions=3)
    a = s.open("User:a")
    assert s.principal(a) == "User:a" and s.principal(a + "x") is None
    clock.t += 60
    assert s.principal(a) is None and len(s) == 0
    ids = [s.open(f"User:{i}") for i in range(4)]
    assert len(s) == 3 and s.principal(ids[0]) is None and s.principal(ids[3]) == "User:3"
    s.close(ids[3])
    assert s.principal(ids[3]) is None


def test_throttle_counts_failures_per_address_in_a_window() -> None:
    clock = Clock()
    t = LoginThrottle(clock, max_failures=3, window_s=60)
    for _ in range(3):
        assert t.retry_after("10.0.0.1") == 0
        t.failed("10.0.0.1")
        clock.t += 10
    assert t.retry_after("10.0.0.1") == 30  # the first failure ages out 60 s after it
    assert t.retry_after("10.0.0.2") == 0
    clock.t += 30
    assert t.retry_after("10.0.0.1") == 0


def test_token_required_even_without_security() -> None:
    k = FakeKafka()
    a = token_app(k)
    for path in ("/", "/topics", "/api/stats", "/static/console.js"):
        r = run(a, req("GET", path))
        assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer"), path
        assert b'action="/login"' in r.body
    assert run(a, req("GET", "/login")).status == 200
    assert run(a, req("GET", "/static/console.css")).status == 200
    assert not k.calls
    ok = run(a, req("GET", "/", bearer(TOKEN)))
    assert ok.status == 200 and b'id="principal">User:admin<' in ok.body
    assert run(a, req("GET", "/", bearer("wrong"))).status == 401
    assert run(a, req("GET", "/", {"authorization": basic("admin", "pw")})).status == 200  # SASL users still log in
    assert [p for p, _ in k.calls] == ["User:admin"] * 4
    assert run(a, req("GET", "/login", bearer(TOKEN))).status == 303


def test_bearer_requests_need_no_csrf_token() -> None:
    k = FakeKafka()
    a = token_app(k)
    r = run(a, req("POST", "/actions/create-topic", bearer(TOKEN), "name=t&partitions=1"))
    assert r.status == 200 and b"Created topic t." in r.body
    assert k.calls == [("User:admin", 19)]


def test_login_form_opens_a_strict_http_only_session() -> None:
    k = FakeKafka()
    a = token_app(k)
    assert run(a, req("POST", "/login", {}, f"secret={TOKEN}")).status == 403  # says nothing of its origin
    assert run(a, req("POST", "/login", {"origin": "http://evil.example"}, f"secret={TOKEN}")).status == 403
    wrong = run(a, req("POST", "/login", SAME_ORIGIN, "secret=nope"))
    assert wrong.status == 401 and "Set-Cookie" not in wrong.headers and b"wrong token" in wrong.body
    ok = run(a, req("POST", "/login", SAME_ORIGIN, f"secret={TOKEN}"))
    assert ok.status == 303 and ok.headers["Location"] == "/"
    attrs = [x.strip() for x in ok.headers["Set-Cookie"].split(";")]
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attrs)
    sid = session_of(ok)
    jar = {"cookie": f"odradek_session={sid}"}
    page = run(a, req("GET", "/topics", jar))
    assert page.status == 200 and b'id="logout"' in page.body and b"User:admin" in page.body
    # a session is a cookie the browser sends by itself: actions need the CSRF token and the origin
    assert run(a, req("POST", "/actions/create-topic", {**jar, **SAME_ORIGIN}, "name=t")).status == 403
    body = f"name=t&partitions=1&csrf={a.token('User:admin')}"
    assert run(a, req("POST", "/actions/create-topic", {**jar, "origin": "http://evil.example"}, body)).status == 403
    assert run(a, req("POST", "/actions/create-topic", {**jar, **SAME_ORIGIN}, body)).status == 200
    out = run(a, req("POST", "/logout", {**jar, **SAME_ORIGIN}))
    assert out.status == 303 and "Max-Age=0" in out.headers["Set-Cookie"]
    assert run(a, req("GET", "/topics", jar)).status == 401
    assert run(a, req("GET", "/topics", {"cookie": "odradek_session=forged"})).status == 401


def test_login_form_takes_a_sasl_user_too() -> None:
    k = FakeKafka()
    a = token_app(k, principal=ANONYMOUS)
    assert run(a, req("POST", "/login", SAME_ORIGIN, "user=admin&secret=wrong")).status == 401
    ok = run(a, req("POST", "/login", SAME_ORIGIN, "user=admin&secret=pw"))
    assert ok.status == 303
    assert run(a, req("GET", "/", {"cookie": f"odradek_session={session_of(ok)}"})).status == 200
    tok = run(a, req("POST", "/login", SAME_ORIGIN, f"secret={TOKEN}"))
    assert run(a, req("GET", "/", {"cookie": f"odradek_session={session_of(tok)}"})).status == 200
    assert [p for p, _ in k.calls] == ["User:admin", "User:admin", ANONYMOUS, ANONYMOUS]


def test_failed_logins_are_limited_per_address() -> None:
    clock = Clock()
    a = token_app(FakeKafka(), clock)
    for i in range(10):
        how = [bearer("wrong"), {"authorization": basic("admin", "no")}][i % 2]
        assert run(a, req("GET", "/", how)).status == 401
    refused = run(a, req("GET", "/", bearer(TOKEN)))  # even the right token, until the window passes
    assert refused.status == 429 and refused.headers["Retry-After"] == "60"
    assert run(a, req("POST", "/login", SAME_ORIGIN, f"secret={TOKEN}")).status == 429
    assert run(a, from_peer(req("GET", "/", bearer(TOKEN)), "127.0.0.2:4444")).status == 200  # another address
    clock.t += 60
    assert run(a, req("GET", "/", bearer(TOKEN))).status == 200


def test_failed_login_is_delayed() -> None:
    a = ConsoleApp(FakeKafka(), NoRecords(), CredentialCheck({}, None), lambda: {}, token=TOKEN,
                   failure_delay_s=0.2)

    async def timed() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert (await a(req("GET", "/", bearer("wrong")))).status == 401
        return loop.time() - t0

    assert asyncio.run(timed()) >= 0.2


def test_metrics_guard() -> None:
    a = token_app(FakeKafka(), principal=ANONYMOUS)
    metrics = a.guard(lambda r: HttpResponse(200, b"m"))

    def get(headers: dict[str, str]) -> HttpResponse:
        out = metrics(req("GET", "/metrics", headers))
        assert not isinstance(out, HttpResponse)
        return asyncio.run(out)  # type: ignore[arg-type]

    r = get({})
    assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    assert get(bearer("wrong")).status == 401
    assert get(bearer(TOKEN)).body == b"m"  # a token acting as User:ANONYMOUS is still logged in
    sid = session_of(run(a, req("POST", "/login", SAME_ORIGIN, f"secret={TOKEN}")))
    assert get({"cookie": f"odradek_session={sid}"}).status == 200
    assert get({"authorization": basic("admin", "pw")}).status == 200
