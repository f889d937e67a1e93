"""The FROM clause of a view's SELECT: the base tables it reads, the names it knows them
by, and how a column name resolves — the "resolve" pass of the front end.

Each table reference is an *occurrence*: a self-join reads one table twice, and DBSP's
bilinear rule (Thm 3.4) treats the two as two inputs. Every reference is cut out of the
user's text and replaced by a placeholder, so a delta term can put a delta log, the base
table or its old state in its place while the join conditions stay exactly as written.

Supported: comma lists, `[INNER] JOIN … ON`, `CROSS JOIN`, `NATURAL JOIN`, `JOIN … USING`,
over base tables of the main schema, and one `LEFT`/`RIGHT [OUTER] JOIN … ON` between two
tables (its LEFT/RIGHT word becomes a placeholder: some delta terms need the inner join). FULL
and wider outer joins, subqueries and table-valued functions in FROM are refused by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import apsw
from sqlglot.tokens import TokenType

from matview.errors import UnsupportedQuery
from matview.names import fold, quote
from matview.plan import Template
from matview.sql.from_items import JOIN_WORDS, OUTER_WORDS
from matview.sql.sqltext import Token, depth_walk, excerpt
from matview.storage.schema import ROWID_NAMES, Column, TableInfo, refuse_unstable_identity, refuse_view_root
from matview.upstream import read_source

#: tokens that end a table reference's `name [AS] alias`
_AFTER_REFERENCE = {TokenType.COMMA, TokenType.ON, TokenType.USING, *JOIN_WORDS, *OUTER_WORDS}
_JOIN_WORDS = (
    TokenType.NATURAL,
    TokenType.CROSS,
    TokenType.INNER,
    TokenType.LEFT,
    TokenType.RIGHT,
    TokenType.FULL,
    TokenType.OUTER,
)
_OUTER_KINDS = {TokenType.LEFT: "LEFT", TokenType.RIGHT: "RIGHT", TokenType.FULL: "FULL"}
#: the placeholder standing where the user wrote LEFT/RIGHT [OUTER]: that word, or "" for a term
#: that needs the inner join of the same operands
OUTER = "outer"


def source_placeholder(index: int) -> str:
    """The template placeholder of occurrence `index`."""
    return f"source{index}"


@dataclass(frozen=True)
class Occurrence:
    table: TableInfo
    alias: str  # the name the query knows it by: its alias, else the table's name


@dataclass(frozen=True)
class ColumnRef:
    """A column a name resolves to: of which occurrence, and which column (None: the rowid)."""

    occurrence: int
    column: Column | None

    @property
    def name(self) -> str:
        return self.column.name if self.column is not None else "rowid"


@dataclass(frozen=True)
class FromClause:
    occurrences: tuple[Occurrence, ...]
    hidden: tuple[frozenset[str], ...]  # per occurrence: lower-cased columns USING/NATURAL merged away
    template: Template  # the clause's text, each reference a placeholder `source<i> AS "alias"`
    outer_on: str = ""  # `A LEFT|RIGHT JOIN B ON <outer_on>`: the condition as written (two occurrences)
    outer_kind: str = ""  # "LEFT", "RIGHT" or "FULL"
    root_recompute: bool = False  # outer joins beyond one `A LEFT JOIN B ON …`: maintained per root row
    #: root_recompute: the occurrence every output row comes from one row of (the first; after a
    #: RIGHT JOIN, its right table)
    root: int = 0

    @property
    def preserved(self) -> int:
        """The occurrence an outer join keeps every row of."""
        if self.root_recompute:
            return self.root
        return 1 if self.outer_kind == "RIGHT" else 0

    @property
    def tables(self) -> list[str]:
        """The distinct base tables, in order of first reference."""
        seen: dict[str, None] = {}
        for occurrence in self.occurrences:
            seen.setdefault(occurrence.table.name, None)
        return list(seen)

    @property
    def is_join(self) -> bool:
        return len(self.occurrences) > 1

    def occurrence_named(self, qualifier: str) -> int | None:
        lowered = fold(qualifier)
        for index, occurrence in enumerate(self.occurrences):
            if fold(occurrence.alias) == lowered:
                return index
        return None

    def resolve(self, qualifier: str | None, name: str) -> ColumnRef | None:
        """The column `[qualifier.]name` names, as SQLite resolves it: an unqualified name
        merged by USING/NATURAL is the leftmost table's."""
        if qualifier is not None:
            index = self.occurrence_named(qualifier)
            return None if index is None else self._column(index, name)
        for index in range(len(self.occurrences)):
            if fold(name) in self.hidden[index]:
                continue
            found = self._column(index, name)
            if found is not None and (found.column is not None or not self.is_join):
                return found
        return None

    def _column(self, index: int, name: str) -> ColumnRef | None:
        table = self.occurrences[index].table
        column = table.column(name)
        if column is not None:
            return ColumnRef(index, column)
        if name.lower() in ROWID_NAMES and table.has_rowid:
            # an INTEGER PRIMARY KEY is the rowid, with the column's type
            return ColumnRef(index, table.column(table.ipk) if table.ipk else None)
        return None

    def star(self, qualifier: str | None) -> list[ColumnRef]:
        """The columns `*` (or `qualifier.*`) stands for, in SQLite's order."""
        if qualifier is not None:
            index = self.occurrence_named(qualifier)
            indexes = [] if index is None else [index]
        else:
            indexes = list(range(len(self.occurrences)))
        return [
            ColumnRef(index, column)
            for index in indexes
            for column in self.occurrences[index].table.columns
            if qualifier is not None or fold(column.name) not in self.hidden[index]
        ]


