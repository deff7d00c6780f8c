"""HTTP Basic against SASL credentials, and the console app's request handling with a fake Kafka
dispatcher: the principal each request runs as, 401 on a wrong password, CSRF and method checks,
security headers, and the reset refused while the group is active."""

from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace as NS
from typing import Any

from odradek.console import dispatch
from odradek.console.app import ConsoleApp
from odradek.console.auth import ANONYMOUS, CredentialCheck, parse_basic
from odradek.http.server import HttpRequest, HttpResponse
from odradek.protocol import errors
from odradek.security.scram import make_credential


def basic(user: str, pw: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


def test_parse_basic() -> None:
    assert parse_basic(basic("alice", "p:w")) == ("alice", "p:w")
    for bad in (None, "", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode(),
                "Basic " + base64.b64encode(b":pw").decode(), "Basic " + base64.b64encode(b"\xff:x").decode()):
        assert parse_basic(bad) is None


def test_credential_check_plain_and_scram() -> None:
    creds = {("carol", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "c-pw", 4096)}
    check = CredentialCheck({"alice": "a-pw"}, lambda u, m: creds.get((u, m)))
    assert check.verify("alice", "a-pw") and not check.verify("alice", "nope")
    assert check.verify("carol", "c-pw") and not check.verify("carol", "a-pw")
    assert not check.verify("dave", "")
    assert not CredentialCheck({}, None).verify("alice", "a-pw")


class FakeKafka:
    """Answers like the handlers would; records who asked what."""

    def __init__(self, group_state: str = "Empty") -> None:
        self.calls: list[tuple[str, int]] = []
        self.group_state = group_state

    async def call(self, principal: str, host: str, api: tuple[int, int], request: Any) -> Any:
        self.calls.append((principal, api[0]))
        if api == dispatch.CREATE_TOPICS:
            denied = principal != "User:admin"
            return NS(topics=[NS(name=request.topics[0].name,
                                 error_code=errors.TOPIC_AUTHORIZATION_FAILED if denied else 0,
                                 error_message="Authorization failed." if denied else None)])
        if api == dispatch.DESCRIBE_GROUPS:
            return NS(groups=[NS(error_code=0, group_id=request.groups[0], group_state=self.group_state,
                                 protocol_data="range", members=[])])
        if api == dispatch.OFFSET_FETCH:
            return NS(error_code=0, topics=[])
        if api == dispatch.METADATA:
            return NS(controller_id=0, cluster_id="c", brokers=[], topics=[])
        if api == dispatch.DESCRIBE_LOG_DIRS:
            return NS(error_code=0, results=[])
        raise AssertionError(f"unexpected api {api}")


class NoRecords:
    def bounds(self, principal: str, host: str, topic: str, partition: int) -> tuple[int, int]:
        return 0, 0

    def read(self, principal: str, host: str, topic: str, partition: int, offset: int, max_records: int) -> list[Any]:
        return []


def app(kafka: FakeKafka) -> ConsoleApp:
    return ConsoleApp(kafka, NoRecords(), CredentialCheck({"admin": "pw", "alice": "apw"}, None),
                      lambda: {"messages_in": 1}, secret=b"k")


def req(method: str, path: str, headers: dict[str, str] | None = None, body: str = "",
        query: dict[str, list[str]] | None = None) -> HttpRequest:
    return HttpRequest(method, path, path, query or {}, {"host": "127.0.0.1:9644", **(headers or {})},
                       body.encode(), "127.0.0.1:5555")


SAME_ORIGIN = {"origin": "http://127.0.0.1:9644", "sec-fetch-site": "same-origin"}


def run(a: ConsoleApp, r: HttpRequest) -> HttpResponse:
    return asyncio.run(a(r))


def test_principal_of_each_request() -> None:
    k = FakeKafka()
    a = app(k)
    assert run(a, req("GET", "/")).status == 200
    assert run(a, req("GET", "/", {"authorization": basic("alice", "apw")})).status == 200
    assert [p for p, _ in k.calls] == [ANONYMOUS, ANONYMOUS, "User:alice", "User:alice"]
    denied = run(a, req("GET", "/", {"authorization": basic("alice", "wrong")}))
    assert denied.status == 401 and denied.headers["WWW-Authenticate"].startswith("Basic")
    assert run(a, req("GET", "/login")).status == 401  # asks the browser for credentials
    assert run(a, req("GET", "/login", {"authorization": basic("admin", "pw")})).status == 303


def test_security_headers_and_static_assets() -> None:
    a = app(FakeKafka())
    r = run(a, req("GET", "/static/console.js"))
    assert r.status == 200 and r.content_type.startswith("text/javascript") and b"innerHTML" not in r.body
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert run(a, req("GET", "/api/stats")).body == b'{"messages_in": 1}'
    assert run(a, req("GET", "/nothing")).status == 404


def test_actions_need_post_token_and_same_origin() -> None:
    k = FakeKafka()
    a = app(k)
    admin = {"authorization": basic("admin", "pw")}
    token = a.token("User:admin")
    assert run(a, req("GET", "/actions/create-topic", admin)).status == 404  # a GET is a page, and there is none
    assert run(a, req("PUT", "/topics", admin)).status == 405
    assert run(a, req("POST", "/topics", admin)).status == 405
    assert run(a, req("POST", "/actions/create-topic", admin, "name=t")).status == 403  # no token
    assert run(a, req("POST", "/actions/create-topic", admin, f"name=t&csrf={a.token('User:alice')}")).status == 403
    assert run(a, req("POST", "/actions/create-topic", {**admin, "origin": "http://evil.example"},
                      f"name=t&csrf={token}")).status == 403
    assert run(a, req("POST", "/actions/create-topic", {**admin, "origin": "null"}, f"name=t&csrf={token}")).status == 403
    assert not k.calls
    ok = run(a, req("POST", "/actions/create-topic", {**admin, "origin": "http://127.0.0.1:9644"},
                    f"name=t&partitions=2&csrf={token}"))
    assert ok.status == 200 and b"Created topic t." in ok.body
    alice = {"authorization": basic("alice", "apw")}
    no = run(a, req("POST", "/actions/create-topic", {**alice, "referer": "http://127.0.0.1:9644/topics"},
                    f"name=t&csrf={a.token('User:alice')}"))
    assert no.status == 403 and b"TOPIC_AUTHORIZATION_FAILED: Authorization failed." in no.body
    assert k.calls == [("User:admin", 19), ("User:alice", 19)]


def test_reset_refused_while_the_group_is_active() -> None:
    k = FakeKafka("Stable")
    a = app(k)
    r = run(a, req("POST", "/actions/reset-offsets", SAME_ORIGIN, f"group=g&topic=t&to=earliest&csrf={a.token(ANONYMOUS)}"))
    assert r.status == 400
    assert b"inactive, but the current state is Stable." in r.body
    assert [api for _, api in k.calls] == [15, 9]  # DescribeGroups and OffsetFetch; no OffsetCommit


def test_in_process_dispatch_refuses_versions_it_does_not_serve() -> None:
    d = dispatch.InProcessDispatch(lambda: None, "PLAINTEXT")
    try:
        asyncio.run(d.call(ANONYMOUS, "h", dispatch.METADATA, NS()))
    except RuntimeError as e:
        assert "not started" in str(e)
    else:
        raise AssertionError("a dispatch before the broker started must fail")


def test_actions_need_their_origin_said_and_same_site() -> None:
    """A form posted from another site, or by a client that says nothing of where it comes from, is
    refused even with the right token (a token read through a rebinding page is no proof)."""
    k = FakeKafka()
    a = app(k)
    admin = {"authorization": basic("admin", "pw")}
    body = f"name=t&csrf={a.token('User:admin')}"
    assert run(a, req("POST", "/actions/create-topic", admin, body)).status == 403  # neither Origin nor Referer
    assert run(a, req("POST", "/actions/create-topic", {**admin, "referer": "http://evil.example/x"}, body)).status == 403
    assert run(a, req("POST", "/actions/create-topic", {**admin, **SAME_ORIGIN, "sec-fetch-site": "cross-site"},
                      body)).status == 403
    assert run(a, req("POST", "/actions/create-topic", {**admin, "origin": "http://127.0.0.1:9999"}, body)).status == 403
    assert not k.calls
    assert run(a, req("POST", "/actions/create-topic", {**admin, **SAME_ORIGIN}, body)).status == 200
    assert run(a, req("POST", "/actions/create-topic", {**admin, "referer": "http://127.0.0.1:9644/topics"},
                      body)).status == 200


def test_no_anonymous_console_when_the_broker_has_security() -> None:
    k = FakeKafka()
    a = ConsoleApp(k, NoRecords(), CredentialCheck({"admin": "pw"}, None), lambda: {}, anonymous_allowed=False)
    for path in ("/", "/topics", "/api/stats", "/static/console.js", "/login"):
        r = run(a, req("GET", path))
        assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Basic"), path
    assert not k.calls
    assert run(a, req("GET", "/", {"authorization": basic("admin", "pw")})).status == 200
