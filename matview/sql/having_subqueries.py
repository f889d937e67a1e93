"""A subquery in HAVING: the aggregate becomes a derived table that the HAVING filters.

    SELECT k, sum(x) AS v FROM t GROUP BY k HAVING sum(x) > (SELECT avg(x) FROM t)
    ⇒
    SELECT "__dbsp_h0" AS "k", "__dbsp_h1" AS "v"
    FROM (SELECT k AS "__dbsp_h0", sum(x) AS "__dbsp_h1", sum(x) AS "__dbsp_h2", k AS "__dbsp_h3"
          FROM t GROUP BY k)
    WHERE "__dbsp_h2" > (SELECT avg(x) FROM t)

SQLite evaluates HAVING once per group, over the values the select list sees: aggregate calls,
and columns outside any aggregate (GROUP BY columns). Each one the HAVING names outside its
subqueries becomes a column of the derived table, which the filter reads instead (a name that
is no column is a select-list alias, as SQLite resolves it: the aliased column). Every GROUP BY
term is a column too, so the derived table's rows are its groups: `nodes` makes it an internal
node (a hidden materialized view), and `subqueries` maintains the filter per node row. Only
subqueries that read nothing of the query around them are rewritten (SQLite runs each alone);
a correlated one would need its outer names moved.

Anything else (DISTINCT, LIMIT, a window, a set operation, `*`, a name this pass cannot place)
is left as written, for the later passes to refuse by name; so is a rewrite SQLite does not
accept with the same column names. An ORDER BY is dropped (a view is a bag).
"""

from __future__ import annotations

