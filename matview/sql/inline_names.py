"""Column references of one SELECT level, for the inline pass (`matview.sql.inline`): the
FROM items a level flattens (`Item`, each with its `Column`s: the expressions over the renamed
base tables), and the resolution of every name the level's clauses write to one of them —
qualified or not, `*` and `t.*` expanded, select-list aliases, SQLite's double-quoted-string
fallback — so that each clause can be rewritten as text over the flattened FROM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import fold
from matview.sql.from_items import on_token_runs, text_of
from matview.sql.sqltext import Clauses, Span, Token, matching_paren, splice, split_top_level, tokenize
from matview.storage.schema import ROWID_NAMES


@dataclass
class Column:
    name: str
    text: str  # the expression over the flattened (renamed) base tables
    collated: bool = False  # its expression has an explicit COLLATE


@dataclass
class Item:
    """A FROM item of one SELECT level: a base table, or a derived table already flattened."""

    alias: str
    columns: list[Column]
    rowid: str | None = None  # base tables: the rowid reference
    hidden: set[str] = field(default_factory=set)  # columns USING/NATURAL merged into a left item
    sources: list[str] = field(default_factory=list)  # `main."t" AS "alias"` per base occurrence
    conditions: list[str] = field(default_factory=list)  # its WHERE (before any aggregation)
    group: list[str] | None = None  # an aggregating derived table: its GROUP BY terms…
    having: list[str] = field(default_factory=list)  # …and its HAVING conditions
    what: str = ""  # how messages name it ("CTE c")
    left_on: str | None = None  # LEFT JOINed: its ON condition, rewritten (`sources` is one table)
    marker: str | None = None  # one table's: an expression NULL exactly on a row a LEFT JOIN pads

    def column(self, name: str) -> Column | None:
        lowered = fold(name)
        return next((c for c in self.columns if fold(c.name) == lowered), None)


@dataclass(frozen=True)
class Name:
    """A name in the SELECT that resolves to no column of its level."""

    start: int
    end: int
    name: str
    qualified: bool
    quoted: bool


def resolve_unqualified(items: list[Item], name: str) -> Column | None:
    for item in items:
        if fold(name) in item.hidden:
            continue
        found = item.column(name)
        if found is not None:
            return found
    if name.lower() in ROWID_NAMES:
        if len(items) != 1 or items[0].rowid is None:
            raise UnsupportedQuery(f"{name} next to a FROM-subquery, CTE or view: qualify it with its table")
        return Column(name, items[0].rowid)
    return None


def refuse_collated(column: Column, written: str) -> None:
    if column.collated:
        raise UnsupportedQuery(
            f"column {written} of a FROM-subquery, CTE or view has a COLLATE clause: inlined, its collation "
            "would take precedence in comparisons where SQLite's would not; not supported yet"
        )


def column_replacements(
    sql: str, tree: exp.Expression, clauses: Clauses, items: list[Item]
) -> tuple[dict[int, tuple[int, str, bool]], list[Name]]:
    """For each column reference of this level (outside FROM items), keyed by its start
    offset: (end offset, replacement text, collated); and the names that resolve to no
    column of this level (select-list aliases, double-quoted strings)."""
    regions = [s for s in (clauses.select, clauses.where, clauses.group, clauses.having, clauses.window) if s]
    regions += [Span(sql, tuple(run)) for run in on_token_runs(list(clauses.from_.tokens))]
    ranges = [(s.tokens[0].start, s.tokens[-1].end) for s in regions]
    found: dict[int, tuple[int, str, bool]] = {}
    unresolved: list[Name] = []
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
        column = _resolve(items, node)
        if column is None:
            unresolved.append(Name(start, end, node.name, bool(node.table), node.this.quoted))
            continue
        found[start] = (end, _compared_as_sqlite(node, column), column.collated)
    return found, unresolved


_COMPARISONS = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.In,
    exp.Between,
)


def _compared_as_sqlite(node: exp.Column, column: Column) -> str:
    """A derived column's expression where `node` names it. SQLite gives a derived column that
    is an expression an implicit BINARY collation, which decides a comparison whose left operand
    it is (`x.s = c.name`, c.name NOCASE: BINARY); the expression as written has none, so it
    would take the right operand's: written `(…) COLLATE BINARY` there — unless the right side
    has an explicit COLLATE, which wins in SQLite and would lose to this one: refused."""
    text = column.text
    if column.collated or is_bare(text) or keeps_a_column_type(text):
        return text  # (a column, or a CAST / unary + of one: the column's collation, as SQLite's)
    child: exp.Expression = node
    parent = node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    if isinstance(parent, (exp.Cast, exp.Case, exp.Tuple)) or (
        isinstance(parent, exp.Func)
        and parent.sql_name().lower() in ("max", "min", "nullif", "greatest", "least")
        and (parent.sql_name().lower() == "nullif" or bool(parent.args.get("expressions")))  # (scalar: 2+ args)
    ):
        # (these hand the column's collation on, or compare by it: SQLite's BINARY, not written)
        raise UnsupportedQuery(
            f"column {node.sql()} of a FROM-subquery, CTE or view is an expression inside {type(parent).__name__}: "
            "once inlined, its collation would be another than SQLite's; not supported yet"
        )
    if not isinstance(parent, _COMPARISONS) or parent.this is not child:
        return text
    others = [v for k, v in parent.args.items() if k != "this" and v is not None]
    operands = [o for other in others for o in (other if isinstance(other, list) else [other])]
    if any(isinstance(n, exp.Collate) for o in operands if isinstance(o, exp.Expression) for n in o.walk()):
        raise UnsupportedQuery(
            f"column {node.sql()} of a FROM-subquery, CTE or view is an expression compared with a COLLATE: "
            "once inlined, the collations would decide otherwise than SQLite's; not supported yet"
        )
    return f"({text}) COLLATE BINARY"


def collated_as_derived(text: str) -> str:
    """A derived column's expression as one operand of USING's equality, which it leads: SQLite's
    implicit BINARY written (see `_compared_as_sqlite`)."""
    return text if is_bare(text) or keeps_a_column_type(text) else f"({text}) COLLATE BINARY"


def keeps_a_column_type(text: str) -> bool:
    """Whether an expression may have an affinity or collation of its own (SQLite: a column, a
    CAST or unary plus over one, a scalar subquery's)."""
    tokens = tokenize(text)
    while len(tokens) > 2 and tokens[0].kind == TokenType.L_PAREN and matching_paren(tokens, 0) == len(tokens) - 1:
        tokens = tokens[1:-1]
    if not tokens or tokens[0].kind in (TokenType.PLUS, TokenType.SELECT, TokenType.WITH):
        return True
    whole_call = (
        len(tokens) > 2 and tokens[1].kind == TokenType.L_PAREN and matching_paren(tokens, 1) == len(tokens) - 1
    )
    if tokens[0].text.upper() == "CAST" and whole_call:  # (sqlglot's tokenizer reads CAST as a name)
        return True
    column = len(tokens) == 3 and tokens[1].kind == TokenType.DOT and tokens[0].is_name and tokens[2].is_name
    literal = len(tokens) == 1 and tokens[0].kind in (TokenType.NULL, TokenType.TRUE, TokenType.FALSE)
    return column or (len(tokens) == 1 and tokens[0].is_name and not literal)


def resolve_leftovers(
    sql: str, names_: list[Name], aliases: dict[str, str], replacements: dict[int, tuple[int, str, bool]]
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


def _resolve(items: list[Item], node: exp.Column) -> Column | None:
    qualifier, name = node.table, node.name
    if not qualifier:
        return resolve_unqualified(items, name)
    for item in items:
        if fold(item.alias) == fold(qualifier):
            found = item.column(name)
            if found is None and name.lower() in ROWID_NAMES:
                if item.rowid is None:
                    raise UnsupportedQuery(f"{qualifier}.{name}: a FROM-subquery, CTE or view has no rowid")
                return Column(name, item.rowid)
            return found
    return None


def rewrite(sql: str, span: Span, replacements: dict[int, tuple[int, str, bool]]) -> str:
    if not span:
        return ""
    lo, hi = span.tokens[0].start, span.tokens[-1].end
    edits = []
    for start, (end, text, collated) in replacements.items():
        if lo <= start < hi:
            if collated:
                refuse_collated(Column("", "", True), sql[start:end])
            edits.append((start - lo, end - lo, text if is_bare(text) else f"({text})"))
    return splice(sql[lo:hi], edits)


def select_list(
    sql: str,
    tree: exp.Select,
    clauses: Clauses,
    items: list[Item],
    replacements: dict[int, tuple[int, str, bool]],
) -> list[tuple[Column, bool]]:
    """The select list, `*` expanded; each column with whether the user named it (AS)."""
    spans = split_top_level(sql, clauses.select.tokens)
    if len(spans) != len(tree.expressions):
        raise UnsupportedQuery("matview cannot analyze this select list")
    columns: list[tuple[Column, bool]] = []
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
        text = rewrite(sql, Span(sql, toks), replacements)
        name = alias if alias is not None else _implicit_name(sql, toks, items)
        columns.append((Column(name, text, collated), alias is not None))
    return columns


def _copy(column: Column) -> Column:
    return Column(column.name, column.text, column.collated)


def _implicit_name(sql: str, toks: tuple[Token, ...], items: list[Item]) -> str:
    """SQLite's name of an unaliased result column: a column's own name, else the text."""
    if len(toks) == 1 and toks[0].is_name:
        column = resolve_unqualified(items, toks[0].text)
        return column.name if column is not None else toks[0].text
    if len(toks) == 3 and toks[1].kind == TokenType.DOT and toks[2].is_name:
        for item in items:
            if fold(item.alias) == fold(toks[0].text):
                column = item.column(toks[2].text)
                if column is not None:
                    return column.name
        return toks[2].text
    return text_of(sql, toks)


def is_bare(text: str) -> bool:
    """A qualified column reference `"a"."b"` needs no parentheses (and keeps being a column)."""
    toks = tokenize(text)
    return len(toks) == 3 and toks[1].kind == TokenType.DOT and toks[0].is_name and toks[2].is_name
