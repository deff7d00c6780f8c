"""The console's HTTP routes (mounted at ``/`` of ``http.listeners``).

GET pages: ``/`` brokers, ``/topics``, ``/topic?name=``, ``/records?topic=&partition=&offset=|timestamp=``,
``/groups``, ``/group?id=``, ``/charts``; ``/api/stats`` (JSON the charts poll); ``/static/*``.
POST actions: ``/actions/create-topic`` (CreateTopics), ``/actions/alter-config``
(IncrementalAlterConfigs), ``/actions/reset-offsets`` (ListOffsets + OffsetCommit, refused while the
group is active as kafka-consumer-groups.sh refuses).

Every page and action is a Kafka request dispatched in-process (odradek.console.dispatch) as the
HTTP user's principal (odradek.console.auth), so the authorizer decides as for a Kafka client and
its refusal is shown with Kafka's error name.

When the broker has security configured (a listener that is not PLAINTEXT, or an authorizer), every
page, action and asset needs HTTP Basic credentials of one of its SASL users: ``User:ANONYMOUS`` gets
401, as a Kafka client that does not authenticate on a SASL listener gets nothing. Without security,
anonymous users are served as a PLAINTEXT listener serves them.

With ``http.auth.token`` (odradek.console.login) nobody is served without logging in, security or
not: ``Authorization: Bearer <token>``, or the login form (``GET /login``, ``POST /login`` with the
token, or a SASL user's name and password), which opens a session kept in an HttpOnly,
SameSite=Strict cookie (``POST /logout`` ends it). A token login acts as
``http.auth.token.principal``. The login page and its stylesheet are the only things served before.
Failed logins of any kind are delayed and limited per address (429 past the limit).

Cross-site requests (the HTTP server refuses a foreign ``Host`` first, odradek.http.host_check): an
action is POST only and is refused (403) unless all of these hold:

* it carries the CSRF token of its principal (HMAC of the principal with a per-process secret), which
  only a page of the console shows;
* its ``Origin``, or without one its ``Referer``, names this very host (same scheme-less host:port as
  the ``Host`` header); a request with neither, or ``Origin: null``, is refused;
* its ``Sec-Fetch-Site``, when the browser sends one, is ``same-origin`` (or ``none``: typed by the user).

A request authenticated with a Bearer token is exempt: a browser never adds that header by itself, and
a page of another site can only send it through a CORS preflight this server does not grant. The login
form's POST and ``/logout`` need the same origin (they have no token yet).
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import inspect
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from odradek.console import assets, model, pages
from odradek.console.auth import ANONYMOUS, CredentialCheck, parse_basic
from odradek.console.dispatch import (
    CREATE_TOPICS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_LOG_DIRS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    KafkaDispatch,
    ns,
)
from odradek.console.login import (
    SESSION_COOKIE,
    LoginThrottle,
    Sessions,
    cookie,
    expired_cookie,
    parse_bearer,
    session_cookie,
    token_matches,
)
from odradek.console.records import BrowseError, RecordSource
from odradek.http.server import Handler, HttpRequest, HttpResponse

HTML = "text/html; charset=utf-8"
RESOURCE_TOPIC = 2
OP_SET, OP_DELETE = 0, 1
EARLIEST, LATEST = -2, -1
MAX_RECORDS = 500
VERIFIED_TTL_S = 10.0
FAILED_AUTHENTICATION_DELAY_S = 0.1

Stats = Callable[[], Mapping[str, Any]]

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class _Unauthenticated(Exception):
    pass


class _Throttled(Exception):
    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many failed logins: retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


# how a request proved who it is
NONE, BASIC, BEARER, SESSION = "none", "basic", "bearer", "session"
PUBLIC_WITH_TOKEN = frozenset({"/login", "/logout", "/static/console.css"})  # served before a login


@dataclass(frozen=True, slots=True)
class Login:
    principal: str
    via: str  # NONE, BASIC, BEARER or SESSION
    session: str | None = None


def peer_address(request: HttpRequest) -> str:
    return request.peer.rsplit(":", 1)[0]


class ConsoleApp:
    def __init__(self, kafka: KafkaDispatch, records: RecordSource, credentials: CredentialCheck,
                 stats: Stats, *, secret: bytes | None = None, anonymous_allowed: bool = True,
                 token: str | None = None, token_principal: str = ANONYMOUS,
                 failure_delay_s: float = FAILED_AUTHENTICATION_DELAY_S,
                 clock: Callable[[], float] = time.monotonic,
                 remote_sizes: Callable[[], Mapping[tuple[str, int], int]] = dict) -> None:
        self.kafka = kafka
        self.remote_sizes = remote_sizes  # tiered storage: (topic, partition) -> bytes in the remote tier
        self.records = records
        self.credentials = credentials
        self.stats = stats
        self._secret = secret or secrets.token_bytes(32)
        self.login_token = token or None  # http.auth.token; empty is unset
        self.token_principal = token_principal
        # False when the broker has security configured, or a token to log in with
        self.anonymous_allowed = anonymous_allowed and self.login_token is None
        self.failure_delay_s = failure_delay_s
        self.clock = clock
        self.sessions = Sessions(clock)
        self.throttle = LoginThrottle(clock)
        self._verified: dict[bytes, tuple[bool, float]] = {}  # digest -> (ok, until)

    # -- entry point
    async def __call__(self, request: HttpRequest) -> HttpResponse:
        host = peer_address(request)
        path = request.path
        try:
            login = await self._login(request, host)
        except _Throttled as e:
            return self._throttled(e)
        except _Unauthenticated:
            return self._unauthorized(b"authentication failed\n")
        public = self.login_token is not None and path in PUBLIC_WITH_TOKEN
        if login.via == NONE and not self.anonymous_allowed and not public:
            return self._unauthorized(b"log in first\n")
        principal = login.principal
        if self.login_token is not None and path in ("/login", "/logout"):
            return await self._login_route(request, login, host)
        if request.method == "POST":
            if not path.startswith("/actions/"):
                return self._respond(405, b"method not allowed\n", "text/plain; charset=utf-8", {"Allow": "GET"})
            return await self._action(request, login, host)
        if request.method not in ("GET", "HEAD"):
            return self._respond(405, b"method not allowed\n", "text/plain; charset=utf-8", {"Allow": "GET, POST"})
        if path == "/static/console.css":
            return self._respond(200, assets.CSS.encode(), "text/css; charset=utf-8")
        if path == "/static/console.js":
            return self._respond(200, assets.JS.encode(), "text/javascript; charset=utf-8")
        if path == "/api/stats":
            return self._respond(200, json.dumps(dict(self.stats())).encode(), "application/json")
        if path == "/login":
            if login.via == NONE:
                raise_login = {"WWW-Authenticate": 'Basic realm="odradek", charset="UTF-8"'}
                return self._respond(401, b"log in with a SASL user's name and password\n",
                                     "text/plain; charset=utf-8", raise_login)
            return self._respond(303, b"", HTML, {"Location": "/"})
        page = {"/": self._brokers, "/topics": self._topics, "/topic": self._topic, "/records": self._records,
                "/groups": self._groups, "/group": self._group, "/charts": self._charts}.get(path)
        if page is None:
            return self._respond(404, b"not found\n", "text/plain; charset=utf-8")
        query = {k: v[-1] for k, v in request.query.items()}
        title, body, script = await page(principal, host, query)
        return self._respond(200, self._layout(title, body, login, script=script), HTML)

    def _layout(self, title: str, body: str, login: Login, *, script: bool = False) -> bytes:
        return pages.layout(title, body, login.principal, script=script, logout=login.via == SESSION)

    def _respond(self, status: int, body: bytes, content_type: str,
                 headers: Mapping[str, str] | None = None) -> HttpResponse:
        return HttpResponse(status, body, content_type, {**_SECURITY_HEADERS, **(headers or {})})

    def _unauthorized(self, message: bytes) -> HttpResponse:
        if self.login_token is None:
            return self._respond(401, message, "text/plain; charset=utf-8",
                                 {"WWW-Authenticate": 'Basic realm="odradek", charset="UTF-8"'})
        return self._respond(401, pages.login_page(None), HTML, {"WWW-Authenticate": 'Bearer realm="odradek"'})

    def _throttled(self, e: _Throttled) -> HttpResponse:
        return self._respond(429, f"{e}\n".encode(), "text/plain; charset=utf-8",
                             {"Retry-After": str(e.retry_after_s)})

    async def _failed(self, host: str) -> None:
        """A failed login: counted against the address, answered after the delay (as Kafka answers a
        failed SASL authentication after connection.failed.authentication.delay.ms)."""
        self.throttle.failed(host)
        if self.failure_delay_s > 0:
            await asyncio.sleep(self.failure_delay_s)

    def _check_throttle(self, host: str) -> None:
        wait = self.throttle.retry_after(host)
        if wait:
            raise _Throttled(wait)

    async def _login(self, request: HttpRequest, host: str) -> Login:
        """Who the request is: its Authorization header (Basic or Bearer), else its session cookie,
        else nobody (``User:ANONYMOUS`` via NONE). Credentials that are sent and wrong raise
        _Unauthenticated; a stale or unknown session cookie counts as none."""
        header = request.headers.get("authorization")
        if header is None:
            sid = cookie(request.headers.get("cookie"), SESSION_COOKIE) if self.login_token is not None else None
            if sid:
                principal = self.sessions.principal(sid)
                if principal is not None:
                    return Login(principal, SESSION, sid)
            return Login(ANONYMOUS, NONE)
        self._check_throttle(host)
        bearer = parse_bearer(header)
        if bearer is not None:
            if self.login_token is not None and token_matches(self.login_token, bearer):
                return Login(self.token_principal, BEARER)
            await self._failed(host)
            raise _Unauthenticated()
        creds = parse_basic(header)
        if creds is None or not await self._verify(*creds):
            await self._failed(host)
            raise _Unauthenticated()
        return Login(f"User:{creds[0]}", BASIC)

    def guard(self, handler: Handler) -> Handler:
        """``handler`` (``/metrics``) served only to a request that logged in (Bearer token, console
        session or HTTP Basic): http.metrics.auth.required."""

        async def guarded(request: HttpRequest) -> HttpResponse:
            host = peer_address(request)
            try:
                login = await self._login(request, host)
            except _Throttled as e:
                return self._throttled(e)
            except _Unauthenticated:
                login = Login(ANONYMOUS, NONE)
            if login.via == NONE:
                challenge = 'Bearer realm="odradek"' if self.login_token is not None else 'Basic realm="odradek"'
                return HttpResponse(401, b"log in first\n", headers={"WWW-Authenticate": challenge})
            out = handler(request)
            if inspect.isawaitable(out):
                out = await out
            assert isinstance(out, HttpResponse)
            return out

        return guarded

    # -- the login form (with http.auth.token)
    async def _login_route(self, request: HttpRequest, login: Login, host: str) -> HttpResponse:
        if request.method in ("GET", "HEAD"):
            if request.path == "/login" and login.via != NONE:
                return self._respond(303, b"", HTML, {"Location": "/"})
            if request.path == "/login":
                return self._respond(200, pages.login_page(None), HTML)
        if request.method != "POST":
            return self._respond(405, b"method not allowed\n", "text/plain; charset=utf-8", {"Allow": "GET, POST"})
        refusal = self._origin_refusal(request)
        if refusal is not None:
            return self._respond(403, pages.login_page(refusal), HTML)
        if request.path == "/logout":
            if login.session is not None:
                self.sessions.close(login.session)
            return self._respond(303, b"", HTML, {"Location": "/login", "Set-Cookie": expired_cookie()})
        try:
            self._check_throttle(host)
        except _Throttled as e:
            return self._throttled(e)
        form = _form(request)
        user, secret = form.get("user", "").strip(), form.get("secret", "")
        principal: str | None = None
        if not user and self.login_token is not None and token_matches(self.login_token, secret):
            principal = self.token_principal
        elif user and await self._verify(user, secret):
            principal = f"User:{user}"
        if principal is None:
            await self._failed(host)
            return self._respond(401, pages.login_page("wrong token, or user name and password"), HTML,
                                 {"WWW-Authenticate": 'Bearer realm="odradek"'})
        sid = self.sessions.open(principal)
        return self._respond(303, b"", HTML, {"Location": "/",
                                              "Set-Cookie": session_cookie(sid, self.sessions.ttl_s)})

    async def _verify(self, user: str, password: str) -> bool:
        """The password check (PBKDF2 for SCRAM: costly), remembered for ``VERIFIED_TTL_S`` under a
        keyed digest of the pair (no password kept), so a changed or deleted credential applies soon."""
        key = hmac.new(self._secret, f"{user}\0{password}".encode(), hashlib.sha256).digest()
        now = self.clock()
        hit = self._verified.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        ok = await asyncio.get_running_loop().run_in_executor(None, self.credentials.verify, user, password)
        if len(self._verified) >= 1024:
            self._verified = {k: v for k, v in self._verified.items() if v[1] > now}
            if len(self._verified) >= 1024:
                self._verified.clear()
        self._verified[key] = (ok, now + VERIFIED_TTL_S)
        return ok

    def token(self, principal: str) -> str:
        return hmac.new(self._secret, principal.encode(), hashlib.sha256).hexdigest()

    # -- reads
    async def _cluster(self, principal: str, host: str, topics: list[str] | None = None) -> model.Cluster:
        md = await self.kafka.call(principal, host, METADATA, ns(
            topics=None if topics is None else [ns(name=t, topic_id=None) for t in topics],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False))
        dirs = await self.kafka.call(principal, host, DESCRIBE_LOG_DIRS, ns(
            topics=None if topics is None else [ns(topic=t, partitions=[p.partition_index for p in tt.partitions])
                                                for t in topics for tt in md.topics if tt.name == t]))
        sizes = model.log_sizes(dirs) if int(getattr(dirs, "error_code", 0)) == 0 else {}
        return model.cluster_view(md, sizes, self.remote_sizes())

    async def _brokers(self, principal: str, host: str, query: dict[str, str]) -> tuple[str, str, bool]:
        return "Brokers", pages.brokers_page(await self._cluster(principal, host)), False

    async def _topics(self, principal: str, host: str, query: dict[str, str]) -> tuple[str, str, bool]:
        c = await self._cluster(principal, host)
        return "Topics", pages.topics_page(c.topics, self.token(principal)), False

    async def _offsets(self, principal: str, host: str, parts: list[tuple[str, int]], ts: int) -> Any:
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        return await self.kafka.call(principal, host, LIST_OFFSETS, ns(
            replica_id=-1, isolation_level=0,
            topics=[ns(name=t, partitions=[ns(partition_index=p, current_leader_epoch=-1, timestamp=ts,
                                              max_num_offsets=1) for p in ps]) for t, ps in by_topic.items()]))

    async def _topic(self, principal: str, host: str, query: dict[str, str]) -> tuple[str, str, bool]:
        name = query.get("name", "")
        c = await self._cluster(principal, host, [name])
        t = c.topics[0] if c.topics else None
        if t is None or t.error is not None:
            return f"Topic {name}", pages.error_box(f"{name}: {t.error if t else 'not found'}"), False
        cfg = await self.kafka.call(principal, host, DESCRIBE_CONFIGS, ns(
            resources=[ns(resource_type=RESOURCE_TOPIC, resource_name=name, configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
        cfg_error, rows = model.config_rows(cfg)
        keys = [(name, p.partition) for p in t.partitions]
        starts = model.list_offsets(await self._offsets(principal, host, keys, EARLIEST))
        ends = model.list_offsets(await self._offsets(principal, host, keys, LATEST))
        bounds = {p: (starts[(name, p)], ends[(name, p)]) for _, p in keys if (name, p) in starts and (name, p) in ends}
        return f"Topic {name}", pages.topic_page(t, cfg_error, rows, bounds, self.token(principal)), False

    async def _records(self, principal: str, host: str, query: dict[str, str]) -> tuple[str, str, bool]:
        topic = query.get("topic", "")
        timestamp = query.get("timestamp", "").strip()
        try:
            partition = model.parse_int(query, "partition", 0, 0)
            limit = min(model.parse_int(query, "limit", 50, 1), MAX_RECORDS)
            offset: int | None = model.parse_int(query, "offset", -1) if query.get("offset", "").strip() else None
        except model.FormError as e:
            return f"Records of {topic}", pages.error_box(str(e)), False
        error: str | None = None
        rows: tuple[model.RecordRow, ...] = ()
        bounds: tuple[int, int] | None = None
        try:
            bounds = self.records.bounds(principal, host, topic, partition)
            if timestamp and offset is None:
                ts = parse_timestamp(timestamp)
                lo = await self._offsets(principal, host, [(topic, partition)], ts)
                refused = model.list_offsets_errors(lo)
                if refused:
                    raise model.FormError("; ".join(refused))
                offset = model.list_offsets(lo).get((topic, partition), -1)
                if offset < 0:
                    offset = bounds[1]
                    error = f"no record at or after timestamp {timestamp}"
            if offset is None:
                offset = bounds[0]
            rows = model.record_rows(self.records.read(principal, host, topic, partition, offset, limit), offset,
                                     limit)
        except BrowseError as e:
            error = model.error_text(e.code, str(e))
        except model.FormError as e:
            error = str(e)
        body = pages.records_page(topic, partition, bounds, offset, rows, error, timestamp, limit)
        return f"Records of {topic}-{partition}", body, False

    async def _groups(self, principal: str, host: str, query: dict[str, str]) -> tuple[str, str, bool]:
        lg = await self.kafka.call(principal, host, LIST_GROUPS, ns(states_filter=(), types_filter=()))
        error, rows = model.group_rows(lg)
        return "Consumer groups", pages.groups_page(error, rows), False

    async def _group_detail(self, principal: str, host: str, group: str) -> tuple[model.GroupDetail, str | None]:
        dg = await self.kafka.call(principal, host, DESCRIBE_GROUPS, ns(
            groups=[group], include_authorized_operations=False))
        detail = model.group_detail(dg)
        if detail.error:
            return detail, None
        of = await self.kafka.call(principal, host, OFFSET_FETCH, ns(
            group_id=group, topics=None, require_stable=False))
        lag_error, committed = model.committed(of)
        ends: dict[tuple[str, int], int] = {}
        if committed:
            lo = await self._offsets(principal, host, sorted(committed), LATEST)
            ends = model.list_offsets(lo)
        return model.GroupDetail(detail.group_id, detail.state, detail.protocol, None, detail.members,
                                 model.lag_rows(committed, ends)), lag_error

    async def _group(self, principal: str, host: str, query: dict[str, str]) -> tuple[str, str, bool]:
        group = query.get("id", "")
        detail, lag_error = await self._group_detail(principal, host, group)
        return f"Group {group}", pages.group_page(detail, lag_error, self.token(principal)), False

    async def _charts(self, principal: str, host: str, query: dict[str, str]) -> tuple[str, str, bool]:
        return "Throughput and latency", pages.charts_page(), True

    # -- actions
    def _csrf_refusal(self, request: HttpRequest, form: Mapping[str, str], principal: str) -> str | None:
        refusal = self._origin_refusal(request)
        if refusal is not None:
            return refusal
        if not hmac.compare_digest(form.get("csrf", ""), self.token(principal)):
            return "missing or wrong CSRF token: reload the page and submit again"
        return None

    @staticmethod
    def _origin_refusal(request: HttpRequest) -> str | None:
        host = request.headers.get("host", "").strip().lower()
        site = request.headers.get("sec-fetch-site")
        if site is not None and site.strip().lower() not in ("same-origin", "none"):
            return f"cross-site request refused (Sec-Fetch-Site {site})"
        origin = request.headers.get("origin")
        referer = request.headers.get("referer")
        if origin is not None:
            if origin.strip() == "null" or urlsplit(origin.strip()).netloc.lower() != host:
                return f"cross-origin request refused (Origin {origin})"
        elif referer is not None:
            if urlsplit(referer.strip()).netloc.lower() != host:
                return "cross-origin request refused (Referer of another site)"
        else:
            return "request refused: neither Origin nor Referer says it comes from this console"
        return None

    async def _action(self, request: HttpRequest, login: Login, host: str) -> HttpResponse:
        principal = login.principal
        form = _form(request)
        refusal = None if login.via == BEARER else self._csrf_refusal(request, form, principal)
        if refusal is not None:
            return self._respond(403, self._layout("Refused", pages.error_box(refusal, "result"), login), HTML)
        action = {"/actions/create-topic": self._create_topic, "/actions/alter-config": self._alter_config,
                  "/actions/reset-offsets": self._reset_offsets}.get(request.path)
        if action is None:
            return self._respond(404, b"not found\n", "text/plain; charset=utf-8")
        try:
            title, ok, error, back = await action(principal, host, form)
        except model.FormError as e:
            title, ok, error, back = "Refused", None, str(e), "/"
        status = 200 if ok else 400
        if error and "AUTHORIZATION_FAILED" in error:
            status = 403
        return self._respond(status, self._layout(title, pages.result_page(ok, error, back), login), HTML)

    async def _create_topic(self, principal: str, host: str,
                            form: Mapping[str, str]) -> tuple[str, str | None, str | None, str]:
        name = form.get("name", "").strip()
        if not name:
            raise model.FormError("name is required")
        partitions = model.parse_int(form, "partitions", -1)
        rf = model.parse_int(form, "replication_factor", -1)
        configs = model.parse_configs(form.get("configs", ""))
        resp = await self.kafka.call(principal, host, CREATE_TOPICS, ns(
            topics=[ns(name=name, num_partitions=partitions, replication_factor=rf, assignments=(),
                       configs=[ns(name=k, value=v) for k, v in configs.items()])],
            timeout=datetime.timedelta(seconds=30), validate_only=False))
        r = resp.topics[0]
        if int(r.error_code):
            return f"Create topic {name}", None, model.error_text(r.error_code, r.error_message), "/topics"
        return f"Create topic {name}", f"Created topic {name}.", None, f"/topic?name={pages.q(name)}"

    async def _alter_config(self, principal: str, host: str,
                            form: Mapping[str, str]) -> tuple[str, str | None, str | None, str]:
        topic = form.get("topic", "")
        config = form.get("config", "").strip()
        if not config:
            raise model.FormError("config is required")
        delete = form.get("delete") == "1"
        value = None if delete else form.get("value", "")
        resp = await self.kafka.call(principal, host, INCREMENTAL_ALTER_CONFIGS, ns(
            resources=[ns(resource_type=RESOURCE_TOPIC, resource_name=topic,
                          configs=[ns(name=config, config_operation=OP_DELETE if delete else OP_SET, value=value)])],
            validate_only=False))
        r = resp.responses[0]
        back = f"/topic?name={pages.q(topic)}"
        if int(r.error_code):
            return f"Config of {topic}", None, model.error_text(r.error_code, r.error_message), back
        what = f"Deleted {config}" if delete else f"Set {config}={value}"
        return f"Config of {topic}", f"{what} on topic {topic}.", None, back

    async def _reset_offsets(self, principal: str, host: str,
                             form: Mapping[str, str]) -> tuple[str, str | None, str | None, str]:
        group, topic, to = form.get("group", ""), form.get("topic", ""), form.get("to", "")
        back = f"/group?id={pages.q(group)}"
        title = f"Reset offsets of {group}"
        if to not in model.RESET_TARGETS:
            raise model.FormError(f"to is one of {', '.join(model.RESET_TARGETS)}")
        detail, _ = await self._group_detail(principal, host, group)
        refusal = model.reset_refusal(detail)
        if refusal is not None:
            return title, None, refusal, back
        if form.get("partition", "").strip():
            partitions = [model.parse_int(form, "partition", lo=0)]
        else:
            c = await self._cluster(principal, host, [topic])
            if not c.topics or c.topics[0].error:
                return title, None, f"{topic}: {c.topics[0].error if c.topics else 'not found'}", back
            partitions = [p.partition for p in c.topics[0].partitions]
        keys = [(topic, p) for p in partitions]
        if to == "offset":
            target = model.parse_int(form, "offset", lo=0)
            lo_ = await self._offsets(principal, host, keys, EARLIEST)
            hi_ = await self._offsets(principal, host, keys, LATEST)
            errs = model.list_offsets_errors(lo_)
            if errs:
                return title, None, "; ".join(errs), back
            lo, hi = model.list_offsets(lo_), model.list_offsets(hi_)
            # kafka-consumer-groups.sh clamps a target outside the log to its start or end
            offsets = {k: min(max(target, lo[k]), hi[k]) for k in keys}
        else:
            lo_ = await self._offsets(principal, host, keys, EARLIEST if to == "earliest" else LATEST)
            errs = model.list_offsets_errors(lo_)
            if errs:
                return title, None, "; ".join(errs), back
            offsets = model.list_offsets(lo_)
        resp = await self.kafka.call(principal, host, OFFSET_COMMIT, ns(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            retention_time_ms=-1,
            topics=[ns(name=topic, partitions=[ns(partition_index=p, committed_offset=offsets[(topic, p)],
                                                  committed_leader_epoch=-1, committed_metadata="")
                                               for p in partitions])]))
        failed = [f"{t.name}-{p.partition_index}: {model.error_name(p.error_code)}"
                  for t in resp.topics for p in t.partitions if int(p.error_code)]
        if failed:
            return title, None, "; ".join(failed), back
        done = ", ".join(f"{topic}-{p} to {offsets[(topic, p)]}" for p in partitions)
        return title, f"Reset {done}.", None, back


def _form(request: HttpRequest) -> dict[str, str]:
    try:
        return {k: v[-1] for k, v in parse_qs(request.body.decode("utf-8"), keep_blank_values=True).items()}
    except UnicodeDecodeError:
        return {}


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 time (UTC when it names no zone)."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        dt = datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise model.FormError(f"a timestamp is milliseconds or ISO 8601, not {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)
