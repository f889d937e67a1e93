"""A subquery in the select list or HAVING of an aggregating SELECT: the aggregate becomes a
derived table, and the select list and HAVING expressions over it.

    SELECT dept, count(*) AS n, (SELECT name FROM d WHERE d.id = e.dept) FROM e GROUP BY dept
    HAVING sum(sal) > (SELECT avg(budget) FROM d)
    ⇒
    SELECT "dept" AS "dept", "n" AS "n", (SELECT name FROM d WHERE d.id = e.dept) AS "(SELECT …)"
    FROM (SELECT dept AS "dept", count(*) AS "n", NULL AS "__dbsp_h2", sum(sal) AS "__dbsp_h3"
          FROM e GROUP BY dept) AS "e"
    WHERE "__dbsp_h3" > (SELECT avg(budget) FROM d)

SQLite evaluates the select list and HAVING once per group, over the values of aggregate calls
and of columns outside any aggregate (GROUP BY columns). Each one they name outside their
subqueries becomes a column of the derived table, which the expressions read instead (in HAVING
a name that is no column is a select-list alias, as SQLite resolves it: the aliased column).
Every GROUP BY term is a column too, so the derived table's rows are its groups: `nodes` makes
it an internal node (a hidden materialized view), and `subqueries` maintains the outer query per
node row. A select-list item with a subquery keeps its position in the derived table as a NULL
under an internal name (GROUP BY ordinals count items), never under its own alias.

A correlated subquery reads the grouped table's columns: over one FROM item, the derived table
takes that item's alias and each plain-column GROUP BY term is a column under the column's own
name, so the subquery's references resolve, as SQLite resolves them, to the group's values; a
reference to any other column (SQLite would take it from an arbitrary row of the group) then
resolves to nothing and is refused by name. Over a join, the same for the one FROM item whose
columns the subqueries qualify (`alias.column`): the derived table takes its alias, and only its
columns keep their names (an unqualified outer name, or two items' columns, are refused).

Anything else (DISTINCT, LIMIT, a window, a set operation, `*`, a name this pass cannot place)
is left as written, for the later passes to refuse by name; so is a rewrite SQLite does not
accept with the same column names. An ORDER BY is dropped (a view is a bag).
"""

from __future__ import annotations