import apsw
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.names import PREFIX, fold, quote
from matview.sql.sqltext import (
    Clauses,
    Span,
    Token,
    find_aggregate_calls,
    item_alias,
    matching_paren,
    parse_sqlite,
    set_operators,
    splice,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.validate import probe_columns


def rewrite_having_subqueries(conn: apsw.Connection, body: str, prefix: str = "") -> str:
    """`body` (a SELECT after the WITH list `prefix`) with a HAVING that has a subquery
    written as a filter over the aggregate as a derived table; unchanged when that is not
    possible (see the module docstring)."""
    tokens = tokenize(body)
    if not tokens or tokens[0].kind != TokenType.SELECT:
        return body
    if set_operators(tokens):
        return body
    clauses = split_clauses(body, tokens)
    if not _subqueries(list(clauses.having.tokens)) or clauses.distinct or clauses.limit or clauses.window:
        return body
    try:
        names = probe_columns(conn, prefix + body)[0]
        rewritten = _Rewrite(conn, body, prefix, tokens, clauses).outer(names)
        if rewritten is None or probe_columns(conn, prefix + rewritten)[0] != names:
            return body
    except Exception:
        return body
    return rewritten


def _identifiers(text: str) -> str:
    """`text` with every quoted name in backticks, which SQLite never reads as a string (a
    double-quoted name that names no column is the string, a fallback a probe must not take)."""
    quoted = [t for t in tokenize(text) if t.kind == TokenType.IDENTIFIER]
    return splice(text, [(t.start, t.end, _backticked(t.text)) for t in quoted])


def _backticked(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _subqueries(tokens: list[Token]) -> list[tuple[int, int]]:
    """(open, close) token indices of the outermost subqueries of an expression."""
    found = []
    index = 0
    while index < len(tokens) - 1:
        if tokens[index].kind == TokenType.L_PAREN and tokens[index + 1].kind == TokenType.SELECT:
            close = matching_paren(tokens, index)
            found.append((index, close))
            index = close + 1
        else:
            index += 1
    return found


def _labels(names: list[str], width: int) -> list[str]:
    """The derived table's column names: the select list's own where they are unique (the
    frontend reads a name inside a subquery that equals an output alias as ambiguous unless
    a column has it), `__dbsp_h<i>` for the others and the HAVING's columns."""
    folded = [fold(n) for n in names]
    own = [quote(n) if folded.count(fold(n)) == 1 and not fold(n).startswith(PREFIX) else "" for n in names]
    return [(own[i] if i < len(own) else "") or quote(f"{PREFIX}h{i}") for i in range(width)]


class _Rewrite:
    def __init__(self, conn: apsw.Connection, body: str, prefix: str, tokens: list[Token], clauses: Clauses) -> None:
        self.conn, self.body, self.prefix, self.clauses = conn, body, prefix, clauses
        self.having = list(clauses.having.tokens)
        keyword = next(i for i, t in enumerate(tokens) if t.start == self.having[0].start) - 1
        select_end = clauses.select.tokens[-1].end
        #: FROM … WHERE … GROUP BY …: the aggregate's own clauses, as written
        self.clauses_text = body[select_end : tokens[keyword].start].strip()
        self.items = [span for span in split_top_level(body, clauses.select.tokens) if span]

    def outer(self, names: list[str]) -> str | None:
        """The rewritten SELECT, or None where this pass does not apply."""
        if any(span.tokens[-1].kind == TokenType.STAR for span in self.items):
            return None  # `*`, `t.*`
        subqueries = _subqueries(self.having)
        for open_, close in subqueries:
            try:  # uncorrelated: SQLite runs it alone
                probe_columns(self.conn, self.prefix + _identifiers(self._text(self.having[open_ + 1 : close])))
            except Error:
                return None
        named = [item_alias(span) for span in self.items]
        columns = [self._item_text(span, alias) for span, alias in zip(self.items, named)]
        aliases: dict[str, list[int]] = {}  # SQLite binds a name to the first item with that alias
        for i, alias in enumerate(named):
            if alias:
                aliases.setdefault(fold(alias), []).append(i)
        skip = {i for open_, close in subqueries for i in range(open_, close + 1)}
        edits: list[tuple[int, int, int]] = []  # HAVING text [start, end) reads derived column i
        for call in find_aggregate_calls(self.body, self.having):
            edits.append((self.having[call.first].start, self.having[call.last - 1].end, len(columns)))
            columns.append(self._text(self.having[call.first : call.last]))
            skip.update(range(call.first, call.last))
        skipped = [(self.having[i].start, self.having[i].end) for i in skip]
        for start, end, parts in self._names():
            if any(lo <= start < hi for lo, hi in skipped):
                continue
            if self._is_column(parts):
                edits.append((start, end, len(columns)))
                columns.append(self.body[start:end])
            elif len(parts) == 1 and len(aliases.get(fold(parts[0]), [])) == 1:
                edits.append((start, end, aliases[fold(parts[0])][0]))
            else:
                return None  # (an alias two items have: the rewrite would have to know which)
        for index, token in enumerate(self.having):
            if index not in skip and token.text.lower() in ("true", "false") and self._is_column([token.text]):
                return None  # SQLite reads TRUE as a column where a table has one; sqlglot as a boolean
        for span in split_top_level(self.body, self.clauses.group.tokens):
            # (an ordinal or an alias names a select-list item, already a column)
            if not span:
                continue
            single = len(span.tokens) == 1 and span.tokens[0]
            if single and (single.kind == TokenType.NUMBER or not self._is_column([single.text])):
                continue
            columns.append(span.text)
        labels = _labels(names, len(columns))
        derived = ", ".join(f"{text} AS {labels[i]}" for i, text in enumerate(columns))
        lo, hi = self.having[0].start, self.having[-1].end
        condition = splice(self.body[lo:hi], [(s - lo, e - lo, labels[i]) for s, e, i in edits])
        shown = ", ".join(f"{labels[i]} AS {quote(name)}" for i, name in enumerate(names))
        return f"SELECT {shown} FROM (SELECT {derived} {self.clauses_text}) WHERE {condition}"

    def _text(self, tokens: list[Token]) -> str:
        return self.body[tokens[0].start : tokens[-1].end]

    def _item_text(self, span: Span, alias: str | None) -> str:
        """A select-list item without its `alias`."""
        tokens = list(span.tokens)
        if alias is not None:
            tokens = tokens[:-1]
            if tokens and tokens[-1].kind == TokenType.ALIAS:
                tokens = tokens[:-1]
        return self._text(tokens)

    def _names(self) -> list[tuple[int, int, list[str]]]:
        """Column references written in the HAVING: (start, end, their names), offsets in `body`."""
        lo, hi = self.having[0].start, self.having[-1].end
        found = []
        for node in parse_sqlite(self.body).find_all(exp.Column):
            if isinstance(node.this, exp.Star):
                continue
            written = (node.args.get("db"), node.args.get("table"), node.this)
            parts = [p for p in written if isinstance(p, exp.Identifier)]
            if not parts or "start" not in parts[0].meta or "end" not in parts[-1].meta:
                raise Error("unplaced name")
            start, end = parts[0].meta["start"], parts[-1].meta["end"] + 1
            if lo <= start < hi:
                found.append((start, end, [str(p.name) for p in parts]))
        return found

    def _is_column(self, parts: list[str]) -> bool:
        """Whether `[schema.][table.]name` is a column of the aggregate's FROM clause (a column
        wins over a select-list alias in HAVING)."""
        if not self.clauses.from_:
            return False
        name = ".".join(_backticked(p) for p in parts)
        try:
            probe_columns(self.conn, f"{self.prefix}SELECT {name} FROM {self.clauses.from_.text}")
        except Error:
            return False
        return True
