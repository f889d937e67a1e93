"""The compiled form of a view's SELECT: what the circuit runs, stored in the catalog.

A single-table view is one of two shapes (DBSP §4, §7):

* ``rows``: σ/π over the base table (linear, Thm 3.3), optionally followed by
  DISTINCT (Prop. 4.7).
* ``aggregate``: σ/π producing group terms and aggregate inputs, then a grouped
  aggregate (§7.2), then a per-group projection/HAVING over the aggregate values.

Every SQL fragment here is a slice of the user's own text (see `sqltext`), so SQLite
evaluates exactly what was written.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from matview.names import ROWID_GUARD_PREFIX

#: the newest plan format this code reads (3: a plan listing a rowid guard index, which an older
#: matview, blind to the guard, must refuse to read; 4: a plan with a subquery reached by value,
#: whose kept value an older matview would not keep: `Plan.format`)
PLAN_FORMAT = 4

#: A SQL template: the user's text never goes through `str.format` (a literal `'{weight}'` or
#: a JSON string is not a placeholder). Even positions are literal SQL, odd positions name a
#: placeholder that `render` fills.
Template = tuple[str, ...]


class ValueReach(NamedTuple):
    """An uncorrelated scalar subquery compared in a top-level conjunct of the outer WHERE,
    whose result has no affinity: a change of its value reaches the outer rows whose conjunct
    it flips (`sql.value_reach`, `operators.scalar_values`)."""

    subquery: Template  # `(SELECT …)` as the stage-1 text holds it
    conjunct: Template  # the outer WHERE's conjunct around it, as the stage-1 text holds it
    evaluated: Template  # the subquery as the user wrote it (SQLite's own SUM/AVG): its value now


class SubqueryReach(NamedTuple):
    """An outermost subquery of a partition-recompute plan, for finding the outer rows a change
    of its tables reaches (`sql.subqueries`, `operators.partition`)."""

    occurrences: tuple[int, ...]  # the occurrences its FROM reads
    template: Template  # its `FROM … WHERE …`
    joinable: bool  # joined to the outer FROM (no name clash), driven by the change, not an EXISTS
    membership: tuple[str, str] | None  # `x IN (SELECT col …)`: x and col, reaching rows by value
    #: its `FROM … WHERE …` reads no outer column: a condition on the change alone is asked once
    #: (`membership.reach_conditions`' guards), not per outer row
    uncorrelated: bool = False
    value: ValueReach | None = None  # an uncorrelated scalar subquery reaching rows by its value


WEIGHT = "weight"


def template(*parts: str) -> Template:
    """Literal SQL and placeholder names, alternating: template("SELECT a, ", WEIGHT, " FROM ", "source0")."""
    return tuple(parts)


#: placeholders a template may hold besides WEIGHT and source<i>, and their meaning as written:
#: `outer` stands where the user wrote LEFT/RIGHT [OUTER] (a term may need the inner join; plans
#: pass their `outer_kind`),
#: `reach` at the end of an outer join's WHERE (a term may restrict the preserved rows it visits)
PLACEHOLDER_DEFAULTS = {"outer": "LEFT", "reach": ""}


def render(parts: Template, **values: str) -> str:
    """Fill a template. A compound's arm k > 0 has its weight as `weight<k>`: `weight` unless given."""
    filled = {**PLACEHOLDER_DEFAULTS, **values}

    def value(part: str) -> str:
        if part not in filled and part.startswith(WEIGHT):
            return filled[WEIGHT]
        return filled[part]

    return "".join(value(part) if position % 2 else part for position, part in enumerate(parts))


def _template_of_format_1(text: str) -> Template:
    """Plans of format 1 stored "{source}"/"{weight}" placeholders inside the SQL text."""
    pieces = re.split(r"\{(source|weight)\}", text)
    return tuple("source0" if position % 2 and piece == "source" else piece for position, piece in enumerate(pieces))


