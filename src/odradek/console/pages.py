"""HTML of the console's pages, rendered from odradek.console.model. Every value that comes from
the broker or from a request (topic names, record keys and values, header names, error messages,
group and member ids) goes through :func:`esc` or :func:`q` — nothing is inserted unescaped."""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from odradek.console.model import (
    RESET_TARGETS,
    Cluster,
    ConfigRow,
    GroupDetail,
    GroupRow,
    RecordRow,
    Shown,
    TopicRow,
    sequence_str,
)


def esc(x: object) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def q(x: object) -> str:
    """A query-string value."""
    return quote(str(x), safe="")


def layout(title: str, body: str, principal: str, *, script: bool = False, logout: bool = False) -> bytes:
    """A page; ``logout``: the user has a console session (http.auth.token's login form) to end."""
    nav = "".join(f'<a href="{href}">{label}</a>' for href, label in (
        ("/", "Brokers"), ("/topics", "Topics"), ("/groups", "Consumer groups"), ("/charts", "Charts")))
    js = '<script src="/static/console.js"></script>' if script else ""
    account = ('<form class="inline" method="post" action="/logout"><button id="logout">log out</button></form>'
               if logout else '<a href="/login">log in</a>')
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{esc(title)} · Odradek</title>"
            f'<link rel="stylesheet" href="/static/console.css"></head><body>'
            f"<header><strong>Odradek</strong>{nav}<span class=\"who\"><span id=\"principal\">{esc(principal)}"
            f"</span> · {account}</span></header>"
            f"<main><h1>{esc(title)}</h1>{body}</main>{js}</body></html>").encode()


