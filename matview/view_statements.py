"""The statements a `Connection` runs itself rather than hand to SQLite as they are.

CREATE / DROP / REFRESH MATERIALIZED VIEW (`lifecycle`, with progress and the change feed);
`CREATE INDEX` on a materialized view (on its table, `readable.index_columns`); `ALTER TABLE …
ADD COLUMN` on a table views read (the capture and the views rebuilt with it); and the
statements that change how SQLite reads tables — CREATE/DROP INDEX, ANALYZE — run with the
repair of the views they affect (`replan`). Each in one transaction of the connection's.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import apsw
from sqlglot.tokens import TokenType

from matview import base_ddl, fallback, lifecycle, progress, rebuild, replan
from matview.db import Rows, describe, raising_user_function
from matview.errors import Error
from matview.names import fold, is_node, quote, view_table
from matview.registry import View
from matview.sql.sqltext import matching_paren, split_top_level, tokenize
from matview.storage import ddl_guard, readable
from matview.storage.capture import follow_new_keys
from matview.subscriptions import Subscriptions
from matview_ext import statements

if TYPE_CHECKING:
    from matview.progress import ProgressCallback


class ViewStatements(Subscriptions):
    """`Connection`'s handling of the statements above (a part of it, in a module of its own)."""

    if TYPE_CHECKING:  # (what they use of `Connection`)
        _progress: ProgressCallback | None

        def _writing(self) -> contextlib.AbstractContextManager[None]: ...
        def _fold(self, commit: bool) -> None: ...
        def _run(self, sql: str, params: Any) -> Any: ...
        def execute(self, sql: str, params: Any = None) -> Any: ...

    def _run_materialized(self, statement: Any) -> None:
        what = f"{type(statement).__name__.removesuffix('View').upper()} {statement.name}"
        try:
            with progress.reporting(self.apsw, what, self._progress):
                self._run_materialized_statement(statement)
        except BaseException as exc:
            # rolled back (to its savepoint): whatever the registry learned (a node) is gone
            self.registry.invalidate()
            with contextlib.suppress(apsw.Error):
                self.registry.sync()
            if isinstance(exc, apsw.LockedError):  # (SQLite drops no table a statement still reads)
                raise Error(
                    f"{what}: a statement of this connection still reads it ({exc}); finish or close "
                    "the open cursors first"
                ) from exc
            if isinstance(exc, apsw.Error):
                raise Error(f"{type(exc).__name__}: {exc}") from exc
            function = raising_user_function(exc) if isinstance(exc, Exception) else None
            if function is not None and not isinstance(exc, Error):
                raise Error(f"{what}: the user's {function} raised {describe(exc)}") from exc
            raise

    def _run_materialized_statement(self, statement: Any) -> None:
        with self._writing():
            if isinstance(statement, statements.CreateView):
                self._fold_views(self._subscribed())  # its upstreams may fold: their ΔV is recorded
                unknown = set(statement.options) - {"maintenance", "indexes", "recompute"}
                if unknown:
                    raise Error(f"unknown view option(s): {', '.join(sorted(unknown))}")
                indexes = statement.options.get("indexes", "auto")
                if indexes not in ("auto", "off"):
                    raise Error(f"indexes must be 'auto' or 'off', not {indexes!r}")
                lifecycle.create_view(
                    self.apsw,
                    self.registry,
                    statement.name,
                    statement.select,
                    statement.options.get("maintenance", "immediate"),
                    statement.if_not_exists,
                    auto_indexes=indexes == "auto",
                    recompute=statement.options.get("recompute", "auto"),
                )
            elif isinstance(statement, statements.DropView):
                lifecycle.drop_view(self.apsw, self.registry, statement.name, statement.if_exists)
            elif fold(statement.name) in self.registry.damaged:  # (its catalog entry: `catalog.DamagedEntry`)
                lifecycle.refresh_damaged_view(self.apsw, self.registry, self.registry.damaged[fold(statement.name)])
            elif self._nodes_damaged(statement.name):
                lifecycle.remake_view(self.apsw, self.registry, self.registry.views[fold(statement.name)])
            else:
                self._fold(commit=False)
                with self._rebuilds_recorded():
                    rebuild.refresh_view(self.apsw, self.registry, statement.name)
                    self.registry.sync()
                    if self.registry.replan_due and fallback.FALL_BACK_TO_WHOLE:  # (still broken by an index)
                        replan.keep_views_readable(self.apsw, self.registry)

    def _nodes_damaged(self, name: str) -> bool:
        """Whether a view's internal nodes (theirs too) include one whose catalog entry is damaged."""
        view = self.registry.get(name)
        owners = [] if view is None else [view, *self.registry.own_nodes(view)]
        return any(fold(node) in self.registry.damaged for owner in owners for node in owner.entry.plan.internal_nodes)

    def _create_index_on_view(self, index: statements.CreateIndex) -> Rows:
        view = self.registry.get(index.table)
        assert view is not None
        _refuse_expression_terms(index, {fold(c.name) for c in view.entry.plan.columns})
        unique = "UNIQUE " if index.unique else ""
        guard = "IF NOT EXISTS " if index.if_not_exists else ""
        columns = readable.index_columns(index.rest, view.entry.plan)
        table = quote(view_table(view.name))
        self.execute(f"CREATE {unique}INDEX {guard}main.{quote(index.index)} ON {table} {columns}")
        return Rows([])

    def _add_column(self, sql: str, params: Any, dependents: list[View]) -> Rows:
        """`ALTER TABLE t ADD COLUMN …` on a table views read (an application's migration): the
        column is added, then the table's change capture and every view over it rebuilt, in one
        transaction (REFRESH of one of them rebuilds the others that share the table)."""
        refreshed = next((v for v in dependents if not is_node(v.name)), dependents[0])
        try:
            with self._writing():
                self._fold(commit=False)
                with self._rebuilds_recorded():
                    altered = base_ddl.target(self.apsw, self.registry, sql)
                    with ddl_guard.allowing_alter(self.apsw, altered or ""):
                        self.apsw.execute(sql, params)
                    self.registry.invalidate()
                    rebuild.refresh_view(self.apsw, self.registry, refreshed.name)
                    # a view whose columns would change (`SELECT *`) cannot be rebuilt in place: undone
                    unbuilt = [
                        v for v in base_ddl.dependents(self.apsw, self.registry, sql) if v.entry.plan.needs_refresh
                    ]
                    if unbuilt:
                        raise Error(f"{statements.first_word(sql)} TABLE … ADD: {unbuilt[0].entry.plan.needs_refresh}")
        except apsw.ConstraintError as exc:  # (rolled back: a rebuilt view breaks a user's UNIQUE index on it)
            self.registry.invalidate()
            raise Error(
                f"ALTER TABLE … ADD: a view over the table, rebuilt, would break a UNIQUE index made on it ({exc}); "
                "DROP INDEX it first"
            ) from None
        self.registry.sync_shadows()
        return Rows([])

    def _replanning(self, sql: str, params: Any) -> Rows:
        """CREATE/DROP INDEX, ANALYZE: run with the repair of the views whose scan order or ties
        it changes (`replan`), in one transaction; their subscribers get the change. The
        statement runs first, as a stock client's does: it takes the write lock itself where it
        writes the file, and where it writes none (an index on a TEMP table, an IF NOT EXISTS
        index that exists) it changed no plan of the file's tables, waits for no lock, and
        nothing is repaired."""
        with self:
            rows = Rows.drained(self._run(sql, params))
            if self.apsw.txn_state("main") == apsw.SQLITE_TXN_WRITE:
                # a new UNIQUE index: the capture probes it too, before any write could miss a row
                tables = list(dict.fromkeys(t for v in self.registry.views.values() for t in v.entry.base_tables))
                follow_new_keys(self.apsw, tables)
                with self._rebuilds_recorded():
                    replan.keep_views_readable(self.apsw, self.registry)
        self.registry.sync_shadows()
        return rows


