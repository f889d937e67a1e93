"""Set operations in a view's SELECT: `UNION ALL` of select-project-join arms, and `UNION`,
`INTERSECT`, `EXCEPT` where equal values cannot differ.

`A UNION ALL B` is linear in each arm (DBSP Thm 3.3): its delta is the sum of the arms' deltas.
The arms' stage-1 SELECTs become one compound template; each arm's tables are occurrences of
the plan, numbered on from the previous arm's. A delta term of an occurrence in arm k renders
the other arms over empty sources, so only arm k contributes (an arm of select-project-join
over an empty input is empty). `UNION` is `DISTINCT` over `UNION ALL` (Prop. 4.7), maintained
by the Distinct operator; INTERSECT and EXCEPT tag each arm's rows with its number and keep
per-row counts of each arm (`operators.set_operation`, R5) — all three only where every column
has one variant per value (typed, BINARY), since which of `1` and `1.0` SQLite keeps is not a
rule matview implements. Arms that aggregate, are DISTINCT, read subqueries or outer joins,
and the left operand of a mixed chain, reach this module as internal nodes (`nodes._arm_nodes`)
read by select-project arms; a LIMIT is refused by name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import apsw
from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.plan import OutputColumn, Plan
from matview.sql.sqltext import Token, depth_walk, set_operator_kinds, set_operators, split_clauses
from matview.sql.value_classes import output_has_one_variant
from matview.storage.schema import affinity

if TYPE_CHECKING:
    from matview.sql.from_clause import FromClause


def split_arms(sql: str, tokens: list[Token]) -> tuple[list[tuple[str, list[Token]]], str] | None:
    """The arms of a compound SELECT (text, tokens rebased) and its operation (UNION ALL, UNION
    — with some UNION ALL too, distinct as a whole —, INTERSECT or EXCEPT); None for a simple
    SELECT. A trailing ORDER BY is dropped (a view has no order)."""
    operators = set_operators(tokens)
    if not operators:
        return None
    chain = set_operator_kinds(tokens, operators)
    kinds = set(chain)
    if not one_operation(chain):
        if len(kinds - {"UNION", "UNION ALL"}):
            raise UnsupportedQuery(f"set operations mixed ({', '.join(sorted(kinds))}) are not supported yet")
        # (A UNION B) UNION ALL C keeps C's duplicates: not one DISTINCT over every arm
        raise UnsupportedQuery("UNION followed by UNION ALL is not supported yet (a UNION last makes all distinct)")
    operation = "UNION ALL" if kinds == {"UNION ALL"} else ("UNION" if kinds <= {"UNION", "UNION ALL"} else kinds.pop())
    arms: list[tuple[str, list[Token]]] = []
    starts = [0, *(i + (2 if tokens[i + 1].kind == TokenType.ALL else 1) for i in operators)]
    ends = [*operators, len(tokens)]
    for start, end in zip(starts, ends):
        arm = tokens[start:end]
        if not arm or arm[0].kind != TokenType.SELECT:
            raise UnsupportedQuery("an arm of a set operation that is not a plain SELECT is not supported yet")
        arms.append((sql[arm[0].start : arm[-1].end], [_rebase(t, arm[0].start) for t in arm]))
    last_text, last_tokens = arms[-1]
    clauses = split_clauses(last_text, last_tokens)
    if clauses.limit:
        raise UnsupportedQuery("LIMIT/OFFSET is not supported: a view's rows have no order")
    if clauses.order:
        depths_ = depth_walk(last_tokens)
        cut = next(i for i, (t, d) in enumerate(zip(last_tokens, depths_)) if d == 0 and t.kind == TokenType.ORDER_BY)
        kept = last_tokens[:cut]
        arms[-1] = (last_text[: kept[-1].end], kept)
    return arms, operation


def one_operation(chain: list[str]) -> bool:
    """Whether a chain of set operators (`set_operator_kinds`) is one set operation: one
    operator throughout, or UNION ALL and UNION ending in UNION (distinct as a whole)."""
    return len(set(chain)) == 1 or (set(chain) <= {"UNION", "UNION ALL"} and chain[-1] == "UNION")


def _rebase(token: Token, offset: int) -> Token:
    return Token(token.kind, token.text, token.start - offset, token.end - offset)


def combine(conn: apsw.Connection, arms: list[tuple[Plan, FromClause]], operation: str) -> Plan:
    """One plan of the arms' plans: their stage-1 templates joined by UNION ALL, each arm's
    occurrences numbered on, its weight placeholder named `weight<k>`; for INTERSECT/EXCEPT
    each arm's rows tagged with the arm's number (the last value before the weight)."""
    distinct = operation != "UNION ALL"
    counted = operation in ("INTERSECT", "EXCEPT")
    for index, (plan, source) in enumerate(arms):
        where = f"arm {index + 1} of the set operation"
        if plan.kind != "rows" or plan.distinct:
            raise UnsupportedQuery(f"{where} aggregates or is DISTINCT: not supported yet")
        if plan.root_recompute or plan.outer_on or source.root_recompute:
            raise UnsupportedQuery(f"{where} has a subquery or an outer join: not supported yet")
    first = arms[0][0]
    stage1: list[str] = []
    sources: list[str] = []
    aliases: list[str] = []
    starts: list[int] = []
    for index, (plan, _source) in enumerate(arms):
        starts.append(len(sources))
        parts = [
            _renumber(part, len(sources), index) if position % 2 else part for position, part in enumerate(plan.stage1)
        ]
        if counted:
            parts[0] += f"{index}, "  # the head ends with the select list's ", " before the weight
        if stage1:
            stage1[-1] += " UNION ALL " + parts[0]
            stage1 += parts[1:]
        else:
            stage1 = parts
        sources += plan.sources
        aliases += plan.aliases
    signatures: dict[str, Any] = {}
    for plan, _source in arms:
        for table, signature in plan.signatures:
            signatures.setdefault(table, signature)
    columns = tuple(
        replace(c, is_column=_converted_alike([plan.columns[i] for plan, _s in arms]), is_cast=False)
        for i, c in enumerate(first.columns)
    )
    if distinct:
        # equal values must be identical in every arm and across arms: typed, BINARY (SQLite
        # compares with the first arm's collation that has one), one affinity (1 vs 1.0)
        for index, column in enumerate(columns):
            arm_columns = [plan.columns[index] for plan, _source in arms]
            # (an expression of one storage class — a literal, strftime(…) — stands for its affinity;
            # NULL is NULL in every arm)
            exact = all(output_has_one_variant(c) for c in arm_columns)
            classes = {c.value_class.upper() if c.value_class else _affinity_class(c.decltype) for c in arm_columns}
            if not exact or len(classes - {"NULL"}) > 1:
                raise UnsupportedQuery(
                    f"{operation} over column {column.name}, where equal values can differ (1 and 1.0, 'a' and "
                    "'A', or types that differ between arms): which one SQLite keeps is not a rule matview "
                    "implements; use typed BINARY columns of one type"
                )
    return replace(
        first,
        stage1=tuple(stage1),
        sources=tuple(sources),
        aliases=tuple(aliases),
        signatures=tuple(signatures.items()),
        without_rowid=tuple(dict.fromkeys(t for plan, _s in arms for t in plan.without_rowid)),
        upstreams=tuple({u.name: u for plan, _s in arms for u in plan.upstreams}.values()),
        stable_rowid_tables=tuple(dict.fromkeys(t for plan, _s in arms for t in plan.stable_rowid_tables)),
        columns=columns,
        distinct=distinct and not counted,
        set_operation=operation if counted else "",
        exact_distinct=True,
        arms=tuple(starts),
        functions=tuple(sorted({f for plan, _s in arms for f in plan.functions})),
    )


def blob_where_arms_conflict(columns: tuple[OutputColumn, ...], decltypes: list[str]) -> tuple[OutputColumn, ...]:
    """The set operation's columns, typed BLOB where SQLite gives the column no affinity of its
    first arm's because another arm's values may be of another kind (`SELECT num … UNION ALL
    SELECT text …`: SQLite names the type BLOB), so that readers compare them as SQLite does."""
    return tuple(
        replace(c, decltype="BLOB") if not c.is_column and shown.upper() == "BLOB" else c
        for c, shown in zip(columns, [*decltypes, *[""] * len(columns)], strict=False)
    )


def _converted_alike(arm_columns: list[OutputColumn]) -> bool:
    """Whether every arm's values in a column already passed the first arm's affinity (each a
    plain column or a CAST, all of one affinity): then the set operation's column is as good as
    a plain column (`OutputColumn.is_column`) — stored typed, read as declared, under the
    collation SQLite gives it (checked by `collations.refuse_other_collations`)."""
    kinds = {affinity(c.decltype) for c in arm_columns}
    return len(kinds) == 1 and all(c.is_column or c.is_cast for c in arm_columns)


def _affinity_class(decltype: str) -> str:
    """Affinities that store equal numbers identically count as one (NUMERIC keeps 1.0 as 1)."""
    kind = affinity(decltype)
    return "INTEGER" if kind == "NUMERIC" else kind


def _renumber(placeholder: str, offset: int, arm: int) -> str:
    if placeholder.startswith("source"):
        return f"source{int(placeholder[len('source') :]) + offset}"
    if placeholder == "weight":
        return f"weight{arm}" if arm else "weight"
    return placeholder