def login_page(error: str | None) -> bytes:
    """The form of http.auth.token's login: the token, or a SASL user's name and password."""
    box = error_box(error) if error else ""
    form = ('<form method="post" action="/login" id="login">'
            '<label>Token <input type="password" name="secret" autocomplete="current-password" autofocus></label>'
            '<details><summary>or a SASL user</summary>'
            '<label>User <input name="user" autocomplete="username"></label> '
            "(the token field is then the user's password)</details>"
            "<button>Log in</button></form>")
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Log in · Odradek</title>"
            f'<link rel="stylesheet" href="/static/console.css"></head><body>'
            f"<header><strong>Odradek</strong></header><main><h1>Log in</h1>{box}{form}</main></body></html>").encode()


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], table_id: str = "") -> str:
    """``rows`` cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cells_html(c) for c in r) + "</tr>" for r in rows)
    tid = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{tid}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def cells_html(cell: str) -> str:
    return cell if cell.startswith("<td") else f"<td>{cell}</td>"


def num(n: object) -> str:
    return f'<td class="num">{esc(n)}</td>'


def error_box(message: str, box_id: str = "error") -> str:
    return f'<div class="err" id="{esc(box_id)}">{esc(message)}</div>'


def ok_box(message: str) -> str:
    return f'<div class="ok" id="result">{esc(message)}</div>'


def csrf_field(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(token)}">'


def human_bytes(n: int | None) -> str:
    if n is None:
        return "–"
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return str(n)  # pragma: no cover


def brokers_page(c: Cluster) -> str:
    rows = [[num(b.node_id), esc(b.host), num(b.port), esc(b.rack or ""), "controller" if b.controller else ""]
            for b in c.brokers]
    under = sum(1 for t in c.topics for p in t.partitions if p.under_replicated)
    offline = sum(1 for t in c.topics for p in t.partitions if p.leader < 0)
    return (f"<p>Cluster id <code id=\"cluster-id\">{esc(c.cluster_id)}</code>, active controller "
            f"<strong id=\"controller\">{esc(c.controller_id)}</strong>.</p>"
            + table(["Broker", "Host", "Port", "Rack", "Role"], rows, "brokers")
            + f"<p>{len(c.topics)} topics, {sum(len(t.partitions) for t in c.topics)} partitions, "
              f"<span id=\"under-replicated\">{under}</span> under-replicated, "
              f"<span id=\"offline\">{offline}</span> offline.</p>")


def topics_page(topics: Sequence[TopicRow], token: str) -> str:
    # tiered storage (KIP-405): a "Remote size" column beside the local one when a topic has remote segments
    tiered = any(t.remote_size is not None for t in topics)
    rows = []
    for t in topics:
        under = sum(1 for p in t.partitions if p.under_replicated)
        rf = len(t.partitions[0].replicas) if t.partitions else 0
        sizes = [num(human_bytes(t.size))] + ([num(human_bytes(t.remote_size))] if tiered else [])
        rows.append([f'<a href="/topic?name={q(t.name)}">{esc(t.name)}</a>', num(len(t.partitions)), num(rf),
                     num(under), *sizes, "internal" if t.internal else "", esc(t.error or "")])
    form = ('<form class="inline" method="post" action="/actions/create-topic" id="create-topic">'
            + csrf_field(token)
            + '<b>Create topic</b><br>Name <input name="name" required> Partitions <input name="partitions" '
              'value="1" size="3"> Replication factor <input name="replication_factor" value="-1" size="3"><br>'
              'Configs (name=value, comma-separated) <input name="configs" size="40"> '
              '<button type="submit">Create</button></form>')
    size_heads = ["Local size", "Remote size"] if tiered else ["Size"]
    return table(["Topic", "Partitions", "Replication factor", "Under-replicated", *size_heads, "", "Error"], rows,
                 "topics") + form


def topic_page(t: TopicRow, configs_error: str | None, configs: Sequence[ConfigRow],
               ends: dict[int, tuple[int, int]], token: str) -> str:
    tiered = t.remote_size is not None
    prow = []
    for p in t.partitions:
        start, end = ends.get(p.partition, (None, None))
        sizes = [num(human_bytes(p.size))] + ([num(human_bytes(p.remote_size))] if tiered else [])
        prow.append([num(p.partition), num(p.leader), esc(sequence_str(p.replicas)), esc(sequence_str(p.isr)),
                     *sizes, num("–" if start is None else start), num("–" if end is None else end),
                     f'<a href="/records?topic={q(t.name)}&amp;partition={p.partition}">browse</a>'])
    size_heads = ["Local size", "Remote size"] if tiered else ["Size"]
    parts = table(["Partition", "Leader", "Replicas", "ISR", *size_heads, "Start offset", "End offset", "Records"],
                  prow, "partitions")
    cfg = error_box(configs_error, "configs-error") if configs_error else table(
        ["Config", "Value", "Source", "Read-only"],
        [[esc(c.name), esc("(sensitive)" if c.sensitive else c.value), esc(c.source), "yes" if c.read_only else ""]
         for c in configs], "configs")
    form = (f'<form class="inline" method="post" action="/actions/alter-config" id="alter-config">{csrf_field(token)}'
            f'<input type="hidden" name="topic" value="{esc(t.name)}"><b>Change a config</b><br>'
            'Name <input name="config" required> Value <input name="value"> '
            '<label><input type="checkbox" name="delete" value="1"> delete (back to the default)</label> '
            '<button type="submit">Apply</button></form>')
    return f"<h2>Partitions</h2>{parts}<h2>Configs</h2>{form}{cfg}"


def shown(s: Shown) -> str:
    if s.kind == "null":
        return '<span class="null">null</span>'
    cls = ' class="b64" title="base64 (not UTF-8 text)"' if s.kind == "base64" else ""
    return f"<pre{cls}>{esc(s.text)}</pre>"


def fmt_ts(ms: int) -> str:
    if ms < 0:
        return str(ms)
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return str(ms)


def records_page(topic: str, partition: int, bounds: tuple[int, int] | None, start: int | None,
                 rows: Sequence[RecordRow], error: str | None, timestamp: str, limit: int) -> str:
    form = ('<form method="get" action="/records" id="browse">'
            f'<input type="hidden" name="topic" value="{esc(topic)}">'
            f'Partition <input name="partition" value="{partition}" size="3"> '
            f'From offset <input name="offset" value="{esc("" if start is None else start)}" size="8"> or from '
            f'timestamp (ms or ISO 8601) <input name="timestamp" value="{esc(timestamp)}" size="24"> '
            f'Max <input name="limit" value="{limit}" size="4"> <button type="submit">Show</button></form>')
    info = ""
    if bounds is not None:
        info = (f"<p id=\"bounds\">Offsets {bounds[0]} to {bounds[1]} (high watermark) in "
                f"<a href=\"/topic?name={q(topic)}\">{esc(topic)}</a>-{partition}.</p>")
    body = [[num(r.offset), esc(fmt_ts(r.timestamp)), shown(r.key), shown(r.value),
             "".join(f"<div><b>{esc(k)}</b>: {shown(v)}</div>" for k, v in r.headers)] for r in rows]
    return (form + info + (error_box(error) if error else "")
            + table(["Offset", "Timestamp", "Key", "Value", "Headers"], body, "records"))


def groups_page(error: str | None, groups: Sequence[GroupRow]) -> str:
    rows = [[f'<a href="/group?id={q(g.group_id)}">{esc(g.group_id)}</a>', esc(g.state), esc(g.protocol_type),
             esc(g.group_type)] for g in groups]
    return (error_box(error) if error else "") + table(["Group", "State", "Protocol type", "Type"], rows, "groups")


def group_page(g: GroupDetail, lag_error: str | None, token: str) -> str:
    if g.error:
        return error_box(f"{g.group_id}: {g.error}")
    members = table(["Member", "Client id", "Host", "Instance id"],
                    [[esc(m.member_id), esc(m.client_id), esc(m.host), esc(m.instance_id or "")] for m in g.members],
                    "members")
    lag = table(["Topic", "Partition", "Committed offset", "End offset", "Lag"],
                [[esc(r.topic), num(r.partition), num(r.committed), num("–" if r.end is None else r.end),
                  num("–" if r.lag is None else r.lag)] for r in g.lag], "lag")
    opts = "".join(f'<option value="{t}">{t}</option>' for t in RESET_TARGETS)
    topics = sorted({r.topic for r in g.lag})
    topic_opts = "".join(f'<option value="{esc(t)}">{esc(t)}</option>' for t in topics)
    # the topics the group has offsets for; a group without any may be given one by name
    topic_field = f'<select name="topic">{topic_opts}</select>' if topics else '<input name="topic" required>'
    form = (f'<form class="inline" method="post" action="/actions/reset-offsets" id="reset-offsets">'
            f'{csrf_field(token)}<input type="hidden" name="group" value="{esc(g.group_id)}">'
            f'<b>Reset offsets</b> (only while the group is inactive)<br>Topic {topic_field}'
            ' Partition <input name="partition" size="3" placeholder="all"> To <select name="to">'
            f'{opts}</select> Offset <input name="offset" size="8"> <button type="submit">Reset</button></form>')
    return (f"<p>State <strong id=\"group-state\">{esc(g.state)}</strong>, protocol {esc(g.protocol or '–')}, "
            f"{len(g.members)} members, total lag <strong id=\"total-lag\">{g.total_lag}</strong>.</p>"
            "<h2>Members</h2>" + members + "<h2>Lag per partition</h2>"
            + (error_box(lag_error, "lag-error") if lag_error else lag) + form)


def charts_page() -> str:
    return ('<p id="chart-status">waiting for the first sample…</p>'
            '<div id="throughput"></div><div id="messages"></div><div id="requests"></div><div id="latency"></div>'
            "<p>From this broker's own counters (the ones /metrics exports), sampled every second.</p>")


def result_page(ok: str | None, error: str | None, back: str) -> str:
    box = ok_box(ok) if ok else error_box(error or "", "result")
    return f'{box}<p><a href="{esc(back)}" id="back">back</a></p>'
