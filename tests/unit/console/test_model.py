"""The console's pure view-model and rendering: Kafka responses to rows, bytes shown safely, and
no markup from topic names, record contents or error messages reaching the page unescaped."""

from __future__ import annotations

import base64
import html.parser
from types import SimpleNamespace as NS

import pytest

from odradek.console import model, pages
from odradek.console.app import parse_timestamp
from odradek.protocol import errors
from odradek.protocol.records import Record

EVIL = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def metadata() -> NS:
    part = lambda i, leader, replicas, isr: NS(partition_index=i, leader_id=leader, replica_nodes=replicas,  # noqa: E731
                                                isr_nodes=isr)
    return NS(cluster_id="c1", controller_id=2,
              brokers=[NS(node_id=2, host="h2", port=9093, rack="r2"), NS(node_id=1, host="h1", port=9092, rack=None)],
              topics=[NS(name="b", error_code=0, is_internal=False, partitions=[part(1, 2, [2, 1], [2]),
                                                                                part(0, 1, [1, 2], [1, 2])]),
                      NS(name="a", error_code=errors.TOPIC_AUTHORIZATION_FAILED, is_internal=False, partitions=[])])


def test_cluster_view_sorts_and_marks_the_controller_and_under_replicated() -> None:
    c = model.cluster_view(metadata(), {("b", 0): 100, ("b", 1): 50})
    assert [(b.node_id, b.controller) for b in c.brokers] == [(1, False), (2, True)]
    assert [t.name for t in c.topics] == ["a", "b"]
    assert c.topics[0].error == "TOPIC_AUTHORIZATION_FAILED"
    b = c.topics[1]
    assert [(p.partition, p.under_replicated, p.size) for p in b.partitions] == [(0, False, 100), (1, True, 50)]
    assert b.size == 150


def test_local_and_remote_sizes_of_a_tiered_topic() -> None:
    """Tiered storage (KIP-405): the remote tier's bytes beside the local ones, in columns of their own on the
    topics and topic pages; a cluster with no remote size shows the one Size column as before."""
    c = model.cluster_view(metadata(), {("b", 0): 100, ("b", 1): 50}, {("b", 0): 4096})
    b = c.topics[1]
    assert [(p.size, p.remote_size) for p in b.partitions] == [(100, 4096), (50, None)]
    assert (b.size, b.remote_size, c.topics[0].remote_size) == (150, 4096, None)
    page = pages.topics_page(c.topics, "tok")
    assert "<th>Local size</th><th>Remote size</th>" in page and "4.0 KiB" in page
    topic = pages.topic_page(b, None, [], {}, "tok")
    assert "<th>Local size</th><th>Remote size</th>" in topic
    assert '<td class="num">100 B</td><td class="num">4.0 KiB</td>' in topic
    assert '<td class="num">50 B</td><td class="num">–</td>' in topic
    plain = model.cluster_view(metadata(), {("b", 0): 100})
    assert "<th>Size</th>" in pages.topics_page(plain.topics, "tok")
    assert "Remote size" not in pages.topics_page(plain.topics, "tok") + pages.topic_page(
        plain.topics[1], None, [], {}, "tok")


def test_log_sizes_keeps_the_largest_copy_and_skips_dirs_in_error() -> None:
    part = lambda i, n: NS(partition_index=i, partition_size=n)  # noqa: E731
    resp = NS(results=[NS(error_code=0, topics=[NS(name="t", partitions=[part(0, 10)])]),
                       NS(error_code=0, topics=[NS(name="t", partitions=[part(0, 30), part(1, 5)])]),
                       NS(error_code=errors.KAFKA_STORAGE_ERROR, topics=[NS(name="t", partitions=[part(1, 99)])])])
    assert model.log_sizes(resp) == {("t", 0): 30, ("t", 1): 5}


def test_config_rows_hide_sensitive_values_and_report_errors() -> None:
    cfg = lambda n, v, s=False: NS(name=n, value=v, config_source=5, read_only=False, is_sensitive=s)  # noqa: E731
    ok = NS(results=[NS(error_code=0, error_message=None, configs=[cfg("z", "1"), cfg("a.password", "pw", True)])])
    err, rows = model.config_rows(ok)
    assert err is None and [(r.name, r.value, r.source) for r in rows] == [
        ("a.password", None, "DEFAULT_CONFIG"), ("z", "1", "DEFAULT_CONFIG")]
    denied = NS(results=[NS(error_code=errors.TOPIC_AUTHORIZATION_FAILED, error_message=None, configs=[])])
    assert model.config_rows(denied) == ("TOPIC_AUTHORIZATION_FAILED", ())


def test_lag_rows_and_group_activity() -> None:
    rows = model.lag_rows({("t", 1): 3, ("t", 0): 7}, {("t", 0): 11, ("t", 1): 2})
    assert [(r.partition, r.lag) for r in rows] == [(0, 4), (1, 0)]  # an end below the commit is 0, not negative
    assert model.lag_rows({("t", 0): 1}, {})[0].lag is None
    g = model.GroupDetail("g", "Stable", "range", None, (), rows)
    assert g.active and g.total_lag == 4
    assert model.reset_refusal(g) == ("Assignments can only be reset if the group 'g' is inactive, "
                                      "but the current state is Stable.")
    assert model.reset_refusal(model.GroupDetail("g", "Empty", "", None, ())) is None
    assert model.reset_refusal(model.GroupDetail("g", "", "", "GROUP_AUTHORIZATION_FAILED", ())) == \
        "GROUP_AUTHORIZATION_FAILED"


