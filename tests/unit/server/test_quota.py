"""Client quotas' pure core: Kafka's sampled Rate and window size, the throttle time formula,
the eight-level precedence with its shared rates, request_percentage's cap, KIP-599's bucket."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.controller.store import LocalStore
from odradek.server.quota.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    ClientQuotas,
    Component,
    QuotaRequestError,
    entity_from_parts,
)
from odradek.server.quota.manager import (
    CONTROLLER_MUTATION,
    FETCH,
    PRODUCE,
    REQUEST,
    ClientQuotaManager,
    QuotaConfig,
    entity,
    parse_zk_path,
    resolve,
    zk_path,
)
from odradek.server.quota.rate import SampledRate, TokenBucket
from odradek.server.quota.store import desanitize, sanitize


def test_window_size_is_stretched_to_samples_minus_one_windows() -> None:
    r = SampledRate(samples=11, window_ms=1000)
    r.record(1000, 0)
    assert r.window_size_ms(0) == 10_000  # a new client is measured over 10 full windows
    assert r.measure(0) == pytest.approx(100.0)
    assert r.window_size_ms(10_500) == 10_500  # elapsed beyond the minimum counts as it is
    r.record(0, 10_500)
    assert r.measure(10_500) == pytest.approx(1000 / 10.5)


def test_samples_rotate_and_old_ones_expire() -> None:
    r = SampledRate(samples=2, window_ms=1000)
    r.record(10, 0)
    r.record(20, 500)  # same sample
    r.record(30, 1000)  # the second sample
    assert r.total(1000) == 60
    r.record(40, 2000)  # reuses the oldest slot (the first sample's 30 bytes are gone)
    assert r.total(2000) == 70
    assert r.total(10_000) == 0  # everything older than samples * window is reset
    with pytest.raises(ValueError):
        SampledRate(0, 1000)


def test_precedence_follows_kafkas_eight_levels() -> None:
    levels = [
        entity(user="u", client_id="c"),
        entity(user="u", client_id=None),
        entity(user="u"),
        entity(user=None, client_id="c"),
        entity(user=None, client_id=None),
        entity(user=None),
        entity(client_id="c"),
        entity(client_id=None),
    ]
    tags = [("u", "c"), ("u", "c"), ("u", ""), ("u", "c"), ("u", "c"), ("u", ""), ("", "c"), ("", "c")]
    for i in range(len(levels)):
        quotas = {e: float(n) for n, e in enumerate(levels[i:], start=i)}
        assert resolve(quotas, "u", "c") == (levels[i], tags[i])
    assert resolve({}, "u", "c") is None
    # someone else's entities do not apply
    assert resolve({entity(user="v"): 1.0, entity(client_id="d"): 2.0}, "u", "c") is None


def test_zk_paths_round_trip() -> None:
    cases = {
        "users/alice/clients/app": entity(user="alice", client_id="app"),
        "users/<default>/clients/<default>": entity(user=None, client_id=None),
        "users/alice": entity(user="alice"),
        "clients/<default>": entity(client_id=None),
    }
    for path, e in cases.items():
        assert zk_path(e) == path and parse_zk_path(path) == e
    for bad in ("", "users", "topics/t", "clients/c/users/u", "users/a/users/b"):
        with pytest.raises(ValueError):
            parse_zk_path(bad)


def test_throttle_time_is_kafkas_formula() -> None:
    m = ClientQuotaManager(PRODUCE, QuotaConfig(samples=11, window_s=1))
    m.update_quota(entity(client_id="c"), 1000.0)
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "c", 10_000, 0) == 0  # 1000 B/s over 10 s: at the bound
    # 20000 B in the 10 s window: rate 2000 B/s, (2000 - 1000) / 1000 * 10 s = 10 s
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "c", 10_000, 0) == 10_000
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "other", 10**9, 0) == 0  # no quota for this client


def test_a_client_held_to_its_rate_converges() -> None:
    """Sending as soon as each throttle ends holds a client to its bound: after a young client's
    allowance (Kafka's Rate measures it over at least samples - 1 windows, so about that many
    windows' worth goes at once), 1 MB/s exactly in the long run."""
    for samples in (11, 2):
        m = ClientQuotaManager(PRODUCE, QuotaConfig(samples=samples, window_s=1))
        m.update_quota(entity(client_id=None), 1_000_000.0)
        now, sent, marks = 0, 0, {}
        while now < 120_000:
            throttle = m.record_and_get_throttle_time_ms("ANONYMOUS", "p", 100_000, now)
            sent += 100_000
            now += max(throttle, 1)
            for mark in (1_000, 20_000, 120_000):
                if now >= mark:
                    marks.setdefault(mark, sent)
        assert marks[1_000] <= (samples + 1) * 1_000_000
        assert (marks[120_000] - marks[20_000]) / 100 == pytest.approx(1_000_000, rel=0.02)


def test_shared_rates_follow_the_matched_level() -> None:
    m = ClientQuotaManager(FETCH)
    m.update_quota(entity(user="u"), 100.0)  # one rate for all of u's client ids
    assert m.record_and_get_throttle_time_ms("u", "a", 1000, 0) == 0
    assert m.record_and_get_throttle_time_ms("u", "b", 1000, 0) > 0
    m2 = ClientQuotaManager(FETCH)
    m2.update_quota(entity(user=None, client_id=None), 100.0)  # a rate per (user, client id)
    assert m2.record_and_get_throttle_time_ms("u", "a", 1000, 0) == 0
    assert m2.record_and_get_throttle_time_ms("u", "b", 1000, 0) == 0
    assert m2.max_value_in_window("u", "a") == 1000.0 and m2.quota("u", "a") == 100.0
    m2.update_quota(entity(user=None, client_id=None), None)
    assert m2.quota("u", "a") is None and m2.record_and_get_throttle_time_ms("u", "a", 10**9, 0) == 0


def test_unrecord_takes_a_throttled_fetch_back() -> None:
    m = ClientQuotaManager(FETCH)
    m.update_quota(entity(client_id="c"), 100.0)
    assert m.record_and_get_throttle_time_ms("x", "c", 5000, 0) > 0
    m.unrecord("x", "c", 5000, 0)
    assert m.record_and_get_throttle_time_ms("x", "c", 500, 0) == 0


def test_request_quota_throttle_is_capped_at_one_window() -> None:
    m = ClientQuotaManager(REQUEST, QuotaConfig(samples=11, window_s=1))
    m.update_quota(entity(client_id="c"), 10.0)  # 10 % of one thread
    # 5 s of request time in one go: far above the quota, throttled for one window at most
    assert m.record_and_get_throttle_time_ms("x", "c", 5e9 * 100 / 1e9, 0) == 1000


def test_controller_mutation_bucket() -> None:
    b = TokenBucket(quota=2.0, samples=11, window_ms=1000, now_ms=0)
    assert b.burst == 22.0
    b.record(30, 0)
    assert b.throttle_time_ms(0) == 4000  # 8 tokens short at 2/s
    assert b.throttle_time_ms(4000) == 0
    m = ClientQuotaManager(CONTROLLER_MUTATION)
    m.update_quota(entity(user=None), 1.0)
    assert m.record_and_get_throttle_time_ms("u", "c", 11, 0) == 0
    assert m.record_and_get_throttle_time_ms("u", "c", 2, 0) == 2000
    with pytest.raises(ValueError):
        ClientQuotaManager("disk_rate")


def test_quota_configs_in_the_store_and_kip546_filters(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "m.json")
    q = ClientQuotas()
    assert sanitize("app 1/é*") == "app%201%2F%C3%A9%2A" and desanitize(sanitize("app 1/é*")) == "app 1/é*"
    app = entity_from_parts([("client-id", "app 1")])
    both_default = entity_from_parts([("user", None), ("client-id", None)])
    alice = entity_from_parts([("user", "alice")])
    assert q.alter(store, app, [(PRODUCE, 1048576.0, False)]) == "clients/app%201"
    assert q.alter(store, both_default, [(REQUEST, 50.5, False)]) == "users/<default>/clients/<default>"
    assert q.alter(store, alice, [(FETCH, 10.0, False), (PRODUCE, 20.0, False)]) == "users/alice"
    q.alter(store, alice, [(PRODUCE, 0.0, True)])
    assert store.get("/config/clients/app%201")[0] == b'{"version": 1, "config": {"producer_byte_rate": "1048576"}}'
    fresh = ClientQuotas()
    fresh.reload(LocalStore(tmp_path / "m.json"))
    assert fresh.configs == {app: {PRODUCE: "1048576"}, both_default: {REQUEST: "50.5"}, alice: {FETCH: "10"}}
    assert fresh.produce.quota("anyone", "app 1") == 1048576.0
    assert fresh.request.quota("bob", "x") == 50.5 and fresh.fetch.quota("alice", "x") == 10.0
    # filters: strict / non-strict, EXACT / DEFAULT / SPECIFIED
    assert [e for e, _ in fresh.describe([], False)] == [app, both_default, alice]
    assert fresh.describe([Component("client-id", MATCH_EXACT, "app 1")], True) == [(app, {PRODUCE: 1048576.0})]
    assert [e for e, _ in fresh.describe([Component("user", MATCH_DEFAULT, None)], False)] == [both_default]
    assert [e for e, _ in fresh.describe([Component("user", MATCH_DEFAULT, None)], True)] == []
    assert [e for e, _ in fresh.describe([Component("user", MATCH_SPECIFIED, None)], False)] == [alice]
    # removing the last key leaves no quota
    fresh.alter(store, alice, [(FETCH, 0.0, True)])
    fresh.reload(store)
    assert fresh.fetch.quota("alice", "x") is None


@pytest.mark.parametrize(
    ("call", "code", "message"),
    [
        (lambda q: q.describe([Component("user", 0, None)], False), 42, "Missing match for user component"),
        (lambda q: q.describe([Component("user", 1, None), Component("user", 2, None)], False), 42,
         "Duplicate user filter component entity type"),
        (lambda q: q.describe([Component("topic", 1, None)], False), 35, "Custom entity type 'topic' not supported"),
        (lambda q: q.check_ops([("bogus", 1.0, False)]), 42, "Invalid configuration key bogus"),
        (lambda q: q.check_ops([(PRODUCE, 1.5, False)]), 42, "Configuration producer_byte_rate must be a Long value"),
        (lambda q: entity_from_parts([("user", "a"), ("user", "b")]), 42, "Duplicate user entity type"),
        (lambda q: entity_from_parts([]), 42, "Invalid empty client quota entity"),
        (lambda q: entity_from_parts([("ip", "1.2.3.4"), ("user", "a")]), 42,
         "Invalid quota entity combination, IP entity should not be combined with User or ClientId entities."),
        (lambda q: entity_from_parts([("ip", "not-an-ip")]), 42, "not-an-ip is not a valid IP or resolvable host."),
        (lambda q: q.check_ops([("producer_byte_rate", 1.0, False)], entity_from_parts([("ip", None)])), 42,
         "Invalid configuration key producer_byte_rate"),
        (lambda q: q.check_ops([("connection_creation_rate", 1.0, False)], entity_from_parts([("user", "a")])), 42,
         "Invalid configuration key connection_creation_rate"),
        (lambda q: q.check_ops([("connection_creation_rate", 1.5, False)], entity_from_parts([("ip", None)])), 42,
         "Configuration connection_creation_rate must be an Int value"),
        (lambda q: q.describe([Component("ip", 1, None), Component("user", 1, None)], False), 42,
         "Invalid entity filter component combination, IP filter component should not be used with User or "
         "ClientId filter component."),
    ],
)
def test_quota_request_errors(call: Callable[[ClientQuotas], object], code: int, message: str) -> None:
    with pytest.raises(QuotaRequestError) as e:
        call(ClientQuotas())
    assert (e.value.code, e.value.message) == (code, message)