def _refuse_expression_terms(index: statements.CreateIndex, columns: set[str]) -> None:
    """An index on a view takes its columns (`name [COLLATE c] [ASC|DESC]`, a name SQLite reads
    from a string too), and a partial one a WHERE without calls or JSON arrows: an expression
    SQLite may fail to evaluate (`json(b)`, `b -> '$'` of a text that is no JSON) would fail the
    base write whose fold adds the row. `columns`: the view's (folded)."""
    tokens = tokenize(index.rest)
    if not tokens or tokens[0].kind != TokenType.L_PAREN:
        return  # (SQLite says what is wrong)
    close = matching_paren(tokens, 0)
    where = f"CREATE INDEX {index.index} ON {index.table}"
    for term in split_top_level(index.rest, tokens[1:close]):
        kinds = [t.kind for t in term.tokens]
        while kinds and kinds[-1] in (TokenType.ASC, TokenType.DESC):
            kinds.pop()
        if len(kinds) >= 3 and kinds[-2] == TokenType.COLLATE:
            kinds = kinds[:-2]
        first = term.tokens[0] if term.tokens else None
        if len(kinds) != 1 or first is None or not (first.is_name or first.kind == TokenType.STRING):
            raise Error(
                f"{where}: an index on a materialized view takes its columns (with COLLATE, ASC, DESC), not an "
                f"expression ({term.text})"
            )
        if fold(first.text) not in columns:
            raise Error(f"{where}: no such column: {first.text}")
    rest = tokens[close + 1 :]
    for token, after in zip(rest, [*rest[1:], None]):
        call = token.is_name and after is not None and after.kind == TokenType.L_PAREN
        if call or token.text in ("->", "->>"):
            raise Error(
                f"{where}: the WHERE of an index on a materialized view takes no function call or JSON arrow "
                "(one that fails for a row would fail the base write that adds it)"
            )