@dataclass(frozen=True)
class OutputColumn:
    name: str
    decltype: str  # as SQLite reports it for the SELECT (a CAST has one too)
    collation: str
    is_column: bool = False  # a plain base column, whose values already passed its affinity
    is_cast: bool = False  # a CAST(… AS type): casting its values again changes nothing
    #: the one storage class its values have, where SQLite decides it ('text' for a literal string
    #: or strftime(…), 'integer', 'real', 'blob', 'null'): no two of its values are equal but
    #: different (DISTINCT, UNION; `sql.value_classes`)
    value_class: str = ""

    @property
    def storage_type(self) -> str:
        """The declared type in the view table: re-applying a column's own affinity to its
        values changes nothing, but a CAST(x AS NUMERIC) type would turn 2.0 into 2."""
        return self.decltype if self.is_column else ""

    @property
    def no_affinity(self) -> bool:
        """Whether SQLite gives the SELECT's column no affinity: an expression (`count(*)`, `a + 1`)
        with no declared type — not a column, not a CAST. (A virtual table's column without a type
        has BLOB affinity instead: its readers read it as `+column`.)"""
        return not (self.is_column or self.is_cast or self.decltype)


@dataclass(frozen=True)
class AggSpec:
    """One aggregate call. `arg`/`filter` index the stage-1 row; `separator` is a constant."""

    func: str  # count, sum, total, avg, min, max, group_concat
    distinct: bool = False
    arg: int | None = None
    filter: int | None = None
    separator: str | None = None
    sql: str = ""  # the call as written, for messages and explain()
    collation: str = "BINARY"  # COUNT(DISTINCT x) of a NOCASE/RTRIM value: the classes it counts
    #: GROUP_CONCAT(DISTINCT x): the stage-1 index of x itself (`arg` is its text), which DISTINCT compares
    key: int | None = None
    #: GROUP_CONCAT(x ORDER BY …): per term (stage-1 index, descending, collation, NULLs first)
    order: tuple[tuple[int, bool, str, bool], ...] = ()


@dataclass(frozen=True)
class PostColumn:
    """A column of the per-group table post-aggregation expressions are evaluated over."""

    name: str
    decltype: str
    collation: str
    source: tuple[str, int]  # ("group", j) or ("agg", i)


@dataclass(frozen=True)
class Upstream:
    """A materialized view another view reads: what its readers see (see `matview.upstream`)."""

    name: str
    aggregate: bool  # an aggregate view: a stored result may be an error marker
    columns: tuple[OutputColumn, ...]


Signature = tuple[tuple[str, str, str], ...]  # a base table's (column, declared type, collation)


