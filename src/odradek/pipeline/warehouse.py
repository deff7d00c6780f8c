"""The warehouse layer (database ``dw``) on top of the ODS, declared under ``[dw]`` in the config.

    [[dw.history]]                 # VersionedCollapsingMergeTree(sign, version): state changes of an ODS table
    name = "order_status_history"  # dw.order_status_history
    ods = "orders"
    columns = ["customer_id", "status", "amount", "created_at"]

    [[dw.summing]]                 # SummingMergeTree fed by a materialized view on a history table
    name = "daily_sales"           # dw.daily_sales (query with GROUP BY: merges are eventual)
    history = "order_status_history"
    key = { day = "toDate(created_at)" }
    sums = { orders = "sign", revenue = "amount * sign" }
    where = "status != 'cancelled'"   # optional

    [[dw.aggregating]]             # AggregatingMergeTree fed by a materialized view with -State combinators
    name = "daily_payments"        # dw.daily_payments (states); dw.daily_payments_merged (read with -Merge)
    ods = "payments"               # an append-only ODS table (facts: each key written once)
    key = { day = "toDate(paid_at)" }
    aggregates = { orders = "uniq(order_id)", amount_quantiles = "quantiles(0.5, 0.9, 0.99)(amount)" }
    where = "paid_at IS NOT NULL"  # optional

    [[dw.entity]]                  # integration: one subject-oriented entity from several ODS tables
    name = "customer"              # dw.customer (a view)
    match = "lower(trim(email))"   # the matching rule, evaluated on each source
    sources = [
      { ods = "crm_customers", columns = { name = "name", email = "email", city = "city" } },
      { ods = "shop_customers", columns = { name = "full_name", email = "email" } },
    ]

History (ClickHouse's VersionedCollapsingMergeTree): when a batch moves a key of the ODS table to a newer
version, the job writes a cancel row (sign -1) carrying the previous live version's values and version,
and a state row (sign +1) with the new values — nothing for stale or duplicate re-deliveries, and no
state row for a delete. The previous version is read from the ODS (argMax over the versions, deletes
included) *before* the batch's ODS rows are inserted, and both inserts carry the batch's dedup token, so
a replayed batch computes the same rows and ClickHouse drops them. ``sum(x * sign)`` over the history
therefore always equals ``sum(x)`` over the ODS's live rows, and so do the summing facts that a
materialized view derives from each history insert.

Aggregating (ClickHouse's AggregatingMergeTree): partial aggregation states (``uniqState``,
``quantilesState``, any ``f(...)`` declared becomes ``fState(...)``) per group key, merged by
ClickHouse in the background and finished at query time with ``fMerge`` (the ``<name>_merged`` view).
States can be combined but not taken back, so the feed is insert-only: ``dw.<ods>_first_versions``
(MergeTree) receives the first version of each key the ODS has never held, computed from the ODS
before the batch's rows are inserted, with the batch's dedup token; a materialized view turns each
insert into states. Duplicates and stale re-deliveries (the key is already there), replayed batches
(deduplicated, and with them the view's block) add nothing, so for an append-only table (payments,
clicks: rows never updated or deleted) the merged states equal the same aggregates computed from
the ODS. A later update or delete of a key is not reflected (``[[dw.summing]]`` on a history is the
table kind for changing rows).

Entity (integration): each source's rows are grouped by the match key; the entity view full-joins the
sources on it, takes each attribute from the first source (in the listed order) that has it, and keeps
every source's ids (``<ods>_ids``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from odradek.pipeline.config import ConfigError, OdsTable, PipelineConfig, _ident
from odradek.pipeline.sink import DEDUP_WINDOW, WarehouseSink, q


@dataclass(frozen=True)
class History:
    name: str
    ods: OdsTable
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Summing:
    name: str
    history: str
    key: dict[str, str]
    sums: dict[str, str]
    where: str | None


@dataclass(frozen=True)
class Aggregate:
    """``func(args)`` or ``func(params)(args)`` as declared."""

    func: str
    params: str  # "(0.5, 0.9)" or ""
    args: str  # "(amount)"

    @classmethod
    def parse(cls, expr: str, where: str) -> Aggregate:
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\(.*\))\s*", expr, re.S)
        if not m:
            raise ConfigError(f"{where}: {expr!r} is not an aggregate call such as uniq(x) or quantiles(0.5)(x)")
        func, rest = m.group(1), m.group(2)
        if func.endswith(("State", "Merge")):
            raise ConfigError(f"{where}: give the plain aggregate ({func!r}); -State and -Merge are added")
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                first, tail = rest[: i + 1], rest[i + 1:].strip()
                break
        else:
            raise ConfigError(f"{where}: unbalanced parentheses in {expr!r}")
        if not tail:
            return cls(func, "", first)
        if not (tail.startswith("(") and tail.endswith(")")):
            raise ConfigError(f"{where}: {expr!r} is not an aggregate call such as uniq(x) or quantiles(0.5)(x)")
        return cls(func, first, tail)

    def state(self) -> str:
        return f"{self.func}State{self.params}{self.args}"

    def merge(self, column: str) -> str:
        return f"{self.func}Merge{self.params}({q(column)})"

    def plain(self) -> str:
        return f"{self.func}{self.params}{self.args}"


@dataclass(frozen=True)
class Aggregating:
    name: str
    ods: OdsTable
    key: dict[str, str]
    aggregates: dict[str, Aggregate]
    where: str | None

    @property
    def feed(self) -> str:
        return first_versions_table(self.ods)


def first_versions_table(t: OdsTable) -> str:
    """``dw.<ods>_first_versions``: the insert-only feed of the aggregating tables on ``t``."""
    return f"{t.table}_first_versions"


@dataclass(frozen=True)
class EntitySource:
    ods: OdsTable
    columns: dict[str, str]  # entity attribute -> source column


@dataclass(frozen=True)
class Entity:
    name: str
    match: str
    sources: tuple[EntitySource, ...]


@dataclass(frozen=True)
class Warehouse:
    histories: tuple[History, ...] = ()
    summings: tuple[Summing, ...] = ()
    entities: tuple[Entity, ...] = ()
    aggregatings: tuple[Aggregating, ...] = ()

    def histories_of(self, table: str) -> list[History]:
        return [h for h in self.histories if h.ods.table == table]

    def feeds_first_versions(self, table: str) -> bool:
        return any(a.ods.table == table for a in self.aggregatings)


def parse(cfg: PipelineConfig) -> Warehouse:
    dw: dict[str, Any] = cfg.dw or {}
    ods = {t.table: t for t in cfg.ods}

    def table_of(name: Any, where: str) -> OdsTable:
        if name not in ods:
            raise ConfigError(f"{where}: no [[ods]] table named {name!r}")
        return ods[name]

    histories: list[History] = []
    for h in dw.get("history", []):
        where = f"[[dw.history]] {h.get('name')!r}"
        _ident(h.get("name"), where)
        t = table_of(h.get("ods"), where)
        cols = tuple(h.get("columns", [c for c in t.columns if c not in t.key]))
        for c in cols:
            if c not in t.columns or c in t.key:
                raise ConfigError(f"{where}: {c!r} is not a non-key column of ods.{t.table}")
        histories.append(History(str(h["name"]), t, cols))
    names = {h.name for h in histories}
    summings: list[Summing] = []
    for s in dw.get("summing", []):
        where = f"[[dw.summing]] {s.get('name')!r}"
        if s.get("history") not in names:
            raise ConfigError(f"{where}: no [[dw.history]] named {s.get('history')!r}")
        _ident(s.get("name"), where)
        if not s.get("key") or not s.get("sums"):
            raise ConfigError(f"{where}: 'key' and 'sums' are required")
        for col in (*s["key"], *s["sums"]):
            _ident(col, where)
        summings.append(Summing(str(s["name"]), str(s["history"]), {str(k): str(v) for k, v in s["key"].items()},
                                {str(k): str(v) for k, v in s["sums"].items()}, s.get("where")))
    entities: list[Entity] = []
    for e in dw.get("entity", []):
        where = f"[[dw.entity]] {e.get('name')!r}"
        _ident(e.get("name"), where)
        for s in e.get("sources", []):
            t = table_of(s.get("ods"), where)
            for attr, col in dict(s.get("columns", {})).items():
                _ident(attr, where)
                if col not in t.columns:
                    raise ConfigError(f"{where}: {col!r} is not a column of ods.{t.table}")
        srcs = tuple(EntitySource(table_of(s.get("ods"), where), {str(k): str(v) for k, v in s["columns"].items()})
                     for s in e.get("sources", []))
        if len(srcs) < 1 or not e.get("match"):
            raise ConfigError(f"{where}: 'match' and at least one source are required")
        entities.append(Entity(str(e["name"]), str(e["match"]), srcs))
    aggregatings: list[Aggregating] = []
    for a in dw.get("aggregating", []):
        where = f"[[dw.aggregating]] {a.get('name')!r}"
        _ident(a.get("name"), where)
        t = table_of(a.get("ods"), where)
        if not a.get("key") or not a.get("aggregates"):
            raise ConfigError(f"{where}: 'key' and 'aggregates' are required")
        for col in (*a["key"], *a["aggregates"]):
            _ident(col, where)
        aggs = {str(k): Aggregate.parse(str(v), where) for k, v in a["aggregates"].items()}
        aggregatings.append(Aggregating(str(a["name"]), t, {str(k): str(v) for k, v in a["key"].items()}, aggs,
                                        a.get("where")))
    return Warehouse(tuple(histories), tuple(summings), tuple(entities), tuple(aggregatings))


def history_ddl(h: History) -> str:
    t = h.ods
    cols = ", ".join(f"{q(c)} {t.columns[c].ch}" for c in (*t.key, *h.columns))
    return (f"CREATE TABLE IF NOT EXISTS dw.{q(h.name)} ({cols}, version UInt64, sign Int8, "
            "_loaded_at DateTime64(3, 'UTC') DEFAULT now64(3)) "
            f"ENGINE = VersionedCollapsingMergeTree(sign, version) ORDER BY ({', '.join(q(k) for k in t.key)}) "
            f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}")


def summing_ddl(s: Summing) -> str:
    keys = ", ".join(f"{expr} AS {q(k)}" for k, expr in s.key.items())
    sums = ", ".join(f"sum({expr}) AS {q(k)}" for k, expr in s.sums.items())
    where = f" WHERE {s.where}" if s.where else ""
    return (f"CREATE MATERIALIZED VIEW IF NOT EXISTS dw.{q(s.name)} "
            f"ENGINE = SummingMergeTree ORDER BY ({', '.join(q(k) for k in s.key)}) "
            f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW} "
            f"AS SELECT {keys}, {sums} FROM dw.{q(s.history)}{where} GROUP BY {', '.join(q(k) for k in s.key)}")


def first_versions_ddl(t: OdsTable) -> str:
    cols = ", ".join(f"{q(c)} {ct.ch}" for c, ct in t.columns.items())
    return (f"CREATE TABLE IF NOT EXISTS dw.{q(first_versions_table(t))} ({cols}, _version UInt64, "
            "_loaded_at DateTime64(3, 'UTC') DEFAULT now64(3)) "
            f"ENGINE = MergeTree ORDER BY ({', '.join(q(k) for k in t.key)}) "
            f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}")


def aggregating_ddl(a: Aggregating) -> list[str]:
    """The AggregatingMergeTree (a materialized view's inner table, fed by the first-versions table)
    and the ``<name>_merged`` view that finishes the states with -Merge."""
    keys = ", ".join(f"{expr} AS {q(k)}" for k, expr in a.key.items())
    group = ", ".join(q(k) for k in a.key)
    states = ", ".join(f"{agg.state()} AS {q(n)}" for n, agg in a.aggregates.items())
    merges = ", ".join(f"{agg.merge(n)} AS {q(n)}" for n, agg in a.aggregates.items())
    where = f" WHERE {a.where}" if a.where else ""
    return [
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS dw.{q(a.name)} ENGINE = AggregatingMergeTree ORDER BY ({group}) "
        f"SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}, allow_nullable_key = 1 "
        f"AS SELECT {keys}, {states} FROM dw.{q(a.feed)}{where} GROUP BY {group}",
        f"CREATE OR REPLACE VIEW dw.{q(a.name + '_merged')} AS SELECT {group}, {merges} FROM dw.{q(a.name)} "
        f"GROUP BY {group}",
    ]


def aggregating_recompute_sql(a: Aggregating) -> str:
    """The same aggregates computed from the ODS's live rows (what the merged states must equal for an
    append-only table), ordered by the group key."""
    keys = ", ".join(f"{expr} AS {q(k)}" for k, expr in a.key.items())
    group = ", ".join(q(k) for k in a.key)
    plain = ", ".join(f"{agg.plain()} AS {q(n)}" for n, agg in a.aggregates.items())
    where = f" WHERE {a.where}" if a.where else ""
    return f"SELECT {keys}, {plain} FROM ods.{q(a.ods.table)}{where} GROUP BY {group} ORDER BY {group}"


def aggregating_merged_sql(a: Aggregating) -> str:
    group = ", ".join(q(k) for k in a.key)
    return f"SELECT * FROM dw.{q(a.name + '_merged')} ORDER BY {group}"


def entity_ddl(e: Entity) -> str:
    attrs: list[str] = []
    for src in e.sources:
        for a in src.columns:
            if a not in attrs:
                attrs.append(a)
    parts = []
    for i, src in enumerate(e.sources):
        ids = ", ".join(q(k) for k in src.ods.key)
        id_expr = f"tuple({ids})" if len(src.ods.key) > 1 else ids
        sel = ["match_key", f"groupArray({id_expr}) AS {q(src.ods.table + '_ids')}"]
        sel += [f"any({q(c)}) AS {q(a)}" for a, c in src.columns.items()]
        inner = f"SELECT *, {e.match} AS match_key FROM ods.{q(src.ods.table)}"
        parts.append(f"(SELECT {', '.join(sel)} FROM ({inner}) GROUP BY match_key) AS s{i}")
    frm = parts[0] + "".join(f" FULL OUTER JOIN {p} USING (match_key)" for p in parts[1:])
    cols = ["match_key"]
    for a in attrs:
        have = [f"s{i}.{q(a)}" for i, src in enumerate(e.sources) if a in src.columns]
        cols.append((f"coalesce({', '.join(have)})" if len(have) > 1 else have[0]) + f" AS {q(a)}")
    for i, src in enumerate(e.sources):
        cols.append(f"s{i}.{q(src.ods.table + '_ids')} AS {q(src.ods.table + '_ids')}")
    return (f"CREATE OR REPLACE VIEW dw.{q(e.name)} AS SELECT {', '.join(cols)} FROM {frm} "
            "WHERE match_key IS NOT NULL SETTINGS join_use_nulls = 1")


def ensure(sink: WarehouseSink, cfg: PipelineConfig) -> Warehouse:
    """Create the warehouse objects the config declares (none when ``[dw]`` is absent)."""
    wh = parse(cfg)
    if not (wh.histories or wh.summings or wh.entities or wh.aggregatings):
        return wh
    sink.execute("CREATE DATABASE IF NOT EXISTS dw")
    for h in wh.histories:
        sink.execute(history_ddl(h))
    for s in wh.summings:
        sink.execute(summing_ddl(s))
    for e in wh.entities:
        sink.execute(entity_ddl(e))
    for t in {a.ods.table: a.ods for a in wh.aggregatings}.values():
        sink.execute(first_versions_ddl(t))
    for a in wh.aggregatings:
        for ddl in aggregating_ddl(a):
            sink.execute(ddl)
    return wh


def first_version_rows(sink: Any, t: OdsTable, good: pa.Table) -> pa.Table:
    """The rows of keys that ``ods.<t>`` has never held (any version, deletes included): the lowest
    version of each such key in the batch, unless that is a delete. Must be called before the batch's
    ODS rows are inserted."""
    key = list(t.key)
    names = [*t.columns, "_version"]
    if good.num_rows == 0:
        return good.select(names).slice(0, 0)
    new = good.select([*names, "_is_deleted"]).to_pandas()
    new = new.sort_values("_version", kind="stable").drop_duplicates(key, keep="first")
    keys = pa.Table.from_pandas(new[key], preserve_index=False)  # noqa: F841 - read by chDB's Python()
    kcols = ", ".join(q(k) for k in key)
    seen = sink.query_arrow(f"SELECT DISTINCT {kcols} FROM ods.{q(t.state_table)} "
                            f"WHERE ({kcols}) IN (SELECT {kcols} FROM Python(keys))")
    if seen.num_rows:
        merged = new.merge(seen.to_pandas().assign(_seen=1), on=key, how="left")
        new = merged[merged["_seen"].isna()]
    new = new[new["_is_deleted"] == 0]
    tbl = pa.Table.from_pandas(new[names], preserve_index=False)
    return tbl.cast(good.select(names).schema, safe=False)


def history_rows(sink: Any, h: History, good: pa.Table) -> pa.Table:
    """The VersionedCollapsingMergeTree rows for one batch of ODS rows (see the module docstring). Must be
    called before the batch's ODS rows are inserted."""
    import pandas as pd

    t = h.ods
    key = list(t.key)
    cols = list(h.columns)
    out_names = [*key, *cols, "version", "sign"]
    if good.num_rows == 0:
        return pa.table({n: [] for n in out_names})
    new = good.select([*key, *cols, "_version", "_is_deleted"]).to_pandas()
    new = new.sort_values("_version", kind="stable").drop_duplicates(key, keep="last")
    keys = pa.Table.from_pandas(new[key], preserve_index=False)  # noqa: F841 - read by chDB's Python()
    kcols = ", ".join(q(k) for k in key)
    tup = "tuple(" + ", ".join(q(c) for c in cols) + ")"
    sql = (f"SELECT {kcols}, argMax({tup}, _version) AS _values, max(_version) AS _old_version, "
           f"argMax(_is_deleted, _version) AS _old_deleted FROM ods.{q(t.state_table)} "
           f"WHERE ({kcols}) IN (SELECT {kcols} FROM Python(keys)) GROUP BY {kcols}")
    old_raw = sink.query_arrow(sql)  # chDB finds ``keys`` in this frame
    if old_raw.num_rows:
        old = old_raw.to_pandas()
        vals = pd.DataFrame(old["_values"].map(lambda v: list(v.values()) if isinstance(v, dict) else list(v)).tolist(),
                            columns=cols, index=old.index)
        old = pd.concat([old[key + ["_old_version", "_old_deleted"]], vals.add_prefix("_old_")], axis=1)
        merged = new.merge(old, on=key, how="left")
    else:
        merged = new.copy()
        merged["_old_version"] = pd.NA
        merged["_old_deleted"] = pd.NA
        for c in cols:
            merged["_old_" + c] = pd.NA
    newer = merged["_old_version"].isna() | (merged["_version"] > merged["_old_version"].fillna(-1))
    merged = merged[newer]
    had_live = merged["_old_version"].notna() & (merged["_old_deleted"] == 0)
    cancels = merged[had_live]
    cancel = pd.DataFrame({**{k: cancels[k] for k in key}, **{c: cancels["_old_" + c] for c in cols},
                           "version": cancels["_old_version"].astype("int64"), "sign": -1})
    states = merged[merged["_is_deleted"] == 0]
    state = pd.DataFrame({**{k: states[k] for k in key}, **{c: states[c] for c in cols},
                          "version": states["_version"].astype("int64"), "sign": 1})
    both = pd.concat([cancel, state], ignore_index=True)
    if both.empty:
        return pa.table({n: [] for n in out_names})
    tbl = pa.Table.from_pandas(both[out_names], preserve_index=False)
    return tbl.cast(good.select([*key, *cols]).schema.append(pa.field("version", pa.int64()))
                    .append(pa.field("sign", pa.int8())), safe=False)