import re
from typing import NoReturn

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import PREFIX, fold, quote
from matview.sql.from_items import FromItem, read_from_items
from matview.sql.grouped_names import (
    column_references,
    identifiers,
    is_column,
    labels,
    outer_subqueries,
    subqueries,
)
from matview.sql.sqltext import (
    Clauses,
    Span,
    Token,
    depth_walk,
    excerpt,
    find_aggregate_calls,
    is_aggregating,
    item_alias,
    set_operators,
    splice,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.validate import probe_columns


def rewrite_grouped_subqueries(conn: apsw.Connection, body: str, prefix: str = "") -> str:
    """`body` (a SELECT after the WITH list `prefix`) with the subqueries of its select list
    and HAVING written over the aggregate as a derived table; unchanged when that is not
    possible (see the module docstring), `UnsupportedQuery` where SQLite's answer would be
    taken from an arbitrary row of a group."""
    tokens = tokenize(body)
    if not tokens or tokens[0].kind != TokenType.SELECT or set_operators(tokens):
        return body
    clauses = split_clauses(body, tokens)
    items = [span for span in split_top_level(body, clauses.select.tokens) if span]
    if not is_aggregating(body, clauses):
        # `SELECT (SELECT sum(t.x) FROM u) FROM t` aggregates in SQLite (the call is the outer
        # query's): refused, not maintained row by row
        for span in items:
            for open_, close in outer_subqueries(body, list(span.tokens)):
                text = Span(body, tuple(span.tokens[open_ + 1 : close])).text
                try:
                    probe_columns(conn, prefix + identifiers(text))
                except Error:
                    refuse_outer_aggregate(conn, prefix, text)
        return body
    in_items = any(outer_subqueries(body, list(span.tokens)) for span in items)
    if not (in_items or subqueries(list(clauses.having.tokens))):
        return body
    if clauses.distinct or clauses.limit or clauses.window:
        return body
    if subqueries(list(clauses.group.tokens)):
        # (a GROUP BY term is a column of the derived table: one with a subquery would leave
        # the derived table with a subquery in its select list, to be rewritten again, forever)
        return body
    try:
        names = probe_columns(conn, prefix + body)[0]
    except Error:
        return body
    try:
        rewrite = _Rewrite(conn, body, prefix, tokens, clauses, items)
        rewritten = rewrite.outer(names)
    except UnsupportedQuery:
        raise
    except Exception:
        return body
    if rewritten is None:
        return body
    try:
        same = probe_columns(conn, prefix + rewritten)[0] == names
    except Error as exc:
        missing = re.search(r"no such column: (\S+)", str(exc))
        if rewrite.correlated and missing and rewrite.others:
            raise UnsupportedQuery(
                f"column {missing.group(1)}, read inside a subquery of an aggregating query over a join, is not a "
                f"GROUP BY column of {rewrite.owner} (the one table whose group values such subqueries may read)"
            ) from None
        if rewrite.correlated and missing:
            raise UnsupportedQuery(
                f"column {missing.group(1)}, read inside a subquery of an aggregating query, is not a GROUP BY "
                "column: read bare, SQLite takes its value from an arbitrary row of the group; inside an aggregate "
                "there, the aggregate is the outer query's (neither is supported)"
            ) from None
        return body
    return rewritten if same else body


class _Rewrite:
    def __init__(
        self, conn: apsw.Connection, body: str, prefix: str, tokens: list[Token], clauses: Clauses, items: list[Span]
    ) -> None:
        self.conn, self.body, self.prefix, self.clauses, self.items = conn, body, prefix, clauses, items
        self.having = list(clauses.having.tokens)
        depths = depth_walk(tokens)
        ends = (TokenType.HAVING, TokenType.ORDER_BY)
        stop = next((i for i, (t, d) in enumerate(zip(tokens, depths)) if d == 0 and t.kind in ends), len(tokens))
        select_end = clauses.select.tokens[-1].end
        #: FROM … WHERE … GROUP BY …: the aggregate's own clauses, as written
        self.clauses_text = body[select_end : tokens[stop].start if stop < len(tokens) else len(body)].strip()
        self.from_text = clauses.from_.text if clauses.from_ else ""
        self.correlated: list[str] = []
        self.owner: str | None = None  # the FROM item whose name the derived table takes
        self.others: list[str] = []  # the other FROM items' aliases

    def _refuse_outer_aggregate(self, text: str) -> None:
        refuse_outer_aggregate(self.conn, self.prefix, text)

    def _is_column(self, parts: list[str]) -> bool:
        return is_column(self.conn, self.prefix, self.from_text, parts)

    def outer(self, names: list[str]) -> str | None:
        """The rewritten SELECT, or None where this pass does not apply."""
        if any(span.tokens[-1].kind == TokenType.STAR for span in self.items):
            return None  # `*`, `t.*`
        from_items = read_from_items(self.body, list(self.clauses.from_.tokens), check=False) if self.from_text else []
        single = from_items[0].alias if len(from_items) == 1 and from_items[0].named else None
        item_subqueries = {i: outer_subqueries(self.body, list(s.tokens)) for i, s in enumerate(self.items)}
        sub_items = {i for i, found in item_subqueries.items() if found}
        spans = [(list(self.items[i].tokens), o, c) for i in sub_items for o, c in item_subqueries[i]]
        spans += [(self.having, o, c) for o, c in subqueries(self.having)]
        for toks, open_, close in spans:
            text = self._text(toks[open_ + 1 : close])
            try:  # uncorrelated: SQLite runs it alone
                probe_columns(self.conn, self.prefix + identifiers(text))
            except Error:
                self.correlated.append(text)
                self._refuse_outer_aggregate(text)
        if self.correlated and single is None:
            single = self._join_owner(from_items)
        self.owner = single
        self.others = [i.alias for i in from_items if single is not None and fold(i.alias) != fold(single)]
        named = [item_alias(span) for span in self.items]
        columns = [
            "NULL" if i in sub_items else self._item_text(span, alias)
            for i, (span, alias) in enumerate(zip(self.items, named))
        ]
        fixed: dict[int, str] = {i: quote(f"{PREFIX}h{i}") for i in sub_items}
        for i, name in enumerate(names[: len(self.items)]):
            # an item under a column's name would hide that column from a correlated subquery
            if (
                i not in sub_items
                and self._names_a_column(name)
                and self._column_name(self.items[i], named[i]) != fold(name)
            ):
                fixed[i] = quote(f"{PREFIX}h{i}")
        aliases: dict[str, list[int]] = {}  # SQLite binds a name to the first item with that alias
        for i, alias in enumerate(named):
            if alias:
                aliases.setdefault(fold(alias), []).append(i)
        item_texts: dict[int, str] = {}
        for i in sub_items:
            span = self.items[i]
            toks = list(span.tokens)
            if named[i] is not None:
                toks = self._without_alias(toks)
            item_texts[i] = self._expression(toks, item_subqueries[i], columns, fixed, None)
        condition = ""
        if self.having:
            condition = self._expression(self.having, subqueries(self.having), columns, fixed, (aliases, sub_items))
        self._group_columns(columns, fixed, names, named, sub_items, aliases, single is not None)
        final = labels(names, len(columns))
        for i, label in fixed.items():
            final[i] = label
        if len({fold(label) for label in final}) != len(final):
            return None
        derived = ", ".join(f"{text} AS {final[i]}" for i, text in enumerate(columns))
        where = f" WHERE {self._resolve(condition, final)}" if self.having else ""
        listed = ", ".join(
            f"{self._resolve(item_texts[i], final) if i in sub_items else final[i]} AS {quote(names[i])}"
            for i in range(len(self.items))
        )
        alias = f" AS {quote(single)}" if single is not None else ""
        return f"SELECT {listed} FROM (SELECT {derived} {self.clauses_text}){alias}{where}"

    def _expression(
        self,
        toks: list[Token],
        found: list[tuple[int, int]],
        columns: list[str],
        fixed: dict[int, str],
        having: tuple[dict[str, list[int]], set[int]] | None,
    ) -> str:
        """`toks` (a select-list item or the HAVING) with its aggregate calls and the columns it
        names outside its subqueries read from derived columns: placeholders `\0<i>\0` for the
        column i, replaced by its label in `_resolve`."""
        skip = {i for open_, close in found for i in range(open_, close + 1)}
        edits: list[tuple[int, int, int]] = []  # text [start, end) reads derived column i
        for call in find_aggregate_calls(self.body, toks):
            if call.first in skip:
                continue
            edits.append((toks[call.first].start, toks[call.last - 1].end, len(columns)))
            columns.append(self._text(toks[call.first : call.last]))
            skip.update(range(call.first, call.last))
        skipped = [(toks[i].start, toks[i].end) for i in skip]
        lo, hi = toks[0].start, toks[-1].end
        for start, end, parts in column_references(self.body, lo, hi):
            if any(a <= start < b for a, b in skipped):
                continue
            if self._is_column(parts):
                edits.append((start, end, len(columns)))
                columns.append(self.body[start:end])
                continue
            if having is None or len(parts) != 1 or len(having[0].get(fold(parts[0]), [])) != 1:
                return_none()  # (an alias two items have: the rewrite would have to know which)
            item = having[0][fold(parts[0])][0]
            if item in having[1]:
                raise UnsupportedQuery(
                    f"HAVING reads {parts[0]}, the alias of a select-list subquery: not supported yet"
                )
            edits.append((start, end, item))
        for index, token in enumerate(toks):
            if index not in skip and token.text.lower() in ("true", "false") and self._is_column([token.text]):
                return_none()  # SQLite reads TRUE as a column where a table has one; sqlglot as a boolean
        return splice(self.body[lo:hi], [(s - lo, e - lo, f"\0{i}\0") for s, e, i in edits])

    @staticmethod
    def _resolve(text: str, final: list[str]) -> str:
        return re.sub("\0([0-9]+)\0", lambda m: final[int(m.group(1))], text)

    def _group_columns(
        self,
        columns: list[str],
        fixed: dict[int, str],
        names: list[str],
        named: list[str | None],
        sub_items: set[int],
        aliases: dict[str, list[int]],
        single: bool,
    ) -> None:
        """Every GROUP BY term is a derived column (the derived rows are the groups); over one
        FROM item, a plain column under its own name, for correlated subqueries to read."""
        for span in split_top_level(self.body, self.clauses.group.tokens):
            if not span:
                continue
            toks = list(span.tokens)
            target = toks
            if len(toks) == 1 and toks[0].kind == TokenType.NUMBER:
                ordinal = int(toks[0].text) - 1 if toks[0].text.isdigit() else -1
                if ordinal in sub_items:
                    raise UnsupportedQuery(f"GROUP BY {toks[0].text} names a select-list subquery: not supported yet")
                if not 0 <= ordinal < len(self.items):
                    return_none()
                target = (
                    self._without_alias(list(self.items[ordinal].tokens))
                    if named[ordinal]
                    else list(self.items[ordinal].tokens)
                )
            elif len(toks) == 1 and not self._is_column([toks[0].text]):
                index = aliases.get(fold(toks[0].text), [])
                if not index or index[0] in sub_items:
                    return_none()
                item = self.items[index[0]]
                target = self._without_alias(list(item.tokens)) if named[index[0]] else list(item.tokens)
            name = self._plain_column(target)
            if single and name is not None:
                # (an item under the column's own name, unique and not relabelled, is that column)
                shown = [i for i, n in enumerate(names) if i < len(self.items) and fold(n) == fold(name)]
                if not (len(shown) == 1 and shown[0] not in fixed and names.count(names[shown[0]]) == 1):
                    fixed[len(columns)] = quote(name)
                    columns.append(self._text(target))
                continue
            if target is not toks:
                continue  # (an ordinal or an alias names a select-list item, already a column)
            columns.append(span.text)

    def _names_a_column(self, name: str) -> bool:
        """Whether `name` is a column of a FROM item (of any, over a join: there it may be
        ambiguous unqualified, yet `alias.name` reads it)."""
        if self.owner is None:
            return self._is_column([name])
        return any(self._is_column([alias, name]) for alias in [self.owner, *self.others])

    def _join_owner(self, from_items: list[FromItem]) -> str:
        """Over a join, the one FROM item whose columns the correlated subqueries qualify: the
        derived table takes its alias (the others' columns then resolve to nothing: refused)."""
        aliases = {fold(i.alias): i.alias for i in from_items if i.named}
        used = {
            fold(parts[0])
            for text in self.correlated
            for _, _, parts in column_references(text, 0, len(text))
            if len(parts) == 2 and fold(parts[0]) in aliases
        }
        if len(used) != 1 or len(aliases) != len(from_items):
            raise UnsupportedQuery(
                f"a correlated subquery ({excerpt(self.correlated[0])}) in the select list or HAVING of an "
                "aggregating query over a join is supported where it reads the GROUP BY columns of one table, "
                "qualified by its name or alias (alias.column)"
            )
        return aliases[used.pop()]

    def _plain_column(self, toks: list[Token]) -> str | None:
        """The column's name when `toks` is a plain column reference of the FROM clause — of the
        table correlated subqueries read (`owner`), where there is one."""
        shaped = len(toks) == 1 or (len(toks) == 3 and toks[1].kind == TokenType.DOT)
        names = shaped and all(t.is_name and t.kind != TokenType.STRING for t in toks[::2])
        parts = [t.text for t in toks[::2]]
        if not (names and self._is_column(parts)):
            return None
        name = toks[-1].text
        if self.owner is None:
            return name
        if len(parts) == 2:
            return name if fold(parts[0]) == fold(self.owner) else None
        # unqualified: the owner's column, which no other FROM item has
        mine = self._is_column([self.owner, name]) and not any(self._is_column([o, name]) for o in self.others)
        return name if mine else None

    def _column_name(self, span: Span, alias: str | None) -> str | None:
        """The folded name of the column a select-list item is, if it is a plain column."""
        toks = self._without_alias(list(span.tokens)) if alias is not None else list(span.tokens)
        name = self._plain_column(toks)
        return fold(name) if name is not None else None

    def _text(self, tokens: list[Token]) -> str:
        return self.body[tokens[0].start : tokens[-1].end]

    @staticmethod
    def _without_alias(tokens: list[Token]) -> list[Token]:
        tokens = tokens[:-1]
        if tokens and tokens[-1].kind == TokenType.ALIAS:
            tokens = tokens[:-1]
        return tokens

    def _item_text(self, span: Span, alias: str | None) -> str:
        """A select-list item without its `alias`."""
        return self._text(self._without_alias(list(span.tokens)) if alias is not None else list(span.tokens))


class _NotRewritten(Exception):
    pass


def refuse_outer_aggregate(conn: apsw.Connection, prefix: str, text: str) -> None:
    """An aggregate call inside a correlated subquery `text` whose argument reads the outer row
    (`(SELECT count(t.dept) FROM u)`) is an aggregate of the OUTER query in SQLite: over a
    grouped rewrite's derived table it would collapse the query into one group, and row by row
    it would be no aggregate at all. Refused."""
    toks = tokenize(text)
    clauses = split_clauses(text, toks)
    scope = f" FROM {clauses.from_.text}" if clauses.from_.tokens else ""
    for call in find_aggregate_calls(text, toks):
        # (conservatively, no part may read the outer row, though SQLite makes a call that reads
        # the subquery's FROM anywhere the subquery's own)
        values, order = call.arguments_and_order()
        probes = [f"SELECT {text[v[0].start : v[-1].end]}{scope}" for v in values if v]
        if order:
            probes.append(f"SELECT 1{scope} ORDER BY {text[order[0][0].start : order[-1][-1].end]}")
        try:
            for probe in probes:
                probe_columns(conn, prefix + identifiers(probe))
        except Error as exc:
            if _not_the_outer_row(str(exc), text, clauses):
                raise  # (a misspelt name, a function this connection lacks: SQLite's own message)
            written = text[call.args[0].tokens[0].start : call.args[-1].tokens[-1].end] if call.args else "*"
            raise UnsupportedQuery(
                f"{call.name}({written}) inside a subquery ({excerpt(text)}) reads the outer query's row, "
                "which makes it an aggregate of the outer query in SQLite: not supported yet"
            ) from None


def _not_the_outer_row(message: str, text: str, clauses: Clauses) -> bool:
    """Whether a probe of subquery `text` failed for another reason than reading the outer row:
    a function SQLite lacks, or a column it lacks qualified by a table of the subquery's own FROM."""
    if "no such function" in message:
        return True
    found = re.search(r"no such column: (.+)\.[^.]+$", message)
    if found is None or not clauses.from_.tokens:
        return False
    items = read_from_items(text, list(clauses.from_.tokens), check=False)
    return fold(found.group(1)) in {fold(i.alias or i.name or "") for i in items}


def return_none() -> NoReturn:
    raise _NotRewritten