@dataclass(frozen=True)
class Plan:
    sources: tuple[str, ...]  # the base table of each FROM occurrence (a self-join names one twice)
    kind: str  # "rows" | "aggregate"
    stage1: Template  # the stage-1 SELECT, with placeholders WEIGHT and source<i> per occurrence
    columns: tuple[OutputColumn, ...]
    distinct: bool = False
    group_collations: tuple[str, ...] = ()
    has_group_by: bool = False
    aggs: tuple[AggSpec, ...] = ()
    outputs: tuple[tuple[str, int], ...] = ()  # per output column: ("group"|"agg"|"expr", index)
    post_alias: str = ""
    post_columns: tuple[PostColumn, ...] = ()
    post_exprs: tuple[str, ...] = ()
    having: str | None = None
    rowid_column: int | None = None  # stage-1 index of the base rowid, when an aggregate needs order
    #: the row the one MIN/MAX keeps is kept per group: bare columns, and the GROUP BY spelling, come
    #: from it (`operators.bare_columns`)
    extreme_row: bool = False
    #: and the GROUP BY values SQLite shows are that row's too (beside a MIN/MAX: plain column terms
    #: only — an expression term shows the group's first row's)
    extreme_spelling: bool = False
    #: and that row is the only extreme row of its group (`SelectList.unique_extreme`): kept by
    #: value alone, in any scan order (no rowid)
    extreme_unique: bool = False
    #: a FROM-subquery, CTE or view inlined without its ORDER BY ("FROM-subquery s"): SQLite meets
    #: the rows in that order, which matters where the view follows it (`storage.scan_order`)
    inner_order: str = ""
    exact_groups: bool = True  # GROUP BY keys have one variant each (see operators.variants)
    exact_distinct: bool = True  # DISTINCT rows have one variant each
    signatures: tuple[tuple[str, Signature], ...] = field(default=())  # per distinct base table
    functions: tuple[str, ...] = ()  # user-defined SQL functions the SELECT calls (lower case)
    aliases: tuple[str, ...] = ()  # the name of each occurrence in the query (its alias or table name)
    without_rowid: tuple[str, ...] = ()  # base tables WITHOUT ROWID
    stable_rowid_tables: tuple[str, ...] = ()  # base tables whose rowid is an INTEGER PRIMARY KEY (VACUUM keeps it)
    outer_on: str = ""  # `A LEFT|RIGHT JOIN B ON <outer_on>`: the condition as written (delta_terms.DeltaTerms)
    outer_kind: str = ""  # "LEFT", "RIGHT" or "FULL": which occurrence keeps all its rows
    outer_where: bool = False  # the outer join's SELECT has a WHERE (the `reach` filter joins it with AND)
    outer_key: tuple[str, ...] = ()  # what identifies a preserved row: a rowid name no column shadows, or the PK
    full_key: tuple[str, ...] = ()  # FULL JOIN: what identifies a row of the second table (preserved too)
    root_key_nullable: bool = False  # the root's key may hold NULLs: matched as quoted text (NULL rows as one)
    root_recompute: bool = False  # outer join chains: ΔV recomputes the rows of the root's reached rows
    root: int = 0  # root_recompute: the occurrence each output row comes from one row of (`FromClause.root`)
    from_template: Template = ()  # the FROM clause alone (root_recompute: which first-table rows a change reaches)
    #: per outermost subquery, which outer rows a change of its tables reaches (`SubqueryReach`)
    subquery_reach: tuple[SubqueryReach, ...] = ()
    subquery_probes: tuple[tuple[str, str, str], ...] = ()  # (table, column, collation) subqueries compare by `=`
    #: root_recompute: the outer WHERE's conjuncts without a subquery, ANDed — a row that fails them
    #: gives no view row in any state, so the reach queries may skip it (and SQLite may use them to
    #: join by index instead of forming the FROM clause's cross product)
    reach_filter: str = ""
    inner_from: bool = False  # the FROM clause joins with inner joins only (no LEFT/RIGHT/FULL)
    #: per base table with one: its `TableInfo.image_key` and whether that may hold NULLs
    #: (`partition.true_old_source` finds a changed row's current image by it)
    image_keys: tuple[tuple[str, tuple[str, ...], bool], ...] = ()
    auto_indexes: bool = True  # create the join-key indexes delta terms need (see `indexes`)
    indexes: tuple[str, ...] = ()  # matview's indexes this view's delta terms use
    scans: tuple[str, ...] = ()  # delta-term loops that remain scans, as messages
    needs_refresh: str = ""  # why the stored state is void (a shared base table's capture was rebuilt)
    arms: tuple[int, ...] = ()  # a set operation: the first occurrence of each arm (see `compound`)
    set_operation: str = ""  # "INTERSECT" or "EXCEPT" (counted per arm; UNION is `distinct`)
    plain_views: tuple[tuple[str, str], ...] = ()  # plain views the SELECT reads (inlined): name, CREATE VIEW text
    upstreams: tuple[Upstream, ...] = ()  # sources that are materialized views (see `matview.upstream`)
    internal_nodes: tuple[str, ...] = ()  # hidden views made for its derived tables (see `matview.sql.nodes`)
    #: a view recomputed whole at every fold (top-N LIMIT, windows): its SELECT as written (`sql.whole`)
    whole: str = ""
    whole_reason: str = ""  # why: "LIMIT", "a window function", or the incremental engine's refusal
    #: made `WITH (recompute = 'never')`: never switched to whole recompute (`fallback.heal`)
    recompute_never: bool = False

    @property
    def group_count(self) -> int:
        return len(self.group_collations)

    @functools.cached_property  # (read at every commit; a plan never changes)
    def tables(self) -> list[str]:
        """The distinct sources (base tables and upstream views), in order of first reference."""
        return list(dict.fromkeys(self.sources))

    @functools.cached_property  # (read at every commit; a plan never changes)
    def value_reaches(self) -> tuple[tuple[int, ValueReach], ...]:
        """The subqueries reached by value, with their position in `subquery_reach`."""
        return tuple((k, r.value) for k, r in enumerate(self.subquery_reach) if r.value is not None)

    @functools.cached_property  # (read at every commit; a plan never changes)
    def upstream_views(self) -> tuple[str, ...]:
        return tuple(u.name for u in self.upstreams)

    @functools.cached_property  # (read at every commit; a plan never changes)
    def base_tables(self) -> list[str]:
        """The distinct base tables the SELECT reads itself (not through an upstream view)."""
        return [t for t in self.tables if t not in self.upstream_views]

    @property
    def format(self) -> int:
        """The plan format it is stored as: 4 where a subquery reaches rows by value (`ValueReach`),
        3 where it knows a table's rows by rowid (it lists a rowid guard index), else 2 (older
        matview reads it)."""
        if self.value_reaches:
            return 4
        return 3 if any(name.startswith(ROWID_GUARD_PREFIX) for name in self.indexes) else 2

    def image_key(self, table: str) -> tuple[tuple[str, ...], bool] | None:
        return next(((key, nullable) for name, key, nullable in self.image_keys if name == table), None)

    def signature(self, table: str) -> Signature | None:
        return next((sig for name, sig in self.signatures if name == table), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = self.format
        if not data["recompute_never"]:  # (written only when set: older code reads the plan as before)
            del data["recompute_never"]
        for agg in data["aggs"]:  # (written only where not the default: plans older code reads stay as they were)
            if agg["collation"] == "BINARY":
                del agg["collation"]
            for name in ("key", "order"):
                if not agg[name] and agg[name] != 0:
                    del agg[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        data = dict(data)
        plan_format = data.pop("format", None)
        if plan_format == 1 or isinstance(data["stage1"], str):  # one table, "{source}" in the text
            data["stage1"] = _template_of_format_1(data["stage1"])
            table = data.pop("table")
            data["sources"] = (table,)
            data["signatures"] = ((table, data.pop("base_signature")),)
        data["columns"] = tuple(OutputColumn(*c) if isinstance(c, list) else OutputColumn(**c) for c in data["columns"])
        data["aggs"] = tuple(
            AggSpec(**{**a, "order": tuple(tuple(term) for term in a.get("order", ()))}) for a in data["aggs"]
        )
        data["post_columns"] = tuple(
            PostColumn(p["name"], p["decltype"], p["collation"], tuple(p["source"])) for p in data["post_columns"]
        )
        data["arms"] = tuple(data.get("arms", ()))
        optional = (
            "functions",
            "aliases",
            "without_rowid",
            "outer_key",
            "full_key",
            "indexes",
            "scans",
            "stable_rowid_tables",
        )  # newer than some plans
        for name in optional:
            data.setdefault(name, ())
        data.setdefault("from_template", ())
        data["subquery_probes"] = tuple(tuple(p) for p in data.get("subquery_probes", ()))
        data["image_keys"] = tuple((t, tuple(k), bool(n)) for t, k, n in data.get("image_keys", ()))
        data["subquery_reach"] = tuple(
            SubqueryReach(
                tuple(r[0]),
                tuple(r[1]),
                bool(r[2]) if len(r) > 2 else False,
                (str(r[3][0]), str(r[3][1])) if len(r) > 3 and r[3] else None,
                bool(r[4]) if len(r) > 4 else False,
                ValueReach(*(tuple(t) for t in r[5])) if len(r) > 5 and r[5] else None,
            )
            for r in data.get("subquery_reach", ())
        )
        for name in ("group_collations", "post_exprs", "stage1", "sources", "from_template", *optional):
            data[name] = tuple(data[name])
        data["outputs"] = tuple(tuple(o) for o in data["outputs"])
        data["signatures"] = tuple(
            (table, tuple(tuple(c) for c in signature)) for table, signature in data["signatures"]
        )
        data["plain_views"] = tuple(tuple(v) for v in data.get("plain_views", ()))
        data["internal_nodes"] = tuple(data.get("internal_nodes", ()))
        data["upstreams"] = tuple(
            Upstream(u["name"], u["aggregate"], tuple(OutputColumn(**c) for c in u["columns"]))
            for u in data.get("upstreams", ())
        )
        return cls(**data)
