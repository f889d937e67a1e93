"""Which views Spark can compute exactly by partitions, and which the driver computes locally.

A view is *partitioned* when its CREATE over the union of the parts equals the merge of its
CREATEs over each part, by rules the engine itself implements (`Aggregate.merge`,
`Distinct.merge`, view rows keyed by identity): one base table (one that is being loaded),
read directly (no upstream view, plain view, subquery or set operation), no user function
(the workers do not have it), and

* a row view (σ/π): its rows add up by identity key;
* SELECT DISTINCT with one variant per row (BINARY, typed columns): the counts add;
* an aggregate with exact groups whose aggregates are COUNT/SUM/TOTAL/AVG/MIN/MAX without
  DISTINCT; with MIN/MAX only where every collation involved is BINARY (the ordered state
  merges entries by SQLite equality, which BINARY makes byte equality modulo 1 = 1.0).

A join of two loaded tables is partitioned the same way when both are cut into buckets by
the join key (`copartition`): then its parts are the buckets, not the load's file splits.

Every other view is computed *locally*: by the engine's own CREATE on the driver, after the
load, in the same final transaction. Never approximately.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import apsw

from matview.errors import Error, UnsupportedQuery
from matview.names import fold, quote
from matview.plan import Plan
from matview.spark.copartition import JoinKey, join_key
from matview.sql.frontend import compile_select
from matview.sql.nodes import extract_nodes
from matview.sql.sqltext import tokenize


@dataclass
class ViewJob:
    name: str
    sql: str
    existing: bool  # a view already in the file (rebuilt), or one to create
    plan: Plan | None = None  # compiled against the loaded schema; None: compiled in the final transaction
    partitioned_on: str | None = None  # the loaded table whose parts compute it
    reason: str = ""  # why it is computed locally
    #: its ordered state merged by Spark: one file per key range, in key order (empty: the
    #: driver merges the load part files' ordered states itself)
    ordered_parts: list[str] = field(default_factory=list)
    join_key: JoinKey | None = None  # a join computed by co-partitioned buckets
    bucket_parts: list[str] = field(default_factory=list)  # their files (each holds an ordered state)

    @property
    def where(self) -> str:
        if self.join_key is not None:
            return f"spark ({self.join_key.describe()})"
        return f"spark ({self.partitioned_on})" if self.partitioned_on else "local"


def _binary_only(plan: Plan, sql: str, table_sql: str) -> bool:
    collations = {c[2].upper() for _, sig in plan.signatures for c in sig}
    if collations - {"BINARY"}:
        return False
    words = {str(token.text).upper() for token in tokenize(sql)}
    return "COLLATE" not in words and "COLLATE" not in table_sql.upper()


def local_reason(plan: Plan, sql: str, loaded: dict[str, str], join: JoinKey | str | None = None) -> str | None:
    """Why `plan` cannot be computed by partitions of a loaded table (None: it can).
    `loaded`: folded name → DDL of every table being loaded; `join`: a join's key
    (`copartition.join_key`) or why it has none."""
    if plan.whole:
        return "it is recomputed whole (LIMIT, a window)"
    if plan.upstreams or plan.plain_views:
        return "it reads a view"
    if len(plan.sources) != 1 and not isinstance(join, JoinKey):
        return join or "a join: its inputs are not co-partitioned"
    if any(fold(source) not in loaded for source in plan.sources):
        return "its table is not being loaded"
    if plan.arms or plan.set_operation or plan.root_recompute or plan.subquery_reach or plan.subquery_probes:
        return "a set operation or subquery"
    if plan.functions:
        return "it calls user functions the workers lack"
    if plan.kind == "rows":
        if plan.distinct and not plan.exact_distinct:
            return "DISTINCT over values with several variants (collations, untyped columns)"
        return None
    if plan.distinct:
        return "DISTINCT over an aggregate"
    if not plan.exact_groups:
        return "GROUP BY over values with several variants (collations, untyped columns)"
    if plan.rowid_column is not None:
        return "an aggregate ordered by rowid (GROUP_CONCAT, or bare columns beside MIN/MAX)"
    for spec in plan.aggs:
        if spec.distinct or spec.func not in ("count", "sum", "total", "avg", "min", "max"):
            return f"{spec.sql or spec.func} has no partial-state merge"
    minmax = any(s.func in ("min", "max") for s in plan.aggs)
    ddl = " ".join(loaded[fold(source)] for source in plan.sources)
    if minmax and not _binary_only(plan, sql, ddl):
        return "MIN/MAX under a collation other than BINARY"
    return None


def scratch_schema(target: apsw.Connection, loaded: dict[str, str]) -> apsw.Connection:
    """An in-memory database with the file's user tables, the loaded tables as they will be
    created, and its plain views: where new views are compiled before any Spark work."""
    scratch = apsw.Connection(":memory:")
    rows = target.execute(
        "SELECT type, name, sql FROM main.sqlite_master WHERE type IN ('table', 'view') AND sql IS NOT NULL "
        "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_\\_dbsp\\_%' ESCAPE '\\' ORDER BY type = 'view'"
    ).fetchall()
    for kind, name, sql in rows:
        if kind == "table" and fold(str(name)) in loaded:
            continue
        try:
            scratch.execute(str(sql))
        except apsw.Error:
            pass  # a plain view over something absent here: views reading it compile later
    for ddl in loaded.values():
        scratch.execute(ddl)
    return scratch


def classify(scratch: apsw.Connection, jobs: list[ViewJob], loaded: dict[str, str]) -> None:
    """Compile each view against the loaded schema and decide where it is computed."""
    for job in jobs:
        try:
            if extract_nodes(scratch, job.sql, job.name)[1]:
                job.reason = "its aggregating derived tables are internal nodes (hidden views over views)"
                continue
            compiled = compile_select(scratch, job.sql, True)
        except UnsupportedQuery as exc:
            # (the local CREATE recomputes it whole, or refuses it, as it would without Spark)
            job.reason = f"the incremental engine does not maintain it ({exc})"
            continue
        except Error as exc:
            if not job.existing and _reads_only_tables(scratch, job.sql):
                raise Error(f"view {job.name}: {exc}") from None
            job.reason = "it reads a materialized view"
            continue
        job.plan = compiled.plan
        join = join_key(compiled, loaded) if len(compiled.plan.sources) > 1 else None
        reason = local_reason(compiled.plan, job.sql, loaded, join)
        if reason is not None:
            job.reason = reason
        elif isinstance(join, JoinKey):
            job.join_key = join
        else:
            job.partitioned_on = fold(compiled.plan.sources[0])


def _reads_only_tables(scratch: apsw.Connection, sql: str) -> bool:
    """Whether every name in `sql` that could be a source exists in the scratch schema (then
    a compile error there is the view's own fault, reported before Spark starts)."""
    known = {fold(str(n)) for (n,) in scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tokens = tokenize(sql)
    return all(
        fold(str(token.text).strip('"`[]')) in known
        for before, token in itertools.pairwise(tokens)
        if str(before.text).upper() in ("FROM", "JOIN")
    )


def quoted_create(name: str, sql: str) -> str:
    return f"CREATE MATERIALIZED VIEW {quote(name)} AS {sql}"
