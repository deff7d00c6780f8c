"""odradek.http.host_check: which Host headers the HTTP endpoint answers (DNS rebinding)."""

from __future__ import annotations

from odradek.http.host_check import host_name, host_policy


def test_host_name_parsing() -> None:
    assert host_name("Broker.Example.:9644") == "broker.example"
    assert host_name("[::1]:9644") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"
    for bad in (None, "", "a b", "evil.example/x", "user@host", "[::1", "[::1]x", "host:port"):
        assert host_name(bad) is None, bad


def test_policy_accepts_own_names_and_literal_ips_only() -> None:
    p = host_policy(["broker0.internal", "", "0.0.0.0"], ["kafka.example.com", " "])
    for ok in ("localhost:9644", "127.0.0.1:9644", "[::1]:9644", "10.1.2.3", "BROKER0.internal:80",
               "kafka.example.com"):
        assert p.allows(ok), ok
    for no in ("evil.example:9644", "localhost.evil.example", "127.0.0.1.nip.io", None, ""):
        assert not p.allows(no), no
    assert host_policy([], ["*"]).allows("anything.example")