def read_from_clause(conn: apsw.Connection, sql: str, tokens: Sequence[Token]) -> FromClause:
    """Cut the FROM clause (`tokens`, after the FROM keyword) into table references."""
    if not tokens:
        raise UnsupportedQuery("a SELECT without FROM is not supported: a view needs a base table")
    depths = depth_walk(tokens)
    occurrences: list[Occurrence] = []
    hidden: list[frozenset[str]] = []
    template: list[str] = []  # literal text and placeholders, alternating
    literal = ""
    position = tokens[0].start  # the text up to here is already in `template` or `literal`
    index = 0
    natural = False
    outer = outer_kind = ""
    outer_at: int | None = None
    outer_on = ""
    outer_kinds: list[str] = []  # the outer join word before each occurrence after the first
    kinds: list[str] = []  # per occurrence: the outer join word before it, or ""
    while index < len(tokens):
        token = tokens[index]
        if token.kind == TokenType.L_PAREN and depths[index] == 0:
            raise UnsupportedQuery(f"FROM ({excerpt(_text(sql, tokens[index:]))}): a subquery or parenthesized join")
        first = index
        name_index = index
        if index + 2 < len(tokens) and tokens[index + 1].kind == TokenType.DOT:
            if token.text.lower() != "main":
                qualified = f"{token.text}.{tokens[index + 2].text}"
                raise UnsupportedQuery(f"table {qualified}: only tables of the main database are supported")
            name_index = index + 2
        index = name_index + 1
        if index < len(tokens) and tokens[index].kind == TokenType.L_PAREN:
            raise UnsupportedQuery(f"FROM {tokens[name_index].text}(…): table-valued functions are not supported")
        alias = tokens[name_index].text
        if index < len(tokens) and tokens[index].kind == TokenType.ALIAS:
            index += 1
        if index < len(tokens) and tokens[index].kind not in _AFTER_REFERENCE and tokens[index].is_name:
            if tokens[index].text.upper() in ("INDEXED", "NOT"):
                raise UnsupportedQuery(f"FROM {tokens[name_index].text}: INDEXED BY and table hints are not supported")
            alias = tokens[index].text
            index += 1
        table = read_source(conn, tokens[name_index].text)
        columns = {fold(c.name) for c in table.columns}
        merged: set[str] = set()
        template += [literal + sql[position : tokens[first].start], source_placeholder(len(occurrences))]
        literal = f" AS {quote(alias)}"
        if natural:
            # NATURAL is JOIN … USING (the common columns): spelled out, because a delta term's
            # sources carry columns of their own (weights) that NATURAL would join on too
            merged = {fold(x.name) for o in occurrences for x in o.table.columns} & columns
            common = [quote(c.name) for c in table.columns if fold(c.name) in merged]
            literal += f" USING ({', '.join(common)})" if common else ""
        position = tokens[index - 1].end
        if outer:
            outer_at, outer_kind = len(occurrences), outer
            outer_kinds.append(outer)
        occurrences.append(Occurrence(table, alias))
        kinds.append(outer)
        natural, outer = False, ""
        on_start: int | None = None
        # the join operator and condition up to the next reference
        while index < len(tokens) and not (
            depths[index] == 0 and tokens[index].kind in (TokenType.COMMA, TokenType.JOIN)
        ):
            kind = tokens[index].kind
            if depths[index] == 0 and kind == TokenType.USING:
                close = index + 1
                while close < len(tokens) and tokens[close].kind != TokenType.R_PAREN:
                    close += 1
                merged |= {fold(t.text) for t in tokens[index + 2 : close] if t.is_name}
            if depths[index] == 0 and kind == TokenType.ON and on_start is None:
                on_start = index + 1
            index += 1
        if outer_at == len(occurrences) - 1 and on_start is not None:
            on_end = index
            while on_end > on_start and depths[on_end - 1] == 0 and tokens[on_end - 1].kind in _JOIN_WORDS:
                on_end -= 1
            outer_on = _text(sql, tokens[on_start:on_end])
        if index < len(tokens):
            # joins at depth 0 start the next reference: NATURAL, CROSS, INNER belong to it
            separator = index
            back = index - 1
            while back >= 0 and depths[back] == 0 and tokens[back].kind in _JOIN_WORDS:
                natural = natural or tokens[back].kind == TokenType.NATURAL
                outer = outer or _OUTER_KINDS.get(tokens[back].kind, "")
                back -= 1
            # CROSS JOIN pins the left table as the outer loop, a plain JOIN lets the delta lead;
            # NATURAL becomes USING (above); LEFT/RIGHT [OUTER] becomes a placeholder
            for word in range(back + 1, separator):
                kind = tokens[word].kind
                if kind in (TokenType.CROSS, TokenType.NATURAL, TokenType.OUTER, *_OUTER_KINDS):
                    literal += sql[position : tokens[word].start]
                    position = tokens[word].end
                if kind in _OUTER_KINDS:
                    template += [literal, OUTER]
                    literal = " "
            index += 1
        hidden.append(frozenset(merged))
    template.append(literal + sql[position : tokens[-1].end])
    # a materialized view (or node) in `A LEFT|RIGHT JOIN B ON …` has no key to pad by: per row of
    # the preserved side (its root)
    view_in_left = outer_kind in ("LEFT", "RIGHT") and any(o.table.materialized for o in occurrences)
    if outer_at is not None and (len(occurrences) != 2 or hidden[1] or not outer_on or view_in_left):
        if "FULL" in outer_kinds:
            raise UnsupportedQuery(
                "a FULL JOIN is maintained between two tables joined by ON (`A FULL JOIN B ON …`); "
                "with more tables, USING or NATURAL it is not supported yet"
            )
        # every output row comes from one row of its root: the first table, or the right table of
        # the last RIGHT JOIN (joins nest to the left: a RIGHT JOIN keeps its right side's rows only)
        root = max((i for i, kind in enumerate(kinds) if kind == "RIGHT"), default=0)
        if any(kind == "RIGHT" and hidden[i] for i, kind in enumerate(kinds)):
            raise UnsupportedQuery("a RIGHT JOIN with USING or NATURAL is not supported yet (join it by ON)")
        joined = "RIGHT" if "RIGHT" in outer_kinds else "LEFT"
        if joined == "RIGHT":
            template = _outer_words_written(template, outer_kinds)
        if len(occurrences) != 2 or hidden[1] or not outer_on:
            shape = f"a {joined} JOIN of three or more tables (or with USING/NATURAL)"
        else:
            shape = f"a {joined} JOIN with a materialized view or an aggregating derived table"
        refuse_view_root(occurrences[root].table, shape)
        # (rows are kept per root row, by its key; a table after it is only searched for the roots
        # a change reaches, through the joins up to it, where a superset of its old state is as
        # good: `partition.true_old_source`; one before a RIGHT JOIN's root may decide a later
        # join by not matching, so it keeps the rule)
        for index, occurrence in enumerate(occurrences):
            if index <= root or occurrence.table.materialized:
                refuse_unstable_identity(occurrence.table, shape)
        return FromClause(
            tuple(occurrences), tuple(hidden), tuple(template), outer_kind="LEFT", root_recompute=True, root=root
        )
    return FromClause(tuple(occurrences), tuple(hidden), tuple(template), outer_on, outer_kind)


def _outer_words_written(template: list[str], kinds: list[str]) -> list[str]:
    """The template with each outer join placeholder replaced by the word the user wrote (a view
    maintained per root row runs its FROM clause as written: LEFT and RIGHT both)."""
    words = iter(kinds)
    merged: list[str] = [template[0]]
    for position in range(1, len(template), 2):
        placeholder, literal = template[position], template[position + 1]
        if placeholder == OUTER:
            merged[-1] += f"{next(words)} {literal}"
        else:
            merged += [placeholder, literal]
    return merged


def _text(sql: str, tokens: Sequence[Token]) -> str:
    return sql[tokens[0].start : tokens[-1].end] if tokens else ""
