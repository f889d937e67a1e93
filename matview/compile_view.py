"""A view's SELECT compiled into its plan: incrementally, with its internal nodes
(`matview.sql.nodes`) made first, or recomputed whole where no delta rule applies, the engine
refuses it, or every change would recompute every row anyway (`sql.whole`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import apsw

from matview import fallback
from matview.db import savepoint
from matview.errors import Error, UnsupportedQuery
from matview.names import fold
from matview.operators.partition import every_root_table
from matview.registry import Registry
from matview.sql.clock import refuse_clock_handed_on
from matview.sql.frontend import Compiled, compile_select
from matview.sql.nested_joins import unnest_leading_joins
from matview.sql.nodes import extract_nodes
from matview.sql.validate import drop_main_qualifiers, refuse_index_hints, spell_distinct_from
from matview.sql.whole import compile_whole, untracked_reads, whole_construct, whole_construct_inside, whole_tree

#: makes an internal node (name, SELECT) of the view being compiled: `lifecycle.create_view`
CreateNode = Callable[[str, str], None]


class _CheaperWhole(Exception):
    """The incremental plan would recompute every row at most writes: recomputed whole instead."""


class RefusedOnceCompiled(UnsupportedQuery):
    """A refusal found after the SELECT compiled (`create_view` may recompute it whole instead)."""


def compile_with_nodes(
    conn: apsw.Connection,
    registry: Registry,
    name: str,
    sql: str,
    maintenance: str,
    auto_indexes: bool,
    create_node: CreateNode | None,
    whole: bool = True,
    whole_reason: str | None = None,
    cheaper_whole: bool = True,
) -> Compiled:
    """Compile a view's SELECT, which reads its internal nodes (`matview.sql.nodes`): created
    first by `create_node` (`lifecycle.create_view`), or (None, a rebuild) already there.
    `whole`: where no delta rule applies (a top N, a window) or the incremental engine refuses,
    the view is recomputed whole (`sql.whole`), and
    (`cheaper_whole`, not in a rebuild: a view stays as it was made) where every change of a table
    it reads would recompute every row (`partition.every_root_table`);
    `whole_reason`: recomputed whole in any case, for this reason (where SQLite cannot run it again
    exactly, refused with it)."""
    refuse_index_hints(sql)
    refuse_clock_handed_on(conn, sql)  # (here once: every path below, whole recompute too, stands on it)
    sql = unnest_leading_joins(spell_distinct_from(sql))
    if whole_reason is not None:
        try:
            plan, source = compile_whole(conn, sql, whole_reason)
        except Error:
            raise UnsupportedQuery(whole_reason) from None
        return Compiled(plan, whole_tree(), source)
    what = whole_construct(sql) if whole else None
    if what is None:
        try:
            with savepoint(conn):
                compiled = _compile_incrementally(conn, registry, name, sql, auto_indexes, create_node)
                costly = (
                    every_root_table(conn, compiled.plan)
                    if whole and cheaper_whole and fallback.FALL_BACK_TO_WHOLE
                    else None
                )
                if costly is None:
                    return compiled
                raise _CheaperWhole(
                    f"a subquery that does not depend on the outer row reads {costly}, which the view reads "
                    f"too (or one in an ON condition, or nested in another, whose reach matview does not "
                    f"trace): every change of {costly} reaches every row, so running the SELECT once is cheaper"
                )
        except _CheaperWhole as choice:
            registry.invalidate()  # (its nodes are gone with the savepoint)
            try:
                plan, source = compile_whole(conn, sql, str(choice))
            except Error:  # (SQLite cannot run it again exactly: maintained row by row after all)
                return compile_with_nodes(
                    conn, registry, name, sql, maintenance, auto_indexes, create_node, whole=False
                )
            return Compiled(plan, whole_tree(), source)
        except UnsupportedQuery as refusal:
            # a LIMIT or a window inside a plain view or a derived table; or (by default) anything the
            # incremental engine refuses: recomputed whole instead, where SQLite can run the SELECT
            # again exactly; else the refusal stands, naming what the user wrote
            inside = whole_construct_inside(conn, sql) if whole else None
            if inside is None and not (whole and fallback.FALL_BACK_TO_WHOLE):
                raise
            registry.invalidate()  # (nodes the attempt made are gone with its savepoint)
            try:
                plan, source = compile_whole(conn, sql, inside or str(refusal))
            except Error:
                raise refusal from None
            return Compiled(plan, whole_tree(), source)
    plan, source = compile_whole(conn, sql, what)  # (the statement runs as written, no node)
    return Compiled(plan, whole_tree(), source)


def _compile_incrementally(
    conn: apsw.Connection,
    registry: Registry,
    name: str,
    sql: str,
    auto_indexes: bool,
    create_node: CreateNode | None,
) -> Compiled:
    planned, nodes = extract_nodes(conn, drop_main_qualifiers(sql), name)
    for node in nodes:
        if create_node is None:  # (a rebuild: its nodes are there)
            break
        create_node(node.name, node.sql)
        if not node.keyed:
            _refuse_inexact_node(registry, node.name, node.words)
        made = registry.get(node.name)
        marker = fallback.marker_in_table(conn, made) if made is not None else None
        if marker is not None:  # (a tie its owner would read: the owner is recomputed whole instead)
            raise RefusedOnceCompiled(fallback.HEALED[marker])
    compiled = compile_select(conn, planned, auto_indexes)
    node_views = [registry.get(node.name) for node in nodes]
    tables = {fold(t) for t in [*compiled.plan.base_tables, *(t for n in node_views if n for t in n.entry.base_tables)]}
    read = [*compiled.plan.upstream_views, *(v for n in node_views if n for v in n.entry.plan.upstream_views)]
    missed = untracked_reads(conn, sql, tables, {fold(v) for v in read})
    if missed is not None:
        raise UnsupportedQuery(missed)
    # (a node over a plain view's body: the view breaks when that plain view is redefined)
    views = tuple(dict([*compiled.plan.plain_views, *(v for n in nodes for v in n.views)]).items())
    plan = replace(compiled.plan, internal_nodes=tuple(n.name for n in nodes), plain_views=views)
    return replace(compiled, plan=plan)


def _refuse_inexact_node(registry: Registry, name: str, words: str = "") -> None:
    """A node whose groups or DISTINCT rows have several variants ('a'/'A' under NOCASE, 3/3.0
    untyped) shows one of them, which SQLite picks by scan order: harmless on display, but read
    by a join or an IN it would decide which rows match."""
    node = registry.get(name)
    assert node is not None
    plan = node.entry.plan
    if (plan.kind == "aggregate" and plan.has_group_by and not plan.exact_groups) or (
        plan.distinct and not plan.exact_distinct
    ):
        if words:
            raise UnsupportedQuery(
                f"{words}: the values of a group can be equal but different (1 and 1.0, 'a' and 'A' under NOCASE) "
                "and which one SQLite shows follows its scan order; not supported (group by typed BINARY columns)"
            )
        raise UnsupportedQuery(
            f"a grouped or DISTINCT subquery, CTE or view ({node.entry.sql}) whose values can be equal but "
            "different (NOCASE, untyped columns) cannot be read by a join or IN: which variant SQLite keeps "
            "follows its scan order; use typed BINARY columns there"
        )