def test_committed_and_list_offsets_leave_out_errors() -> None:
    p = lambda i, off, code=0: NS(partition_index=i, committed_offset=off, error_code=code)  # noqa: E731
    of = NS(error_code=0, topics=[NS(name="t", partitions=[p(0, 5), p(1, -1), p(2, 9, errors.UNKNOWN_TOPIC_OR_PARTITION)])])
    assert model.committed(of) == (None, {("t", 0): 5})
    assert model.committed(NS(error_code=errors.GROUP_AUTHORIZATION_FAILED, topics=[])) == \
        ("GROUP_AUTHORIZATION_FAILED", {})
    lo = NS(topics=[NS(name="t", partitions=[NS(partition_index=0, offset=3, error_code=0),
                                             NS(partition_index=1, offset=-1, error_code=errors.NOT_LEADER_OR_FOLLOWER)])])
    assert model.list_offsets(lo) == {("t", 0): 3}
    assert model.list_offsets_errors(lo) == ["t-1: NOT_LEADER_OR_FOLLOWER"]


@pytest.mark.parametrize(("raw", "kind", "text"), [
    (None, "null", "null"),
    (b"hello\tworld\n", "text", "hello\tworld\n"),
    ("žluťoučký".encode(), "text", "žluťoučký"),
    (b"\x00\x01\xff", "base64", base64.b64encode(b"\x00\x01\xff").decode()),
    (b"a\x1bb", "base64", base64.b64encode(b"a\x1bb").decode()),  # a terminal escape is not text
    ("\u0085x".encode(), "base64", base64.b64encode("\u0085x".encode()).decode()),  # C1 control
])
def test_show_bytes(raw: bytes | None, kind: str, text: str) -> None:
    s = model.show_bytes(raw)
    assert (s.kind, s.text) == (kind, text)


def test_show_bytes_cuts_long_values() -> None:
    s = model.show_bytes(b"x" * 10, limit=4)
    assert s.text == "xxxx…" and s.size == 10


def test_record_rows_start_and_limit() -> None:
    recs = [Record(o, 1000 + o, b"k", b"v", (("h", b"\xff"),)) for o in range(5)]
    rows = model.record_rows(recs, 2, 2)
    assert [r.offset for r in rows] == [2, 3]
    assert rows[0].headers == (("h", model.Shown("/w==", "base64", 1)),)


def test_form_parsing() -> None:
    assert model.parse_configs("a=1, b = x=y\nc=") == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(model.FormError):
        model.parse_configs("novalue")
    assert model.parse_int({"n": " 4 "}, "n") == 4
    assert model.parse_int({}, "n", 7) == 7
    for form in ({"n": "x"}, {"n": "-1"}, {}):
        with pytest.raises(model.FormError):
            model.parse_int(form, "n", lo=0)
    assert parse_timestamp("1700000000000") == 1700000000000
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1700000000000
    assert parse_timestamp("2023-11-14T22:13:20") == 1700000000000  # no zone: UTC
    with pytest.raises(model.FormError):
        parse_timestamp("yesterday")


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [k for k, _ in attrs if k.startswith("on")]


def parsed(markup: str | bytes) -> _Tags:
    p = _Tags()
    p.feed(markup.decode() if isinstance(markup, bytes) else markup)
    return p


def test_hostile_names_and_contents_are_escaped_on_every_page() -> None:
    part = model.PartitionRow(0, 1, (1,), (1,), 10)
    topic = model.TopicRow(EVIL, False, EVIL, (part,))
    cluster = model.Cluster(EVIL, 1, (model.BrokerRow(1, EVIL, 9092, EVIL, True),), (topic,))
    shown = model.show_bytes(EVIL.encode())
    rec = model.RecordRow(0, 0, shown, shown, ((EVIL, shown),))
    group = model.GroupDetail(EVIL, EVIL, EVIL, None, (model.MemberRow(EVIL, EVIL, EVIL, EVIL),),
                              (model.LagRow(EVIL, 0, 1, 2),))
    bodies = [
        pages.brokers_page(cluster),
        pages.topics_page((topic,), EVIL),
        pages.topic_page(topic, None, (model.ConfigRow(EVIL, EVIL, EVIL, False, False),), {0: (0, 1)}, EVIL),
        pages.topic_page(topic, EVIL, (), {}, "t"),
        pages.records_page(EVIL, 0, (0, 1), 0, (rec,), EVIL, EVIL, 10),
        pages.groups_page(EVIL, (model.GroupRow(EVIL, EVIL, EVIL, EVIL),)),
        pages.group_page(group, EVIL, EVIL),
        pages.group_page(model.GroupDetail(EVIL, "", "", EVIL, ()), None, "t"),
        pages.result_page(None, EVIL, EVIL),
        pages.result_page(EVIL, None, "/"),
    ]
    for body in bodies:
        p = parsed(pages.layout(EVIL, body, EVIL))
        assert "script" not in p.tags, body
        assert "img" not in p.tags and not p.handlers, body
    # the charts page loads the packaged script, and only it
    p = parsed(pages.layout("c", pages.charts_page(), "User:a", script=True))
    assert p.tags.count("script") == 1


def test_topic_links_quote_names() -> None:
    t = model.TopicRow("a&b=c", False, None, ())
    assert 'href="/topic?name=a%26b%3Dc"' in pages.topics_page((t,), "x")
