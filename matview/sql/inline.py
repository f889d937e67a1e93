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

Inner joins are flattened. A LEFT JOIN of the view's own FROM clause stays a LEFT JOIN, its
item's conditions (the derived table's WHERE, the ON, USING's equalities) its ON: `c LEFT
JOIN (SELECT k, v FROM t WHERE p) s ON q` is `c LEFT JOIN t ON q AND p`, both padding c's
unmatched rows with NULLs — when the derived table reads one table and its columns are that
table's columns (an expression would not be NULL on a padded row). RIGHT and FULL JOINs
beside a derived table, and outer joins inside one, are refused (the nodes pass makes the
latter nodes). Only select-project-join bodies are flattened: an aggregating, DISTINCT or
LIMITed derived table is refused by name. A query with nothing to inline is returned unchanged.
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
    read_from_items,
    read_with,
    strip_with,
    view_parts,
)
from matview.sql.inline_names import (
    Column,
    Item,
    collated_as_derived,
    column_replacements,
    is_bare,
    keeps_a_column_type,
    refuse_collated,
    resolve_leftovers,
    resolve_unqualified,
    rewrite,
    select_list,
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
    split_clauses,
    split_top_level,
    tokenize,
)
from matview.sql.validate import probe_columns
from matview.storage import catalog
from matview.storage.schema import view_sql
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
class _Level:
    """One SELECT after flattening its FROM."""

    distinct: bool
    columns: list[Column]
    items: list[Item]
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
    sources = ""
    for item in level.items:
        for source in item.sources:
            if item.left_on is not None:
                sources += f" LEFT JOIN {source} ON {item.left_on}"
            else:
                sources += f"{', ' if sources else ''}{source}"
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
        for at, (token, d) in enumerate(zip(tokens, depths)):
            if d == 0 and token.kind in SET_OPERATIONS:
                after = tokens[at + 1].text.upper() if at + 1 < len(tokens) else ""
                spelled = f"{token.text.upper()} {after}" if after in ("ALL", "DISTINCT") else token.text.upper()
                hint = ", read through a SELECT over it," if context else ""
                supported = " (a CTE or FROM-subquery that is the set operation itself is)" if context else ""
                raise UnsupportedQuery(f"set operation {spelled}{where}{hint} is not supported yet{supported}")
        if not tokens or tokens[0].kind != TokenType.SELECT:
            raise UnsupportedQuery(f"{context or 'the view'}: only a SELECT can be inlined")
        clauses = split_clauses(sql, tokens)
        aggregates = is_aggregating(sql, clauses)
        if context is not None:
            self._refuse_non_spj(clauses, context)
            if clauses.order:
                self.ordered.append(context)
        self._refuse_other_subqueries(sql, tokens, clauses)
        items: list[Item] = []
        conditions: list[str] = []
        ons: list[tuple[int, Span]] = []  # ON conditions, by the position of their item
        references = read_from_items(sql, list(clauses.from_.tokens), check=True)
        # LEFT JOINs stay joins of the top level (below); RIGHT and FULL JOINs are refused
        left_only = context is None and not any(
            t.kind in (TokenType.RIGHT, TokenType.FULL) for r in references for t in r.joined_by
        )
        left_ons: dict[int, list[str]] = {}  # a LEFT JOINed item's conditions, by its position
        for reference in references:
            left_joined = any(t.kind in OUTER_WORDS for t in reference.joined_by)
            if left_joined and not left_only:
                # (named as the user wrote it: the derived table, not an internal node beside it)
                derived = [r for r in references if self._is_derived(r, ctes)]
                raise UnsupportedQuery(
                    f"an outer join with a FROM-subquery, CTE or view{where} is not supported yet (one that "
                    "aggregates, or keeps its one table's primary key among its columns, is; so is a LEFT "
                    "JOIN of the view's own FROM clause): "
                    f"{(derived[0] if derived else reference).text}"
                )
            item = self._item(reference, ctes, prefix, depth)
            if left_joined:
                _pad_like_sqlite(item, reference)
                left_ons[len(items)] = item.conditions
                item.conditions = []
            natural = any(t.kind == TokenType.NATURAL for t in reference.joined_by)
            merged = reference.using or []
            if natural:
                left_names = {fold(c.name) for i in items for c in i.columns if fold(c.name) not in i.hidden}
                merged = [c.name for c in item.columns if fold(c.name) in left_names]
            for name in merged:
                left = resolve_unqualified(items, name)
                right = item.column(name)
                if left is None or right is None:
                    raise Error(f"cannot join using column {name} - column not present in both tables")
                refuse_collated(left, name)
                refuse_collated(right, name)
                left_ons.get(len(items), conditions).append(f"{collated_as_derived(left.text)} = {right.text}")
                item.hidden.add(fold(name))
            if reference.on is not None:
                ons.append((len(items), reference.on))
            items.append(item)
        # ON conditions, WHERE, GROUP BY, HAVING: column references rewritten
        try:
            tree = parse_sqlite(sql)
        except sqlglot.errors.ParseError as exc:
            raise UnsupportedQuery(f"matview cannot analyze this SELECT: {parse_failure(exc)}") from None
        if not isinstance(tree, exp.Select):
            raise UnsupportedQuery(f"{context or 'the view'}: matview cannot analyze this SELECT")
        replacements, unresolved = column_replacements(sql, tree, clauses, items)
        select = (clauses.select.tokens[0].start, clauses.select.tokens[-1].end)
        in_select = [u for u in unresolved if select[0] <= u.start < select[1]]
        resolve_leftovers(sql, in_select, {}, replacements)
        named = select_list(sql, tree, clauses, items, replacements)
        # SQLite lets WHERE, ON, GROUP BY and HAVING name a select-list alias (a column wins)
        aliases = {fold(c.name): c.text for c, is_alias in named if is_alias}
        resolve_leftovers(sql, [u for u in unresolved if u not in in_select], aliases, replacements)
        for position, on in ons:
            left_ons.get(position, conditions).append(rewrite(sql, on, replacements))
        for position, on_conditions in left_ons.items():
            items[position].left_on = " AND ".join(f"({c})" for c in on_conditions) or "1"
        if clauses.where:
            conditions.append(rewrite(sql, clauses.where, replacements))
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
                    tail += f" {keyword} {rewrite(sql, span, replacements)}"
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
                group.append(text if is_bare(text) else f"({text})")
            else:
                group.append(rewrite(sql, span, replacements))
        having = [rewrite(sql, clauses.having, replacements)]
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

    def _item(self, reference: FromItem, ctes: dict[str, Cte], prefix: str, depth: int) -> Item:
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
        columns = [Column(c.name, f"{qualifier}.{quote(c.name)}") for c in table.columns]
        rowid = f"{qualifier}.{table.rowid_name}" if table.has_rowid else None
        # never NULL on a row of the table, NULL on a row a LEFT JOIN pads (WITHOUT ROWID: its key
        # is NOT NULL); a materialized view read as a source has none
        marker = None if table.materialized else rowid or f"{qualifier}.{quote(table.primary_key[0])}"
        return Item(alias, columns, rowid, sources=[f"main.{quote(table.name)} AS {qualifier}"], marker=marker)

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
    def _derived(alias: str, level: _Level, names_: tuple[str, ...], what: str) -> Item:
        if len(names_) != len(level.columns):
            raise Error(f"{alias} has {len(level.columns)} values for {len(names_)} columns")
        columns = [Column(name, c.text, c.collated) for name, c in zip(names_, level.columns)]
        sources = [s for item in level.items for s in item.sources]
        conditions = [c for item in level.items for c in item.conditions] + level.conditions
        return Item(
            alias,
            columns,
            None,
            sources=sources,
            conditions=conditions,
            what=what,
            group=level.group,
            having=level.having,
            marker=level.items[0].marker if len(level.items) == 1 else None,
        )


def _pad_like_sqlite(item: Item, reference: FromItem) -> None:
    """A LEFT JOINed item must be one table: a row it pads is NULL in each of its columns, as
    the derived table's row would be. A column that is an expression is written `CASE WHEN
    <marker> IS NULL THEN NULL ELSE <expression> END` (`Item.marker`: NULL on a padded row
    only), which SQLite gives the same affinity (none) and collation (BINARY) as the expression,
    unless the expression is a column under `CAST` or unary `+` (those keep the column's): refused."""
    if len(item.sources) != 1 or item.group is not None:
        raise UnsupportedQuery(
            f"a LEFT JOIN of {item.what or reference.text} with several tables is not supported yet "
            f"(join them inside by LEFT JOINs of the view's FROM clause): {reference.text}"
        )
    for column in item.columns:
        if is_bare(column.text):
            continue
        if item.marker is None or column.collated or keeps_a_column_type(column.text):
            raise UnsupportedQuery(
                f"a LEFT JOIN of {item.what} with a column that is an expression ({column.name}) is not "
                f"supported yet: a row it pads would show the expression, not NULL: {reference.text}"
            )
        column.text = f"CASE WHEN {item.marker} IS NULL THEN NULL ELSE {column.text} END"
