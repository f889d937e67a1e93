"""Generators for the randomized differential tests of matview (see test_differential.py).

Everything here is plain data + SQL text: a `Program` is a base-table schema, some
materialized-view definitions and a sequence of operations (writes, transactions,
savepoints, reopen, writes from stdlib `sqlite3`, flush, ...). The same generator code
runs from hypothesis (`programs()`, shrinkable) or from a seeded `random.Random`
(`random_program()`), through the `Chooser` abstraction.

Value/type discipline (so the oracle comparison is exact, see CONTRACT.md):

* REAL values are multiples of 0.25 with |v| < 1e6, so every SUM/TOTAL/AVG is exact.
* Every generated expression carries the set of storage classes it may produce:
  'i' integer, 'r' real, 't' text whose numeric conversion is an integer (or 0),
  'T' text that may convert to a real (derived from a real). Expressions that may
  produce both 'i' and 'r' are "ambiguous": 1 and 1.0 compare equal, so SQLite may pick
  either representative in MIN/MAX/GROUP BY/DISTINCT. Ambiguous expressions never go
  in those positions. Untyped columns hold ints, reals and texts, so they are ambiguous.
* `exact` marks expressions whose numeric value is an exact binary fraction of modest
  magnitude; only those are summed/averaged.
* Writes keep every column inside its domain (an INTEGER column never gets 1.5, a TEXT
  column never gets '1.5'), so the type model stays true for the whole program.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

# --------------------------------------------------------------------------------------
# choice source


class Chooser:
    """Source of random choices. Every choice shrinks towards the simplest option
    (first element of a sequence, low end of a range, `False` for `chance`)."""

    def __init__(self, draw: Callable[[Any], Any] | None = None, rng: random.Random | None = None):
        self._draw = draw
        self._rng = rng

    def int(self, lo: int, hi: int) -> int:
        if self._draw is not None:
            return self._draw(st.integers(lo, hi))
        assert self._rng is not None
        return self._rng.randint(lo, hi)

    def chance(self, p: float) -> bool:
        """True with probability p; shrinks to False."""
        return self.int(0, 999) >= 1000 - round(p * 1000)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.int(0, len(seq) - 1)]

    def weighted(self, pairs: Sequence[tuple[Any, float]]) -> Any:
        """Pick by weight; shrinks towards the first pair."""
        total = sum(w for _, w in pairs)
        x = self.int(0, 9999) * total / 10000
        acc = 0.0
        for item, w in pairs:
            acc += w
            if x < acc:
                return item
        return pairs[-1][0]

    def sample(self, seq: Sequence[Any], k: int) -> list[Any]:
        pool = list(seq)
        out = []
        for _ in range(min(k, len(pool))):
            out.append(pool.pop(self.int(0, len(pool) - 1)))
        return out


# --------------------------------------------------------------------------------------
# SQL text helpers


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ident(name: str) -> str:
    """Quote only when needed, so output column names stay readable."""
    if name.isidentifier() and name.isascii() and name.lower() not in SQL_KEYWORDS:
        return name
    return q(name)


SQL_KEYWORDS = {
    "select",
    "from",
    "where",
    "group",
    "order",
    "by",
    "having",
    "limit",
    "values",
    "table",
    "index",
    "key",
    "primary",
    "unique",
    "null",
    "not",
    "and",
    "or",
    "in",
    "is",
    "as",
    "case",
    "when",
    "then",
    "else",
    "end",
    "default",
    "check",
    "join",
    "on",
    "set",
    "update",
    "delete",
    "insert",
    "into",
}


def lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return "X'" + bytes(v).hex().upper() + "'"
    if isinstance(v, float):
        r = repr(v)
        assert "e" not in r and "inf" not in r and "nan" not in r, r
        return r
    return "'" + str(v).replace("'", "''") + "'"


# --------------------------------------------------------------------------------------
# value domains

# Texts: no '.', no 'e'/'E', no 'inf'/'nan' so a text never converts to a real; some look
# like integers, some are LIKE/GLOB metacharacters; small so GROUP BY keys collide.
TEXTS = ["a", "b", "ab", "ba", "A", "B", "abc", "", "1", "2", "10", "007", "-3", "a%b", "_b", " a", "b ", "Ab", "zz"]
INT_TEXTS = ["a", "b", "zz"]  # non-numeric texts an INTEGER column may hold (they stay text)
UNIQUE_TEXTS = ["a", "b", "c", "d", "A"]


def gen_int(r: Chooser) -> int:
    k = r.weighted([("small", 85), ("mid", 10), ("big", 5)])
    if k == "small":
        return r.int(-3, 12)
    if k == "mid":
        return r.choice([-100, 100, 64, 1000, -7])
    return r.choice([123456, -99999, 2**31, 999999])


def gen_real(r: Chooser) -> float:
    k = r.weighted([("small", 85), ("mid", 10), ("big", 5)])
    if k == "small":
        return r.int(-20, 80) * 0.25
    if k == "mid":
        return r.choice([100.5, -64.75, 1000.0, 0.5])
    return r.choice([999999.75, -123456.5, 65536.25])


def gen_text(r: Chooser) -> str:
    return r.choice(TEXTS)


# --------------------------------------------------------------------------------------
# schema


@dataclass
class Column:
    name: str
    kind: str  # 'ipk' | 'int' | 'real' | 'text' | 'num' (NUMERIC affinity) | 'any'
    decl: str  # declared type text ('' for untyped)
    unique: bool = False
    pk: bool = False  # PRIMARY KEY of a WITHOUT ROWID table (never NULL)
    collate: str = ""  # NOCASE / RTRIM: then 'a' = 'A' (or 'a' = 'a '), so never in MIN/MAX/GROUP BY/DISTINCT

    @property
    def ref(self) -> str:
        return ident(self.name)

    @property
    def types(self) -> frozenset[str]:
        return {
            "ipk": frozenset("i"),
            "int": frozenset("it"),  # INTEGER columns may hold a few non-numeric texts
            "real": frozenset("r"),
            "text": frozenset("t"),
            # NUMERIC affinity stores 2.0 as integer 2, so the column itself never holds
            # equal int/real pairs (see `canonical`), but expressions over it can.
            "num": frozenset("irt"),
            "any": frozenset("irtT"),  # ints, reals, texts (some made from reals by writes)
        }[self.kind]


@dataclass
class Schema:
    table: str
    columns: list[Column]
    unique: Column | None = None
    ipk: Column | None = None
    raw_create: str | None = None  # hand-written CREATE TABLE (then `columns` may be empty)
    without_rowid: bool = False
    pk: Column | None = None  # WITHOUT ROWID primary key
    user_trigger: str | None = None  # a user's own trigger on the table that writes to it
    trigger_first: bool = False  # created before the views (else right after them)

    @property
    def has_rowid(self) -> bool:
        return not self.without_rowid

    @property
    def tref(self) -> str:
        return ident(self.table)

    @property
    def data_columns(self) -> list[Column]:
        return [c for c in self.columns if c.kind != "ipk"]

    def collation_tainted(self, sql: str) -> bool:
        """Whether an expression may mention a NOCASE/RTRIM column (conservative, textual)."""
        return any(c.collate and c.ref in sql for c in self.columns)

    @property
    def group_concat_ok(self) -> bool:
        # GROUP_CONCAT order = rowid order only when SQLite scans the table itself:
        # needs an INTEGER PRIMARY KEY and no secondary index (a UNIQUE column has one).
        return self.ipk is not None and self.unique is None

    def create_sql(self) -> str:
        if self.raw_create is not None:
            return self.raw_create
        defs = []
        for c in self.columns:
            d = c.ref
            if c.decl:
                d += " " + c.decl
            if c.collate:
                d += f" COLLATE {c.collate}"
            if c.kind == "ipk" or c.pk:
                d += " PRIMARY KEY"
            if c.unique:
                d += " UNIQUE"
            defs.append(d)
        return f"CREATE TABLE {self.tref} ({', '.join(defs)}){' WITHOUT ROWID' if self.without_rowid else ''}"

    def value(self, r: Chooser, c: Column, allow_null: bool = True) -> Any:
        if allow_null and c.kind != "ipk" and not c.pk and r.chance(0.15):
            return None
        if c.unique or c.pk:
            return r.int(0, 6) if c.kind == "int" else r.choice(UNIQUE_TEXTS)
        if c.kind == "ipk":
            return r.int(1, 40)
        if c.kind == "int":
            return r.choice(INT_TEXTS) if r.chance(0.05) else gen_int(r)
        if c.kind == "real":
            return gen_real(r)
        if c.kind == "text":
            return gen_text(r)
        if c.kind == "num":
            return gen_int(r) if r.chance(0.5) else gen_real(r)
        k = r.weighted([("int", 30), ("real", 30), ("text", 30), ("blob", 5)])
        if k == "blob":
            # (valid UTF-8 once `||` makes it text: text that is not stalls a view, a documented limit)
            return r.choice([b"ab", b"\x00\x7f", b""])
        return gen_int(r) if k == "int" else gen_real(r) if k == "real" else gen_text(r)


WEIRD_COLUMN_NAMES = ["Col A", "select", 'x"y', "ünï", "order", "MixedCase", "c-1", "rowid", "oid"]
DECLS = {
    "int": ["INTEGER", "INT", "BIGINT", "integer"],
    "real": ["REAL", "DOUBLE", "FLOAT", "real"],
    "text": ["TEXT", "VARCHAR(10)", "CLOB", "text"],
    "num": ["NUMERIC", "DECIMAL(10,2)", "BOOLEAN", "DATE"],
    "any": ["", "BLOB", ""],
}


def gen_schema(r: Chooser) -> Schema:
    has_ipk = r.chance(0.55)
    weird = r.chance(0.12)
    table = r.choice(["Base Tbl", "order", "T2"]) if weird and r.chance(0.5) else "t"
    columns: list[Column] = []
    if has_ipk:
        columns.append(Column(r.choice(["id", "Id", "pk"]) if not weird else "the id", "ipk", "INTEGER"))
    n_data = r.int(1 if has_ipk else 2, 4)
    names_pool = list(WEIRD_COLUMN_NAMES) if weird else []
    for i in range(n_data):
        kind = r.weighted([("int", 35), ("text", 25), ("real", 25), ("any", 10), ("num", 8)])
        name = f"c{i}"
        if names_pool and r.chance(0.5):
            name = names_pool.pop(r.int(0, len(names_pool) - 1))
        collate = r.choice(["NOCASE", "RTRIM"]) if kind == "text" and r.chance(0.15) else ""
        columns.append(Column(name, kind, r.choice(DECLS[kind]), collate=collate))
    # Keep at least one typed (unambiguous) data column.
    if not any(c.kind in ("int", "real", "text") and not c.collate for c in columns):
        columns[-1] = Column(columns[-1].name, "int", "INTEGER")
    schema = Schema(table, columns)
    schema.ipk = columns[0] if has_ipk else None
    if not has_ipk and r.chance(0.15):
        candidates = [c for c in columns if c.kind in ("int", "text")]
        if candidates:
            k = r.choice(candidates)
            k.pk = True
            schema.pk = k
            schema.without_rowid = r.chance(0.7)  # else a rowid table with a non-alias PRIMARY KEY
    if r.chance(0.3):
        candidates = [c for c in columns if c.kind in ("int", "text") and not c.pk]
        if candidates:
            u = r.choice(candidates)
            u.unique = True
            schema.unique = u
    return schema


# --------------------------------------------------------------------------------------
# expressions


@dataclass(frozen=True)
class Expr:
    sql: str
    types: frozenset  # subset of 'irtT' (NULL always possible, not tracked)
    exact: bool = True
    atom: bool = False  # needs no parentheses when nested
    name: str | None = None  # output column name SQLite gives a bare column reference
    agg: bool = False
    canonical: bool = False  # a NUMERIC column: holds 2, never 2.0, so 'ir' is not ambiguous

    @property
    def ambiguous(self) -> bool:
        return "i" in self.types and "r" in self.types and not self.canonical

    def p(self) -> str:
        return self.sql if self.atom else f"({self.sql})"


def num(types: frozenset) -> frozenset:
    out = set()
    for t in types:
        if t in "it":
            out.add("i")
        elif t == "r":
            out.add("r")
        else:  # 'T'
            out.update("ir")
    return frozenset(out)


def text_of(types: frozenset) -> frozenset:
    return frozenset("T" if ("r" in types or "T" in types) else "t")


def arith_types(a: Expr, b: Expr) -> frozenset:
    na, nb = num(a.types) or frozenset("i"), num(b.types) or frozenset("i")
    out = set()
    if "i" in na and "i" in nb:
        out.add("i")
    if "r" in na or "r" in nb:
        out.add("r")
    return frozenset(out)


def E(sql, types, exact=True, atom=False, name=None, agg=False, canonical=False) -> Expr:
    return Expr(sql, frozenset(types), exact, atom, name, agg, canonical)


def literal_expr(r: Chooser, kind: str | None = None) -> Expr:
    kind = kind or r.weighted([("int", 50), ("text", 25), ("real", 20), ("null", 5)])
    if kind == "int":
        v = r.int(-3, 12)
        return E(lit(v), "i", atom=v >= 0)
    if kind == "real":
        v = r.int(-8, 40) * 0.25
        return E(lit(v), "r", atom=v >= 0)
    if kind == "text":
        return E(lit(gen_text(r)), "t", atom=True)
    return E("NULL", "", atom=True)


def column_expr(r: Chooser, s: Schema, pred: Callable[[Column], bool] | None = None) -> Expr:
    cols = [c for c in s.columns if pred is None or pred(c)] or s.columns
    c = r.choice(cols)
    return E(c.ref, c.types, atom=True, name=c.name, canonical=c.kind == "num")


LIKE_PATTERNS = ["a%", "%b", "_", "%a%", "A%", "1%", "%", "a\\%%"]
GLOB_PATTERNS = ["a*", "[ab]*", "*1", "?", "*", "[0-9]*", "A*"]


def predicate(r: Chooser, s: Schema, depth: int) -> Expr:
    """A row-level boolean (integer 0/1/NULL)."""
    k = r.weighted(
        [
            ("cmp", 30),
            ("null", 10),
            ("in", 10),
            ("between", 8),
            ("like", 7),
            ("glob", 4),
            ("not", 4 if depth > 0 else 0),
            ("andor", 12 if depth > 0 else 0),
            ("truthy", 4),
        ]
    )
    if k == "cmp":
        a = scalar(r, s, depth - 1)
        b = literal_expr(r) if r.chance(0.6) else scalar(r, s, depth - 1)
        op = r.choice(["=", "<", ">", "<=", ">=", "!=", "<>", "==", "IS", "IS NOT"])
        return E(f"{a.p()} {op} {b.p()}", "i")
    if k == "null":
        a = scalar(r, s, depth - 1)
        return E(f"{a.p()} {r.choice(['IS NULL', 'IS NOT NULL', 'NOTNULL', 'ISNULL'])}", "i")
    if k == "in":
        a = scalar(r, s, depth - 1)
        items = ", ".join(literal_expr(r).sql for _ in range(r.int(1, 4)))
        return E(f"{a.p()} {r.choice(['IN', 'NOT IN'])} ({items})", "i")
    if k == "between":
        a = scalar(r, s, depth - 1)
        kind = r.choice(["int", "real", "text"])
        lo, hi = literal_expr(r, kind), literal_expr(r, kind)
        return E(f"{a.p()} {r.choice(['BETWEEN', 'NOT BETWEEN'])} {lo.p()} AND {hi.p()}", "i")
    if k == "like":
        a = scalar(r, s, depth - 1)
        pat = r.choice(LIKE_PATTERNS)
        esc = " ESCAPE '\\'" if "\\" in pat else ""
        return E(f"{a.p()} {r.choice(['LIKE', 'NOT LIKE'])} {lit(pat)}{esc}", "i")
    if k == "glob":
        a = scalar(r, s, depth - 1)
        return E(f"{a.p()} GLOB {lit(r.choice(GLOB_PATTERNS))}", "i")
    if k == "not":
        return E(f"NOT {predicate(r, s, depth - 1).p()}", "i")
    if k == "andor":
        a, b = predicate(r, s, depth - 1), predicate(r, s, depth - 1)
        return E(f"{a.p()} {r.choice(['AND', 'OR'])} {b.p()}", "i")
    a = scalar(r, s, depth - 1)  # truthiness of a value; keeps its own types when used as a value
    return E(a.sql, a.types, a.exact, a.atom, a.name, canonical=a.canonical)


def scalar(r: Chooser, s: Schema, depth: int) -> Expr:
    """A deterministic row-level scalar expression over the columns of `s`."""
    if depth <= 0:
        return column_expr(r, s) if r.chance(0.8) else literal_expr(r)
    k = r.weighted(
        [
            ("col", 30),
            ("lit", 5),
            ("arith", 14),
            ("div", 5),
            ("mod", 5),
            ("neg", 2),
            ("concat", 5),
            ("case", 5),
            ("iif", 2),
            ("cast", 5),
            ("coalesce", 5),
            ("nullif", 2),
            ("abs", 3),
            ("length", 3),
            ("upper", 3),
            ("substr", 3),
            ("round", 3),
            ("minmax", 4),
            ("pred", 4),
            ("date", 2),
            ("typeof", 2),
            ("misc", 3),
        ]
    )
    if k == "col":
        return column_expr(r, s)
    if k == "lit":
        return literal_expr(r)
    if k == "arith":
        a = scalar(r, s, depth - 1)
        op = r.choice(["+", "-", "*"])
        b = (
            literal_expr(r, r.choice(["int", "int", "real"]))
            if (op == "*" or r.chance(0.5))
            else scalar(r, s, depth - 1)
        )
        exact = a.exact and b.exact and (op != "*" or b.sql.lstrip("-").replace(".", "").isdigit())
        return E(f"{a.p()} {op} {b.p()}", arith_types(a, b), exact)
    if k == "div":
        a = scalar(r, s, depth - 1)
        b = literal_expr(r, r.choice(["int", "int", "real"])) if r.chance(0.6) else scalar(r, s, depth - 1)
        t = arith_types(a, b)
        exact = a.exact and ("r" not in t or b.sql in ("2", "4", "0.5", "0.25"))
        return E(f"{a.p()} / {b.p()}", t, exact)
    if k == "mod":
        a = scalar(r, s, depth - 1)
        b = E(lit(r.choice([2, 3, 7, 0, -4])), "i", atom=True) if r.chance(0.7) else scalar(r, s, depth - 1)
        return E(f"{a.p()} % {b.p()}", arith_types(a, b), True)
    if k == "neg":
        a = scalar(r, s, depth - 1)
        return E(f"-{a.p()}", num(a.types), a.exact)
    if k == "concat":
        a, b = scalar(r, s, depth - 1), (literal_expr(r, "text") if r.chance(0.5) else scalar(r, s, depth - 1))
        t = text_of(a.types | b.types)
        return E(f"{a.p()} || {b.p()}", t, "T" not in t)
    if k == "case":
        c = predicate(r, s, depth - 1)
        a, b = scalar(r, s, depth - 1), scalar(r, s, depth - 1)
        if r.chance(0.3):
            return E(f"CASE WHEN {c.sql} THEN {a.sql} END", a.types, a.exact, atom=True)
        return E(f"CASE WHEN {c.sql} THEN {a.sql} ELSE {b.sql} END", a.types | b.types, a.exact and b.exact, atom=True)
    if k == "iif":
        c = predicate(r, s, depth - 1)
        a, b = scalar(r, s, depth - 1), scalar(r, s, depth - 1)
        return E(f"iif({c.sql}, {a.sql}, {b.sql})", a.types | b.types, a.exact and b.exact, atom=True)
    if k == "cast":
        a = scalar(r, s, depth - 1)
        to = r.choice(["INTEGER", "REAL", "TEXT", "NUMERIC"])
        t = {"INTEGER": frozenset("i"), "REAL": frozenset("r"), "TEXT": text_of(a.types), "NUMERIC": num(a.types)}[to]
        return E(f"CAST({a.sql} AS {to})", t, a.exact, atom=True)
    if k == "coalesce":
        a, b = scalar(r, s, depth - 1), scalar(r, s, depth - 1)
        f = r.choice(["coalesce", "ifnull"])
        return E(f"{f}({a.sql}, {b.sql})", a.types | b.types, a.exact and b.exact, atom=True)
    if k == "nullif":
        a, b = scalar(r, s, depth - 1), scalar(r, s, depth - 1)
        return E(f"nullif({a.sql}, {b.sql})", a.types, a.exact, atom=True)
    if k == "abs":
        a = scalar(r, s, depth - 1)
        t = {x if x in "ir" else "r" for x in a.types}
        return E(f"abs({a.sql})", t, a.exact, atom=True)
    if k == "length":
        return E(f"length({scalar(r, s, depth - 1).sql})", "i", atom=True)
    if k == "upper":
        a = scalar(r, s, depth - 1)
        return E(f"{r.choice(['upper', 'lower'])}({a.sql})", text_of(a.types), a.exact, atom=True)
    if k == "substr":
        a = scalar(r, s, depth - 1)
        args = r.choice(["1, 1", "2", "1, 2", "-1", "2, 1", "0, 2"])
        t = text_of(a.types)
        return E(f"substr({a.sql}, {args})", t, "T" not in t, atom=True)
    if k == "round":
        a = scalar(r, s, depth - 1)
        if r.chance(0.5):
            return E(f"round({a.sql})", "r", a.exact, atom=True)
        return E(f"round({a.sql}, {r.choice([1, 2])})", "r", False, atom=True)
    if k == "minmax":
        a, b = scalar(r, s, depth - 1), (literal_expr(r) if r.chance(0.5) else scalar(r, s, depth - 1))
        return E(f"{r.choice(['max', 'min'])}({a.sql}, {b.sql})", a.types | b.types, a.exact and b.exact, atom=True)
    if k == "pred":
        return predicate(r, s, depth - 1)
    if k == "date":
        form = r.int(0, 4)
        if form == 0:
            return E("date('2024-01-31', '+1 month')", "t", atom=True)
        if form == 1:
            return E("strftime('%Y-%m', '2024-03-05 10:00:00')", "t", atom=True)
        if form == 2:
            return E("julianday('2024-01-01')", "r", atom=True)
        if form == 3:
            a = scalar(r, s, depth - 1)
            return E(f"date('2024-01-01', '+' || CAST({a.sql} AS INTEGER) || ' days')", "t", atom=True)
        a = scalar(r, s, depth - 1)
        return E(f"strftime('%j', '2023-12-25', ({a.sql}) || ' days')", "t", atom=True)
    if k == "typeof":
        return E(f"typeof({scalar(r, s, depth - 1).sql})", "t", atom=True)
    # misc text functions
    a = scalar(r, s, depth - 1)
    form = r.int(0, 3)
    if form == 0:
        return E(f"replace({a.sql}, 'a', 'x')", text_of(a.types), "T" not in text_of(a.types), atom=True)
    if form == 1:
        return E(f"trim({a.sql})", text_of(a.types), "T" not in text_of(a.types), atom=True)
    if form == 2:
        return E(f"instr({a.sql}, 'b')", "i", atom=True)
    return E(f"ltrim({a.sql}, '0')", text_of(a.types), "T" not in text_of(a.types), atom=True)


def constrained(r: Chooser, s: Schema, depth: int, *, unamb: bool = False, exact: bool = False, tries: int = 4) -> Expr:
    """A scalar that may go in MIN/MAX/GROUP BY/DISTINCT (`unamb`) or be summed (`exact`)."""
    for _ in range(tries):
        e = scalar(r, s, depth)
        if (not unamb or not (e.ambiguous or s.collation_tainted(e.sql))) and (not exact or e.exact):
            return e
    # fallbacks that always qualify
    typed = [c for c in s.columns if c.kind != "any" and not c.collate]
    if typed and r.chance(0.8):
        c = r.choice(typed)
        return E(c.ref, c.types, atom=True, name=c.name, canonical=c.kind == "num")
    c = r.choice([c for c in s.columns if not c.collate] or s.columns)
    return E(f"CAST({c.ref} AS INTEGER)", "i", atom=True)


# --------------------------------------------------------------------------------------
# aggregates


def agg_call(r: Chooser, s: Schema) -> Expr:
    k = r.weighted(
        [
            ("count_star", 12),
            ("count", 8),
            ("sum", 14),
            ("total", 6),
            ("avg", 8),
            ("min", 10),
            ("max", 10),
            ("gc", 8 if s.group_concat_ok else 0),
            ("count_d", 5),
            ("sum_d", 4),
            ("avg_d", 3),
        ]
    )
    depth = r.weighted([(0, 55), (1, 35), (2, 10)])
    if k == "count_star":
        return E("COUNT(*)", "i", atom=True, agg=True)
    if k == "count":
        return E(f"COUNT({scalar(r, s, depth).sql})", "i", atom=True, agg=True)
    if k in ("sum", "total", "avg"):
        a = constrained(r, s, depth, exact=True)
        name = {"sum": r.choice(["SUM", "sum"]), "total": "TOTAL", "avg": r.choice(["AVG", "avg"])}[k]
        if k == "sum":
            n = num(a.types)
            t = set()
            if "i" in n and "T" not in a.types:
                t.add("i")
            if "r" in n or "t" in a.types or "T" in a.types:
                t.add("r")
            return E(f"{name}({a.sql})", t or "i", True, atom=True, agg=True)
        return E(f"{name}({a.sql})", "r", True, atom=True, agg=True)
    if k in ("min", "max"):
        a = constrained(r, s, depth, unamb=True)
        return E(f"{k.upper() if r.chance(0.5) else k}({a.sql})", a.types, a.exact, atom=True, agg=True)
    if k == "gc":
        a = scalar(r, s, depth)
        sep = r.choice(["", ", '-'", ", ''", ", ' | '"])
        return E(f"GROUP_CONCAT({a.sql}{sep})", "T", False, atom=True, agg=True)
    a = constrained(r, s, depth, unamb=True, exact=(k != "count_d"))
    f = {"count_d": "COUNT", "sum_d": "SUM", "avg_d": "AVG"}[k]
    t = "i" if k == "count_d" else ("r" if k == "avg_d" else num(a.types))
    return E(f"{f}(DISTINCT {a.sql})", t, True, atom=True, agg=True)


def agg_expr(r: Chooser, s: Schema, keys: list[Expr], depth: int = 1) -> Expr:
    """An aggregate call, or an expression over aggregates (and group keys)."""
    if depth <= 0 or r.chance(0.55):
        return agg_call(r, s)
    form = r.weighted(
        [
            ("arith", 30),
            ("ratio", 12),
            ("spread", 10),
            ("coalesce", 12),
            ("case", 10),
            ("round", 6),
            ("withkey", 8 if keys else 0),
            ("cmp", 6),
        ]
    )
    a = agg_call(r, s)
    if form == "arith":
        b = literal_expr(r, r.choice(["int", "real"])) if r.chance(0.4) else agg_expr(r, s, keys, depth - 1)
        return E(f"{a.p()} {r.choice(['+', '-', '*'])} {b.p()}", arith_types(a, b), agg=True)
    if form == "ratio":
        return E(
            f"{a.p()} / {r.choice(['COUNT(*)', 'COUNT(*) * 1.0', '2', 'nullif(COUNT(*), 1)'])}",
            arith_types(a, a),
            agg=True,
        )
    if form == "spread":
        x = constrained(r, s, r.int(0, 1), unamb=True)
        if "t" in x.types or "T" in x.types:
            return E(f"MAX({x.sql}) || '/' || MIN({x.sql})", "T", agg=True)
        return E(f"MAX({x.sql}) - MIN({x.sql})", num(x.types), agg=True)
    if form == "coalesce":
        return E(f"coalesce({a.sql}, {literal_expr(r).sql})", a.types | frozenset("irt"), atom=True, agg=True)
    if form == "case":
        c = agg_having(r, s, keys, 0)
        b = agg_call(r, s)
        return E(f"CASE WHEN {c.sql} THEN {a.sql} ELSE {b.sql} END", a.types | b.types, atom=True, agg=True)
    if form == "round":
        return E(f"round({a.sql}, 1)", "r", atom=True, agg=True)
    if form == "withkey":
        key = r.choice(keys)
        return E(f"{key.p()} || ':' || {a.p()}", "T", agg=True)
    b = agg_call(r, s)
    return E(f"{a.p()} {r.choice(['<', '=', '>=', 'IS'])} {b.p()}", "i", agg=True)


def agg_having(r: Chooser, s: Schema, keys: list[Expr], depth: int = 1) -> Expr:
    k = r.weighted(
        [("count", 30), ("cmp", 30), ("null", 10), ("key", 10 if keys else 0), ("andor", 10 if depth > 0 else 0)]
    )
    if k == "count":
        return E(f"COUNT(*) {r.choice(['>', '>=', '<', '=', '!='])} {r.int(0, 3)}", "i", agg=True)
    if k == "cmp":
        a = agg_call(r, s)
        return E(
            f"{a.p()} {r.choice(['>', '<', '>=', '=', '<>'])} {literal_expr(r, r.choice(['int', 'real', 'text'])).p()}",
            "i",
            agg=True,
        )
    if k == "null":
        return E(f"{agg_call(r, s).p()} {r.choice(['IS NULL', 'IS NOT NULL'])}", "i", agg=True)
    if k == "key":
        key = r.choice(keys)
        return E(f"{key.p()} {r.choice(['>', '<', '=', 'IS NOT'])} {literal_expr(r).p()}", "i", agg=True)
    a, b = agg_having(r, s, keys, depth - 1), agg_having(r, s, keys, depth - 1)
    return E(f"({a.sql}) {r.choice(['AND', 'OR'])} ({b.sql})", "i", agg=True)


# --------------------------------------------------------------------------------------
# view definitions


@dataclass
class ViewDef:
    sql: str  # the defining SELECT
    kind: str  # 'plain' | 'distinct' | 'agg' | 'global_agg'


def output_name(e: Expr, alias: str | None) -> str:
    if alias is not None:
        return alias
    return e.name if e.name is not None else e.sql


def select_list(r: Chooser, items: list[Expr], force_alias: bool = False) -> str:
    """Render projections, aliasing some, and every one whose name would repeat."""
    seen: set[str] = set()
    parts = []
    for i, e in enumerate(items):
        alias = None
        if force_alias or r.chance(0.3):
            alias = r.choice([f"a{i}", f"Out {i}", f"x{i}"])
        if output_name(e, alias).lower() in seen:
            alias = f"dup{i}"
        seen.add(output_name(e, alias).lower())
        if alias is None:
            parts.append(e.sql)
        else:
            parts.append(f"{e.sql} {'AS ' if r.chance(0.8) else ''}{ident(alias)}")
    return ", ".join(parts)


def gen_view(r: Chooser, s: Schema) -> ViewDef:
    kind = r.weighted([("plain", 30), ("distinct", 15), ("agg", 40), ("global_agg", 15)])
    qualify = r.chance(0.08)
    frm = s.tref
    where = ""
    if r.chance(0.6):
        where = f" WHERE {predicate(r, s, r.int(1, 3)).sql}"
    if kind == "plain":
        if r.chance(0.2):
            proj = r.choice(["*", f"{s.tref}.*"]) if not qualify else "*"
        else:
            items = [scalar(r, s, r.weighted([(0, 50), (1, 30), (2, 20)])) for _ in range(r.int(1, 4))]
            proj = select_list(r, items)
        order = f" ORDER BY {r.choice(['1', '1 DESC', s.columns[0].ref])}" if r.chance(0.15) else ""
        return ViewDef(f"SELECT {proj} FROM {frm}{where}{order}", kind)
    if kind == "distinct":
        if r.chance(0.15) and not any(c.kind == "any" or c.collate for c in s.columns):
            proj = "*"
        else:
            items = [constrained(r, s, r.weighted([(0, 60), (1, 30), (2, 10)]), unamb=True) for _ in range(r.int(1, 3))]
            proj = select_list(r, items)
        order = " ORDER BY 1" if r.chance(0.15) else ""
        return ViewDef(f"SELECT DISTINCT {proj} FROM {frm}{where}{order}", kind)
    keys: list[Expr] = []
    if kind == "agg":
        for _ in range(r.int(1, 2)):
            key = constrained(r, s, r.weighted([(0, 50), (1, 40), (2, 10)]), unamb=True)
            if re.fullmatch(r"\(?-?[0-9]+\)?", key.sql):  # an integer literal is a column ordinal
                key = column_expr(r, s, lambda c: c.kind != "any" and not c.collate)
            keys.append(key)
    aggs = [agg_expr(r, s, keys) for _ in range(r.int(1, 4))]
    shown_keys = [k for k in keys if r.chance(0.85)]
    items = shown_keys + aggs
    order_items = list(range(len(items)))
    if r.chance(0.3):  # shuffle
        order_items = r.sample(order_items, len(order_items))
    proj = select_list(r, [items[i] for i in order_items])
    group = f" GROUP BY {', '.join(k.sql for k in keys)}" if keys else ""
    having = f" HAVING {agg_having(r, s, keys).sql}" if r.chance(0.25 if keys else 0.08) else ""
    order = " ORDER BY 1" if r.chance(0.15) else ""
    return ViewDef(f"SELECT {proj} FROM {frm}{where}{group}{having}{order}", kind)


# --------------------------------------------------------------------------------------
# writes


def write_predicate(r: Chooser, s: Schema) -> str:
    k = r.weighted([("simple", 60), ("rowid", 20 if s.has_rowid else 0), ("rich", 20)])
    if k == "rowid":
        return r.choice(
            [
                f"rowid % {r.int(2, 4)} = {r.int(0, 1)}",
                f"rowid > {r.int(0, 20)}",
                f"rowid IN ({r.int(1, 6)}, {r.int(1, 12)})",
            ]
        )
    if k == "rich":
        return predicate(r, s, 1).sql
    c = r.choice(s.columns)
    v = s.value(r, c, allow_null=False)
    op = r.choice(["=", "<", ">", "<=", ">=", "!=", "IS NULL", "IS NOT NULL"])
    if op.startswith("IS"):
        return f"{c.ref} {op}"
    return f"{c.ref} {op} {lit(v)}"


def update_value(r: Chooser, s: Schema, c: Column, excluded: bool = False) -> str:
    """An expression keeping column `c` inside its value domain."""
    src = "excluded." if excluded else ""
    me = f"{src}{c.ref}"
    if r.chance(0.45):
        return lit(s.value(r, c))
    if c.unique or c.pk:
        return lit(s.value(r, c))
    others = lambda kinds: [o for o in s.columns if o.kind in kinds and o is not c]  # noqa: E731
    if c.kind in ("int", "ipk"):
        opts = [f"{me} + 1", f"{me} - 2", f"-{me}", f"{me} % 5", f"coalesce({me}, 0) + 3"]
        opts += [f"{src}{o.ref}" for o in others(("int", "ipk"))]
        opts += [f"length({src}{o.ref})" for o in others(("text",))]
        if c.kind == "ipk":
            opts = [f"{me} + 100", f"{me} + 1", f"-{me}"]
        return r.choice(opts)
    if c.kind == "real":
        opts = [f"{me} + 0.25", f"{me} - 1.5", f"-{me}", f"abs({me})"]
        opts += [f"{src}{o.ref}" for o in others(("real",))]
        opts += [f"{src}{o.ref} + 0.5" for o in others(("ipk",))]
        return r.choice(opts)
    if c.kind == "num":
        opts = [f"{me} + 0.25", f"{me} + 1", f"-{me}", f"abs({me})"]
        opts += [f"{src}{o.ref}" for o in others(("int", "real", "num", "ipk"))]
        return r.choice(opts)
    if c.kind == "text":
        opts = [f"{me} || 'a'", f"upper({me})", f"lower({me})", f"substr({me}, 2)", f"'b' || {me}"]
        opts += [f"CAST({src}{o.ref} AS TEXT)" for o in others(("int", "ipk", "text"))]
        return r.choice(opts)
    opts = [f"{me} + 1", f"{me} || 'b'", f"-{me}", f"{me} + 0.5"]
    opts += [f"{src}{o.ref}" for o in others(("int", "real", "text", "any", "ipk"))]
    return r.choice(opts)


def values_rows(r: Chooser, s: Schema, cols: list[Column], n: int) -> str:
    return ", ".join("(" + ", ".join(lit(s.value(r, c)) for c in cols) + ")" for _ in range(n))


def insert_columns(r: Chooser, s: Schema, need: Column | None = None) -> list[Column]:
    data = s.data_columns
    cols = [c for c in data if r.chance(0.85)] or [r.choice(data)]
    if s.ipk is not None and r.chance(0.3):
        cols = [s.ipk, *cols]
    for must in (need, s.pk if s.without_rowid else None):
        if must is not None and must not in cols:
            cols = [must, *cols]
    return cols


def gen_user_trigger(r: Chooser, s: Schema) -> str:
    """A user trigger on the base table whose body writes to the same table. Its body never
    fires its own event, so it cannot recurse even with recursive_triggers on."""
    event = r.choice(["INSERT", "UPDATE", "DELETE"])
    timing = r.choice(["BEFORE", "AFTER"])
    row = "old" if event == "DELETE" else "new"
    body_kind = r.choice(
        {"INSERT": ["update", "delete"], "UPDATE": ["delete", "insert"], "DELETE": ["update", "insert"]}[event]
    )
    t = s.tref
    ident_col = "rowid" if s.has_rowid else s.pk.ref  # type: ignore[union-attr]
    not_me = f" AND {ident_col} IS NOT {row}.{ident_col}" if timing == "BEFORE" else ""
    if body_kind == "update":
        c = r.choice([c for c in s.data_columns if not c.unique and not c.pk] or s.data_columns)
        body = f"UPDATE {t} SET {c.ref} = {update_value(r, s, c)} WHERE {write_predicate(r, s)}{not_me}"
    elif body_kind == "delete":
        body = f"DELETE FROM {t} WHERE {write_predicate(r, s)}{not_me}"
    else:
        cols = insert_columns(r, s)
        cols = [c for c in cols if c.kind != "ipk"] or s.data_columns
        body = f"INSERT INTO {t} ({', '.join(c.ref for c in cols)}) VALUES {values_rows(r, s, cols, 1)}"
    when = ""
    if r.chance(0.6):
        c = r.choice(s.columns)
        when = f" WHEN {row}.{c.ref} {r.choice(['=', '>', '<', 'IS NOT'])} {lit(s.value(r, c, allow_null=False))}"
    of = ""
    if event == "UPDATE" and r.chance(0.3):
        of = f" OF {r.choice(s.columns).ref}"
    return f'CREATE TRIGGER "user trg" {timing} {event}{of} ON {t}{when} BEGIN {body}; END'


def gen_write(r: Chooser, s: Schema) -> str:
    kinds = [("insert", 30), ("update", 22), ("delete", 12), ("replace", 8), ("ignore", 4), ("insert_select", 4)]
    conflict_targets = [c for c in (s.unique, s.ipk, s.pk) if c is not None]
    if conflict_targets:
        kinds += [("upsert", 12), ("replace", 6)]
    k = r.weighted(kinds)
    t = s.tref
    if k in ("insert", "replace", "ignore"):
        cols = insert_columns(r, s)
        verb = {
            "insert": "INSERT",
            "replace": r.choice(["INSERT OR REPLACE", "REPLACE"]),
            "ignore": "INSERT OR IGNORE",
        }[k]
        return f"{verb} INTO {t} ({', '.join(c.ref for c in cols)}) VALUES {values_rows(r, s, cols, r.int(1, 4))}"
    if k == "insert_select":
        cols = s.data_columns
        names = ", ".join(c.ref for c in cols)
        keyed = s.unique is not None or s.pk is not None
        verb = "INSERT OR IGNORE" if keyed and r.chance(0.5) else ("INSERT OR REPLACE" if keyed else "INSERT")
        return f"{verb} INTO {t} ({names}) SELECT {names} FROM {t} WHERE {write_predicate(r, s)} LIMIT {r.int(1, 4)}"
    if k == "upsert":
        target = r.choice(conflict_targets)
        cols = insert_columns(r, s, need=target)
        rows = values_rows(r, s, cols, r.int(1, 3))
        head = f"INSERT INTO {t} ({', '.join(c.ref for c in cols)}) VALUES {rows} ON CONFLICT ({target.ref}) DO "
        if r.chance(0.2):
            return head + "NOTHING"
        sets = []
        for c in r.sample([c for c in s.data_columns if c is not target] or s.data_columns, r.int(1, 2)):
            if c in cols and r.chance(0.5):
                sets.append(f"{c.ref} = excluded.{c.ref}")
            else:
                sets.append(f"{c.ref} = {update_value(r, s, c)}")
        where = f" WHERE {write_predicate(r, s)}" if r.chance(0.2) else ""
        return head + "UPDATE SET " + ", ".join(sets) + where
    if k == "update":
        targets = r.sample(s.columns, r.int(1, 2))
        if s.ipk in targets and r.chance(0.6):
            targets = [c for c in targets if c is not s.ipk] or [r.choice(s.data_columns)]
        sets = ", ".join(f"{c.ref} = {update_value(r, s, c)}" for c in targets)
        verb = "UPDATE"
        if any(c.unique or c.pk or c.kind == "ipk" for c in targets):
            verb = r.choice(["UPDATE", "UPDATE OR REPLACE", "UPDATE OR IGNORE"])
        where = f" WHERE {write_predicate(r, s)}" if r.chance(0.85) else ""
        return f"{verb} {t} SET {sets}{where}"
    where = f" WHERE {write_predicate(r, s)}" if r.chance(0.9) else ""
    return f"DELETE FROM {t}{where}"


# --------------------------------------------------------------------------------------
# programs


@dataclass
class Config:
    """Relative weights of top-level operations."""

    n_views: tuple[int, int] = (1, 3)
    n_ops: tuple[int, int] = (3, 14)
    w_write: float = 40
    w_with: float = 8
    w_begin: float = 8
    w_savepoint: float = 6
    w_reopen: float = 4
    w_stdlib: float = 5
    w_flush: float = 5
    w_refresh: float = 2
    w_create: float = 3
    w_drop: float = 2
    w_probe: float = 3
    w_index: float = 2
    w_conn2: float = 3
    w_many: float = 3
    w_redefine: float = 2
    w_txn_create: float = 2
    p_user_trigger: float = 0.15
    view_kinds: tuple[str, ...] | None = None


@dataclass
class Program:
    schema: Schema
    views: list[ViewDef]
    initial: list[str]  # writes run before the views exist
    ops: list[tuple]
    pragmas: list[str] = field(default_factory=list)  # run on every connection the test opens
    wal: bool = False
    n_slots: int | None = None  # views[:n_slots] are created at the start; the rest are alternates
    # op shapes:
    #   ('sql', text)                   statement on the matview connection (writes may fail on constraints)
    #   ('flush',) ('reopen',) ('refresh', i) ('create', i) ('drop', i)
    #   ('with', [ops], raise: bool)    `with conn:` block; raise an exception at its end -> rollback
    #   ('stdlib', [sql], commit: bool) writes through stdlib sqlite3 on the same file
    #   ('apsw', sql)                   a write through conn.apsw, bypassing the wrapper
    #   ('many', sql, [params])         conn.executemany
    #   ('conn2', [sql])                writes through a second matview connection, checked there
    #   ('probe', k)                    filtered/ordered reads of each view vs a copy of it
    #   ('index', i, k)                 CREATE INDEX on view i's k-th column (both modes)
    #   ('redefine', i, j, conn2)       DROP the views in slot i, CREATE them with definition j
    #                                   (through a second connection when conn2)
    #   ('txn_create', i, commit)       BEGIN; write; CREATE slot i; write; COMMIT or ROLLBACK
    # view "slots" i < n_slots are named v{i}_imm / v{i}_def and start with definition i.

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis' printer
        p.text(repr(self))

    def __repr__(self) -> str:
        lines = ["Program(", f"  schema: {self.schema.create_sql()}"]
        if self.wal:
            lines.append("  PRAGMA journal_mode = WAL")
        for pr in self.pragmas:
            lines.append(f"  per connection: {pr}")
        for i, v in enumerate(self.views):
            lines.append(f"  view {i}{'' if i < (self.n_slots or len(self.views)) else ' (alternate)'}: {v.sql}")
        if self.schema.user_trigger:
            lines.append(
                f"  user trigger ({'before' if self.schema.trigger_first else 'after'} the views): "
                f"{self.schema.user_trigger}"
            )
        for w in self.initial:
            lines.append(f"  initial: {w}")
        lines += render_ops(self.ops, "  ")
        lines.append(")")
        return "\n".join(lines)


def render_ops(ops: list[tuple], indent: str) -> list[str]:
    out = []
    for op in ops:
        if op[0] == "sql":
            out.append(f"{indent}{op[1]}")
        elif op[0] == "with":
            out.append(f"{indent}with conn:")
            out += render_ops(op[1], indent + "    ")
            if op[2]:
                out.append(f"{indent}    raise Rollback")
        elif op[0] == "stdlib":
            out.append(f"{indent}sqlite3 ({'commit' if op[2] else 'rollback'}):")
            out += [f"{indent}    {x}" for x in op[1]]
        elif op[0] == "conn2":
            out.append(f"{indent}second matview connection:")
            out += [f"{indent}    {x}" for x in op[1]]
        elif op[0] == "apsw":
            out.append(f"{indent}conn.apsw: {op[1]}")
        elif op[0] == "many":
            out.append(f"{indent}executemany: {op[1]} {op[2]!r}")
        else:
            out.append(f"{indent}{op}")
    return out


def gen_many(r: Chooser, s: Schema) -> tuple:
    cols = insert_columns(r, s)
    verb = r.choice(["INSERT", "INSERT OR REPLACE"]) if (s.unique or s.pk or s.ipk in cols) else "INSERT"
    sql = f"{verb} INTO {s.tref} ({', '.join(c.ref for c in cols)}) VALUES ({', '.join('?' for _ in cols)})"
    return ("many", sql, [tuple(s.value(r, c) for c in cols) for _ in range(r.int(1, 12))])


def gen_body_write(r: Chooser, s: Schema) -> tuple:
    k = r.weighted([("sql", 90), ("apsw", 5), ("many", 5)])
    if k == "many":
        return gen_many(r, s)
    return (k, gen_write(r, s))


def gen_txn_body(r: Chooser, s: Schema, n_views: int, max_writes: int = 4, allow_flush: bool = True) -> list[tuple]:
    body: list[tuple] = []
    for _ in range(r.int(1, max_writes)):
        body.append(gen_body_write(r, s))
        if allow_flush and r.chance(0.1):
            body.append(("flush",))
        if r.chance(0.05):
            body.append(("probe", r.int(0, 99)))
    return body


def gen_savepoints(r: Chooser, s: Schema, n_views: int, depth: int, name: str) -> list[tuple]:
    ops: list[tuple] = [("sql", f"SAVEPOINT {name}")]
    ops += gen_txn_body(r, s, n_views, 3)
    if depth > 0 and r.chance(0.5):
        ops += gen_savepoints(r, s, n_views, depth - 1, name + "x")
        ops += gen_txn_body(r, s, n_views, 2)
    end = r.choice(["release", "rollback_to", "rollback_to_more"])
    if end == "release":
        ops.append(("sql", f"RELEASE {name}"))
    else:
        ops.append(("sql", f"ROLLBACK TO {name}"))
        if end == "rollback_to_more":
            ops += gen_txn_body(r, s, n_views, 2)
        ops.append(("sql", f"RELEASE SAVEPOINT {name}" if r.chance(0.3) else f"RELEASE {name}"))
    return ops


def gen_op(r: Chooser, s: Schema, cfg: Config, n_views: int, n_alts: int) -> tuple | list[tuple]:
    k = r.weighted(
        [
            ("write", cfg.w_write),
            ("with", cfg.w_with),
            ("begin", cfg.w_begin),
            ("savepoint", cfg.w_savepoint),
            ("reopen", cfg.w_reopen),
            ("stdlib", cfg.w_stdlib),
            ("flush", cfg.w_flush),
            ("refresh", cfg.w_refresh),
            ("create", cfg.w_create),
            ("drop", cfg.w_drop),
            ("probe", cfg.w_probe),
            ("index", cfg.w_index),
            ("conn2", cfg.w_conn2),
            ("many", cfg.w_many),
            ("redefine", cfg.w_redefine),
            ("txn_create", cfg.w_txn_create),
        ]
    )
    if k == "redefine":
        return [("redefine", r.int(0, n_views - 1), r.int(0, n_alts - 1), r.chance(0.5))]
    if k == "txn_create":
        return [("txn_create", r.int(0, n_views - 1), r.chance(0.5), gen_write(r, s), gen_write(r, s))]
    if k == "write":
        return [gen_body_write(r, s)]
    if k == "many":
        return [gen_many(r, s)]
    if k == "probe":
        return [("probe", r.int(0, 99))]
    if k == "index":
        return [("index", r.int(0, n_views - 1), r.int(0, 9))]
    if k == "conn2":
        return [("conn2", [gen_write(r, s) for _ in range(r.int(1, 3))])]
    if k == "with":
        body = gen_txn_body(r, s, n_views)
        if r.chance(0.35):  # nested `with` = SAVEPOINT
            inner = ("with", gen_txn_body(r, s, n_views, 2), r.chance(0.5))
            body.insert(r.int(0, len(body)), inner)
        return [("with", body, r.chance(0.3))]
    if k == "begin":
        begin = r.choice(["BEGIN", "BEGIN IMMEDIATE", "BEGIN DEFERRED", "BEGIN TRANSACTION"])
        body = gen_txn_body(r, s, n_views)
        if r.chance(0.3):
            body += gen_savepoints(r, s, n_views, 1, "sp")
            body += gen_txn_body(r, s, n_views, 2)
        end = r.choice(["COMMIT", "ROLLBACK", "COMMIT TRANSACTION"])
        return [("sql", begin), *body, ("sql", end)]
    if k == "savepoint":
        return gen_savepoints(r, s, n_views, 1, "s1")
    if k == "stdlib":
        stmts = [gen_write(r, s) for _ in range(r.int(1, 4))]
        return [("stdlib", stmts, not r.chance(0.2))]
    if k == "flush":
        return [("flush",)]
    if k == "reopen":
        return [("reopen",)]
    return [(k, r.int(0, n_views - 1))]


def gen_program(r: Chooser, cfg: Config | None = None) -> Program:
    cfg = cfg or Config()
    s = gen_schema(r)
    views = []
    for _ in range(r.int(*cfg.n_views)):
        v = gen_view(r, s)
        if cfg.view_kinds is not None:
            for _ in range(10):
                if v.kind in cfg.view_kinds:
                    break
                v = gen_view(r, s)
        views.append(v)
    n_views = len(views)
    views += [gen_view(r, s) for _ in range(r.int(0, 2))] if cfg.w_redefine else []
    initial = []
    if r.chance(0.6):
        cols = insert_columns(r, s)
        verb = "INSERT OR IGNORE" if (s.unique or s.pk or s.ipk in cols) else "INSERT"
        initial.append(
            f"{verb} INTO {s.tref} ({', '.join(c.ref for c in cols)}) VALUES {values_rows(r, s, cols, r.int(3, 12))}"
        )
        initial += [gen_write(r, s) for _ in range(r.int(0, 3))]
    ops: list[tuple] = []
    for _ in range(r.int(*cfg.n_ops)):
        ops += gen_op(r, s, cfg, n_views, len(views))
    pragmas = []
    if r.chance(0.15):
        pragmas.append("PRAGMA recursive_triggers = ON")
    if r.chance(cfg.p_user_trigger):
        s.user_trigger = gen_user_trigger(r, s)
        s.trigger_first = r.chance(0.5)
    return Program(s, views, initial, ops, pragmas, wal=r.chance(0.2), n_slots=n_views)


@st.composite
def programs(draw, cfg: Config | None = None) -> Program:
    return gen_program(Chooser(draw=draw), cfg)


def random_program(seed: int, cfg: Config | None = None) -> Program:
    return gen_program(Chooser(rng=random.Random(seed)), cfg)
