"""The "inline" pass of the front end: FROM-subqueries, common table expressions (`WITH`)
and plain SQLite views that are select-project-join are flattened into one SELECT over
base tables, which the later passes compile as if the user had written it.

Flattening is what SQLite's own query flattener does, done on the text: each reference
to a derived table's column is replaced by the expression that computes it, the derived
table's base tables join the outer FROM (renamed `"<alias>.<inner alias>"`, so names never
clash), and its WHERE and every inner join's ON become conjuncts of the outer WHERE.
Each expression stays the user's own text. Two semantic details are kept:

* affinity: a derived column has its expression's affinity, in SQLite as in the text;
* collation: a derived column's collation is *implicit* (as a column's), while a `COLLATE`
  written in its expression is explicit once substituted, and explicit wins a comparison.
  A reference to such a column is refused rather than risk another comparison result.

Only inner joins are flattened (an outer join's padded side would need SQLite's NULL-row
wrapping), and only select-project-join bodies: an aggregating, DISTINCT or LIMITed
derived table is refused by name. A query with nothing to inline is returned unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import apsw
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview import names
from matview.errors import Error, UnsupportedQuery
from matview.names import fold, is_node, quote
from matview.sql.from_items import (
    OUTER_WORDS,
    Cte,
    FromItem,
    in_from_item,
    names_in_from,
    on_token_runs,
    read_from_items,
    read_with,
    strip_with,
    text_of,
    view_parts,
)
from matview.sql.sqltext import (
    SET_OPERATIONS,
    Clauses,
    Span,
    Token,
    depth_walk,
    excerpt,
    is_aggregating,
    matching_paren,
    parse_failure,
    parse_sqlite,
    splice,
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.validate import probe_columns
from matview.storage import catalog
from matview.storage.schema import ROWID_NAMES, view_sql
from matview.upstream import read_source

_MAX_DEPTH = 32  # views and CTEs nested deeper than this are refused (a cycle is refused first)


@dataclass(frozen=True)
class Inlined:
    """The flattened SELECT, and the plain views it expanded (name, CREATE VIEW text)."""

    sql: str
    views: tuple[tuple[str, str], ...] = ()
    #: the derived tables inlined without their ORDER BY ("FROM-subquery s"): SQLite does not
    #: flatten one into an aggregate, and hands its rows over in that order (`Plan.inner_order`)
    ordered: tuple[str, ...] = ()


@dataclass
class _Column:
    name: str
    text: str  # the expression over the flattened (renamed) base tables
    collated: bool = False  # its expression has an explicit COLLATE


@dataclass
class _Item:
    """A FROM item of one SELECT level: a base table, or a derived table already flattened."""

    alias: str
    columns: list[_Column]
    rowid: str | None = None  # base tables: the rowid reference
    hidden: set[str] = field(default_factory=set)  # columns USING/NATURAL merged into a left item
    sources: list[str] = field(default_factory=list)  # `main."t" AS "alias"` per base occurrence
    conditions: list[str] = field(default_factory=list)  # its WHERE (before any aggregation)
    group: list[str] | None = None  # an aggregating derived table: its GROUP BY terms…
    having: list[str] = field(default_factory=list)  # …and its HAVING conditions
    what: str = ""  # how messages name it ("CTE c")

    def column(self, name: str) -> _Column | None:
        lowered = fold(name)
        return next((c for c in self.columns if fold(c.name) == lowered), None)


@dataclass(frozen=True)
class _Name:
    """A name in the SELECT that resolves to no column of its level."""

    start: int
    end: int
    name: str
    qualified: bool
    quoted: bool


@dataclass
class _Level:
    """One SELECT after flattening its FROM."""

    distinct: bool
    columns: list[_Column]
    items: list[_Item]
    conditions: list[str]
    tail: str = ""  # the top level's own GROUP BY … HAVING … WINDOW …, rewritten
    group: list[str] | None = None  # an aggregating level: GROUP BY terms, rewritten
    having: list[str] = field(default_factory=list)


def inline_query(conn: apsw.Connection, sql: str) -> Inlined:
    """Flatten the FROM-subqueries, CTEs and plain views of `sql` (see the module docstring)."""
    inliner = _Inliner(conn)
    if not inliner.needs_flattening(sql, {}):
        return Inlined(strip_with(sql))
    level = inliner.level(sql, {}, "", None)
    sources = ", ".join(s for item in level.items for s in item.sources)
    conditions = [c for item in level.items for c in item.conditions] + level.conditions
    select = ", ".join(f"{c.text} AS {quote(c.name)}" if c.name else c.text for c in level.columns)
    where = " WHERE " + " AND ".join(f"({c})" for c in conditions) if conditions else ""
    tail = level.tail
    if level.group:
        tail += " GROUP BY " + ", ".join(level.group)
    if level.having:
        tail += " HAVING " + " AND ".join(f"({c})" for c in level.having)
    text = f"SELECT {'DISTINCT ' if level.distinct else ''}{select} FROM {sources}{where}{tail}"
    return Inlined(text, tuple(inliner.views.items()), tuple(inliner.ordered))


def plain_view_sql(conn: apsw.Connection, name: str) -> str | None:
    """The CREATE VIEW text of a plain (not materialized) view of the main schema."""
    text = view_sql(conn, name)
    if text is None:
        return None
    if (
        catalog.has_catalog(conn)
        and conn.execute(f"SELECT 1 FROM main.{quote(names.CATALOG)} WHERE name = ? COLLATE NOCASE", (name,)).fetchone()
    ):
        return None  # read as a source, as a table is (see `matview.upstream`)
    if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = ? COLLATE NOCASE", (name,)).fetchone():
        raise UnsupportedQuery(f"FROM {name}: a temporary table or view cannot be maintained")
    return text


class _Inliner:
    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.views: dict[str, str] = {}
        self.used_aliases: set[str] = set()
        self.ordered: list[str] = []  # (`Inlined.ordered`)

    # -- what is where -----------------------------------------------------------------
    def _plain_view(self, name: str) -> str | None:
        return plain_view_sql(self.conn, name)

    def _is_derived(self, reference: FromItem, ctes: dict[str, Cte]) -> bool:
        """Whether a FROM item is a FROM-subquery, a CTE or a plain view (not a table, not a node)."""
        if reference.body is not None:
            return True
        name = reference.name or ""
        return not is_node(name) and (fold(name) in ctes or self._plain_view(name) is not None)

    def needs_flattening(self, sql: str, ctes: dict[str, Cte]) -> bool:
        tokens = tokenize(sql)
        if tokens and tokens[0].kind == TokenType.WITH:
            ctes, sql = read_with(sql, tokens, ctes)
            tokens = tokenize(sql)
        if not tokens or tokens[0].kind != TokenType.SELECT:
            return False
        depths = depth_walk(tokens)
        if any(d == 0 and t.kind in SET_OPERATIONS for t, d in zip(tokens, depths)):
            return False
        clauses = split_clauses(sql, tokens)
        for reference in read_from_items(sql, list(clauses.from_.tokens), check=False):
            if reference.body is not None:
                return True
            if reference.name is not None and (
                fold(reference.name) in ctes or self._plain_view(reference.name) is not None
            ):
                return True
        return False

    # -- one SELECT --------------------------------------------------------------------
    def level(self, sql: str, ctes: dict[str, Cte], prefix: str, context: str | None, depth: int = 0) -> _Level:
        """Flatten one SELECT. `prefix` renames its base tables' aliases; `context` names the
        derived table it defines ("FROM-subquery s", "CTE c", "view v"), None at the top."""
        if depth > _MAX_DEPTH:
            raise UnsupportedQuery(f"{context}: views or CTEs nested more than {_MAX_DEPTH} deep")
        tokens = tokenize(sql)
        if tokens and tokens[0].kind == TokenType.WITH:
            ctes, sql = read_with(sql, tokens, ctes)
            tokens = tokenize(sql)
        where = f" in {context}" if context else ""
        depths = depth_walk(tokens)
        for token, d in zip(tokens, depths):
            if d == 0 and token.kind in SET_OPERATIONS:
                raise UnsupportedQuery(f"set operation {token.text.upper()}{where} is not supported yet")
        if not tokens or tokens[0].kind != TokenType.SELECT:
            raise UnsupportedQuery(f"{context or 'the view'}: only a SELECT can be inlined")
        clauses = split_clauses(sql, tokens)
        aggregates = is_aggregating(sql, clauses)
        if context is not None:
            self._refuse_non_spj(clauses, context)
            if clauses.order:
                self.ordered.append(context)
        self._refuse_other_subqueries(sql, tokens, clauses)
        items: list[_Item] = []
        conditions: list[str] = []
        ons: list[Span] = []
        references = read_from_items(sql, list(clauses.from_.tokens), check=True)
        for reference in references:
            if any(t.kind in OUTER_WORDS for t in reference.joined_by):
                # (named as the user wrote it: the derived table, not an internal node beside it)
                derived = [r for r in references if self._is_derived(r, ctes)]
                raise UnsupportedQuery(
                    f"an outer join with a FROM-subquery, CTE or view{where} is not supported yet (one that "
                    "aggregates, or keeps its one table's primary key among its columns, is): "
                    f"{(derived[0] if derived else reference).text}"
                )
            item = self._item(reference, ctes, prefix, depth)
            natural = any(t.kind == TokenType.NATURAL for t in reference.joined_by)
            merged = reference.using or []
            if natural:
                left_names = {fold(c.name) for i in items for c in i.columns if fold(c.name) not in i.hidden}
                merged = [c.name for c in item.columns if fold(c.name) in left_names]
            for name in merged:
                left = self._resolve_unqualified(items, name)
                right = item.column(name)
                if left is None or right is None:
                    raise Error(f"cannot join using column {name} - column not present in both tables")
                self._refuse_collated(left, name)
                self._refuse_collated(right, name)
                conditions.append(f"{left.text} = {right.text}")
                item.hidden.add(fold(name))
            items.append(item)
            if reference.on is not None:
                ons.append(reference.on)
        # ON conditions, WHERE, GROUP BY, HAVING: column references rewritten
        try:
            tree = parse_sqlite(sql)
        except sqlglot.errors.ParseError as exc:
            raise UnsupportedQuery(f"matview cannot analyze this SELECT: {parse_failure(exc)}") from None
        if not isinstance(tree, exp.Select):
            raise UnsupportedQuery(f"{context or 'the view'}: matview cannot analyze this SELECT")
        replacements, unresolved = self._column_replacements(sql, tree, clauses, items)
        select = (clauses.select.tokens[0].start, clauses.select.tokens[-1].end)
        in_select = [u for u in unresolved if select[0] <= u.start < select[1]]
        self._resolve_leftovers(sql, in_select, {}, replacements)
        named = self._select_list(sql, tree, clauses, items, replacements)
        # SQLite lets WHERE, ON, GROUP BY and HAVING name a select-list alias (a column wins)
        aliases = {fold(c.name): c.text for c, is_alias in named if is_alias}
        self._resolve_leftovers(sql, [u for u in unresolved if u not in in_select], aliases, replacements)
        for on in ons:
            conditions.append(self._rewrite(sql, on, replacements))
        if clauses.where:
            conditions.append(self._rewrite(sql, clauses.where, replacements))
        columns = [column for column, _ in named]
        distinct = clauses.distinct is not None and clauses.distinct.kind == TokenType.DISTINCT
        aggregated = [item for item in items if item.group is not None]
        if aggregated:
            # σ/π over one aggregating derived table is that aggregate with a larger HAVING and
            # other output expressions; joined, or aggregated again, it needs state of its own
            if len(items) > 1 or aggregates:
                raise UnsupportedQuery(
                    f"{aggregated[0].what} with GROUP BY or an aggregate, joined or aggregated again, "
                    "is not supported yet"
                )
            item = aggregated[0]
            # an aggregate without GROUP BY stays one (its outer select list may have no aggregate)
            having = [*item.having, *conditions] or (["1"] if not item.group else [])
            return _Level(distinct, columns, items, [], group=item.group, having=having)
        if context is None:
            tail = ""
            for keyword, span in (("GROUP BY", clauses.group), ("HAVING", clauses.having), ("WINDOW", clauses.window)):
                if span:
                    tail += f" {keyword} {self._rewrite(sql, span, replacements)}"
            if clauses.limit:
                raise UnsupportedQuery("LIMIT/OFFSET is not supported: a view's rows have no order")
            return _Level(distinct, columns, items, conditions, tail)
        if not aggregates:
            return _Level(distinct, columns, items, conditions)
        group = []
        for span in split_top_level(sql, clauses.group.tokens) if clauses.group else []:
            if len(span.tokens) == 1 and span.tokens[0].kind == TokenType.NUMBER and span.tokens[0].text.isdigit():
                position = int(span.tokens[0].text)
                if not 1 <= position <= len(columns):
                    raise Error(f"GROUP BY term {position} out of range")
                text = columns[position - 1].text
                group.append(text if _is_bare(text) else f"({text})")
            else:
                group.append(self._rewrite(sql, span, replacements))
        having = [self._rewrite(sql, clauses.having, replacements)]
        return _Level(distinct, columns, items, conditions, group=group, having=having if clauses.having else [])

    def _refuse_non_spj(self, clauses: Clauses, context: str) -> None:
        """What a derived table may not have (GROUP BY and aggregates are checked by `level`)."""
        construct = None
        if clauses.distinct is not None and clauses.distinct.kind == TokenType.DISTINCT:
            construct = "DISTINCT"
        elif clauses.limit:
            construct = "LIMIT"
        elif clauses.window or any(t.kind == TokenType.OVER for t in clauses.select.tokens):
            construct = "a window function"
        if construct is not None:
            raise UnsupportedQuery(
                f"{context} with {construct} is not supported yet (select-project-join subqueries, CTEs "
                "and views are inlined, and an aggregating one read alone)"
            )

    def _refuse_other_subqueries(self, sql: str, tokens: list[Token], clauses: Clauses) -> None:
        """A subquery outside FROM (IN, EXISTS, scalar) is the next issue's work."""
        from_range = range(0)
        if clauses.from_:
            from_range = range(clauses.from_.tokens[0].start, clauses.from_.tokens[-1].end)
        for index, token in enumerate(tokens[:-1]):
            if token.kind != TokenType.L_PAREN or tokens[index + 1].kind not in (TokenType.SELECT, TokenType.WITH):
                continue
            if token.start in from_range and in_from_item(clauses.from_.tokens, token):
                continue
            close = matching_paren(tokens, index)
            raise UnsupportedQuery(f"subquery {excerpt(sql[token.start : tokens[close].end])} is not supported yet")

    def _item(self, reference: FromItem, ctes: dict[str, Cte], prefix: str, depth: int) -> _Item:
        alias = reference.alias
        inner_prefix = f"{prefix}{alias}."
        if reference.body is not None:
            named = f"FROM-subquery {alias}" if reference.named else "a FROM-subquery"
            level = self.level(reference.body, ctes, inner_prefix, named, depth + 1)
            return self._derived(alias, level, self._sqlite_names(reference.body, ctes), named)
        assert reference.name is not None
        cte = None if reference.schema else ctes.get(fold(reference.name))
        if cte is not None:
            what = f"CTE {cte.name}"
            if fold(reference.name) in {fold(n) for n in names_in_from(cte.body)}:
                raise UnsupportedQuery(f"recursive CTE {cte.name} is not supported")
            level = self.level(cte.body, cte.scope, inner_prefix, what, depth + 1)
            return self._derived(alias, level, cte.columns or self._sqlite_names(cte.body, cte.scope), what)
        view_sql = self._plain_view(reference.name)
        if view_sql is not None:
            view_name, column_names, body = view_parts(view_sql)
            self.views[view_name] = view_sql
            level = self.level(body, {}, inner_prefix, f"view {view_name}", depth + 1)
            names_ = column_names or self._sqlite_names(f"SELECT * FROM main.{quote(view_name)}", {})
            return self._derived(alias, level, names_, f"view {view_name}")
        table = read_source(self.conn, reference.name)
        final = f"{prefix}{alias}"
        if fold(final) in self.used_aliases:
            raise UnsupportedQuery(f"FROM {reference.text}: the alias {final} is used twice once inlined")
        self.used_aliases.add(fold(final))
        qualifier = quote(final)
        columns = [_Column(c.name, f"{qualifier}.{quote(c.name)}") for c in table.columns]
        rowid = f"{qualifier}.{table.rowid_name}" if table.has_rowid else None
        return _Item(alias, columns, rowid, sources=[f"main.{quote(table.name)} AS {qualifier}"])

    def _sqlite_names(self, body: str, ctes: dict[str, Cte]) -> tuple[str, ...]:
        """The names SQLite gives a derived table's columns (`x`, `x:1` for a repeat, `k` for
        `k COLLATE BINARY`, …): asked of SQLite itself, with the CTEs the body can see."""
        prefix = ""
        if ctes:
            definitions = [
                f"{quote(c.name)}{'(' + ', '.join(map(quote, c.columns)) + ')' if c.columns else ''} AS (\n{c.body}\n)"
                for c in ctes.values()
            ]
            prefix = "WITH " + ", ".join(definitions) + " "
        try:
            return tuple(probe_columns(self.conn, f"{prefix}SELECT * FROM (\n{body}\n)")[0])
        except Error as exc:
            raise UnsupportedQuery(f"matview cannot name the columns of a derived table: {exc}") from None

    @staticmethod
    def _derived(alias: str, level: _Level, names_: tuple[str, ...], what: str) -> _Item:
        if len(names_) != len(level.columns):
            raise Error(f"{alias} has {len(level.columns)} values for {len(names_)} columns")
        columns = [_Column(name, c.text, c.collated) for name, c in zip(names_, level.columns)]
        sources = [s for item in level.items for s in item.sources]
        conditions = [c for item in level.items for c in item.conditions] + level.conditions
        return _Item(
            alias,
            columns,
            None,
            sources=sources,
            conditions=conditions,
            what=what,
            group=level.group,
            having=level.having,
        )

    # -- column references -------------------------------------------------------------
    @staticmethod
    def _resolve_unqualified(items: list[_Item], name: str) -> _Column | None:
        for item in items:
            if fold(name) in item.hidden:
                continue
            found = item.column(name)
            if found is not None:
                return found
        if name.lower() in ROWID_NAMES:
            if len(items) != 1 or items[0].rowid is None:
                raise UnsupportedQuery(f"{name} next to a FROM-subquery, CTE or view: qualify it with its table")
            return _Column(name, items[0].rowid)
        return None

    @staticmethod
    def _refuse_collated(column: _Column, written: str) -> None:
        if column.collated:
            raise UnsupportedQuery(
                f"column {written} of a FROM-subquery, CTE or view has a COLLATE clause: inlined, its collation "
                "would take precedence in comparisons where SQLite's would not; not supported yet"
            )

    def _column_replacements(
        self, sql: str, tree: exp.Expression, clauses: Clauses, items: list[_Item]
    ) -> tuple[dict[int, tuple[int, str, bool]], list[_Name]]:
        """For each column reference of this level (outside FROM items), keyed by its start
        offset: (end offset, replacement text, collated); and the names that resolve to no
        column of this level (select-list aliases, double-quoted strings)."""
        regions = [s for s in (clauses.select, clauses.where, clauses.group, clauses.having, clauses.window) if s]
        regions += [Span(sql, tuple(run)) for run in on_token_runs(list(clauses.from_.tokens))]
        ranges = [(s.tokens[0].start, s.tokens[-1].end) for s in regions]
        found: dict[int, tuple[int, str, bool]] = {}
        unresolved: list[_Name] = []
        for node in tree.find_all(exp.Column):
            if isinstance(node.this, exp.Star):
                continue
            written = (node.args.get("db"), node.args.get("table"), node.this)
            parts = [p for p in written if isinstance(p, exp.Identifier)]
            if not parts or "start" not in parts[0].meta:
                continue
            if "end" not in parts[-1].meta:
                raise UnsupportedQuery(f"matview cannot analyze the name {node.name} in this SELECT")
            start, end = parts[0].meta["start"], parts[-1].meta["end"] + 1
            if not any(lo <= start < hi for lo, hi in ranges):
                continue
            column = self._resolve(items, node)
            if column is None:
                unresolved.append(_Name(start, end, node.name, bool(node.table), node.this.quoted))
                continue
            found[start] = (end, column.text, column.collated)
        return found, unresolved

    @staticmethod
    def _resolve_leftovers(
        sql: str, names_: list[_Name], aliases: dict[str, str], replacements: dict[int, tuple[int, str, bool]]
    ) -> None:
        """A name no column of this level has: a select-list alias becomes its expression; a
        double-quoted one is a string (SQLite's fallback); anything else is refused — left
        bare, it could bind to a column of another level once all are in one FROM."""
        for name in names_:
            if not name.qualified and fold(name.name) in aliases:
                replacements[name.start] = (name.end, aliases[fold(name.name)], False)
            elif not name.qualified and name.quoted:
                replacements[name.start] = (name.end, "'" + name.name.replace("'", "''") + "'", False)
            else:
                raise UnsupportedQuery(
                    f"matview cannot resolve {sql[name.start : name.end]} once the FROM-subqueries, CTEs and "
                    "views are inlined"
                )

    def _resolve(self, items: list[_Item], node: exp.Column) -> _Column | None:
        qualifier, name = node.table, node.name
        if not qualifier:
            return self._resolve_unqualified(items, name)
        for item in items:
            if fold(item.alias) == fold(qualifier):
                found = item.column(name)
                if found is None and name.lower() in ROWID_NAMES:
                    if item.rowid is None:
                        raise UnsupportedQuery(f"{qualifier}.{name}: a FROM-subquery, CTE or view has no rowid")
                    return _Column(name, item.rowid)
                return found
        return None

    def _rewrite(self, sql: str, span: Span, replacements: dict[int, tuple[int, str, bool]]) -> str:
        if not span:
            return ""
        lo, hi = span.tokens[0].start, span.tokens[-1].end
        edits = []
        for start, (end, text, collated) in replacements.items():
            if lo <= start < hi:
                if collated:
                    self._refuse_collated(_Column("", "", True), sql[start:end])
                edits.append((start - lo, end - lo, text if _is_bare(text) else f"({text})"))
        return splice(sql[lo:hi], edits)

    def _select_list(
        self,
        sql: str,
        tree: exp.Select,
        clauses: Clauses,
        items: list[_Item],
        replacements: dict[int, tuple[int, str, bool]],
    ) -> list[tuple[_Column, bool]]:
        """The select list, `*` expanded; each column with whether the user named it (AS)."""
        spans = split_top_level(sql, clauses.select.tokens)
        if len(spans) != len(tree.expressions):
            raise UnsupportedQuery("matview cannot analyze this select list")
        columns: list[tuple[_Column, bool]] = []
        for span, node in zip(spans, tree.expressions):
            toks = span.tokens
            if isinstance(node, exp.Star):
                for item in items:
                    columns += [(_copy(c), False) for c in item.columns if fold(c.name) not in item.hidden]
                continue
            if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
                matches = [i for i in items if fold(i.alias) == fold(node.table)]
                if not matches:
                    raise Error(f"no such table: {node.table}")
                columns += [(_copy(c), False) for c in matches[0].columns]
                continue
            alias = None
            if isinstance(node, exp.Alias):
                alias, toks = node.alias, toks[:-1]
                if toks and toks[-1].kind == TokenType.ALIAS:
                    toks = toks[:-1]
            collated = any(t.kind == TokenType.COLLATE for t in toks)
            text = self._rewrite(sql, Span(sql, toks), replacements)
            name = alias if alias is not None else _implicit_name(sql, toks, items)
            columns.append((_Column(name, text, collated), alias is not None))
        return columns


def _copy(column: _Column) -> _Column:
    return _Column(column.name, column.text, column.collated)


def _implicit_name(sql: str, toks: tuple[Token, ...], items: list[_Item]) -> str:
    """SQLite's name of an unaliased result column: a column's own name, else the text."""
    if len(toks) == 1 and toks[0].is_name:
        column = _Inliner._resolve_unqualified(items, toks[0].text)
        return column.name if column is not None else toks[0].text
    if len(toks) == 3 and toks[1].kind == TokenType.DOT and toks[2].is_name:
        for item in items:
            if fold(item.alias) == fold(toks[0].text):
                column = item.column(toks[2].text)
                if column is not None:
                    return column.name
        return toks[2].text
    return text_of(sql, toks)


def _is_bare(text: str) -> bool:
    """A qualified column reference `"a"."b"` needs no parentheses (and keeps being a column)."""
    toks = tokenize(text)
    return len(toks) == 3 and toks[1].kind == TokenType.DOT and toks[0].is_name and toks[2].is_name
