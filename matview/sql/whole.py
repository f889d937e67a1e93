"""Views recomputed whole: a top-level `ORDER BY … LIMIT` (top N), window functions, a SELECT
without FROM over subqueries, a set operation with such an arm.

Their rows are not a sum of per-row contributions: LIMIT keeps the first n rows of an order, a
window's value depends on the other rows of its partition. No delta rule of the engine applies,
so such a view is maintained by DBSP's defining identity, ΔV = Q(I(A)) − V: a fold that meets a
change of a table it reads runs its SELECT — the user's own statement, as written — and stores
the difference from the rows stored (`operators.whole`). SQLite computes exactly what the SELECT
re-run computes, ties and all (a view has no other order), for any deterministic SELECT; the cost
is the SELECT's, at every fold that touches its tables (README: limits).

The tables (and plain views) the SELECT reads are those SQLite's authorizer reports while it
prepares the statement: through views, CTEs and subqueries alike.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import apsw
import apsw.ext
from sqlglot import exp
from sqlglot.tokens import TokenType

from matview.errors import Error, UnsupportedQuery
from matview.names import all_rows, fold, is_internal, is_node, pending_rows
from matview.operators.whole import READ_ACTIONS
from matview.plan import OutputColumn, Plan, Upstream
from matview.sql.collations import shown_collations
from matview.sql.from_clause import FromClause, Occurrence
from matview.sql.from_items import view_parts
from matview.sql.inline import plain_view_sql
from matview.sql.sqltext import SET_OPERATIONS, depth_walk, matching_paren, set_operators, tokenize
from matview.sql.validate import one_statement, probe_columns, refuse_nondeterministic
from matview.storage.catalog import ViewEntry, load_views
from matview.storage.ddl_guard import authorizing_instead
from matview.storage.readable import foreign_temp_objects
from matview.storage.schema import ROWID_NAMES, TableInfo, affinity, read_table, table_kind
from matview.upstream import find_entry

#: table-valued functions whose rows are a function of their arguments alone
_PURE_TABLE_FUNCTIONS = frozenset({"json_each", "json_tree"})


def whole_construct(sql: str) -> str | None:
    """What makes a view's SELECT one to recompute whole, in the user's words; None otherwise."""
    tokens = tokenize(sql)
    depths = depth_walk(tokens)
    if any(t.kind in (TokenType.OVER, TokenType.WINDOW) for t in tokens):
        return "a window function"
    if any(d == 0 and t.kind in (TokenType.LIMIT, TokenType.OFFSET) for t, d in zip(tokens, depths)):
        return "LIMIT"
    starts = [i for i, (t, d) in enumerate(zip(tokens, depths)) if d == 0 and t.kind == TokenType.SELECT]
    reads = any(t.kind == TokenType.FROM for t in tokens)
    for start in starts:
        stop = next((i for i in starts if i > start), len(tokens))
        arm = tokens[start:stop]
        if reads and not any(t.kind == TokenType.FROM and d == 0 for t, d in zip(arm, depths[start:stop])):
            return "a SELECT without FROM"
    return None


def whole_construct_inside(conn: apsw.Connection, sql: str) -> str | None:
    """A LIMIT/OFFSET or a window anywhere in the SELECT or the plain views it reads (where the
    incremental front end refused it), in the user's words; None otherwise."""
    try:
        _tables, views, _materialized = _read_objects(conn, one_statement(sql)[0], "")
    except Error:
        return None  # (refused for what it reads: the first refusal stands)
    for text in [sql, *(body for _name, body in views)]:
        kinds = {t.kind for t in tokenize(text)}
        if kinds & {TokenType.OVER, TokenType.WINDOW}:
            return "a window function"
        if kinds & {TokenType.LIMIT, TokenType.OFFSET}:
            return "LIMIT"
    return None


def compile_whole(conn: apsw.Connection, sql: str, what: str) -> tuple[Plan, FromClause]:
    """The plan of a view recomputed whole (`Plan.whole`), and its tables as a FROM clause."""
    select, tokens = one_statement(sql)
    names, decltypes = probe_columns(conn, select)
    tables, views, materialized = _read_objects(conn, select, what)
    # the plain views it reads run at every fold too: their calls are checked, their functions needed
    functions = tuple(
        sorted(
            {
                name
                for text in [select, *(view_parts(body)[2] for _name, body in views)]
                for name in refuse_nondeterministic(conn, text, tokenize(text), whole=True)
            }
        )
    )
    if not tables and not materialized:
        raise UnsupportedQuery(f"{what}: the view reads no table (a view needs a base table)")
    infos = [read_table(conn, table) for table in tables]
    upstreams = [entry for name in materialized if (entry := find_entry(conn, name)) is not None]
    # every text that runs at a fold: the SELECT and the plain views it reads
    texts = [tokens, *(tokenize(view_parts(body)[2]) for _name, body in views)]
    # (what a materialized view's shadow reads is let through: the user's own text may name none of
    # it, not even as a string, which SQLite takes for a name in FROM)
    internal = [t.text for ts in texts for t in ts if _names_matview_internals(t.text)]
    if internal:
        raise UnsupportedQuery(f"{what} naming {internal[0]}, matview's own table, is not supported")
    renumbered = [i.name for i in infos if i.has_rowid and i.ipk is None]
    if renumbered and any(t.kind != TokenType.STRING and t.text.lower() in ROWID_NAMES for ts in texts for t in ts):
        raise UnsupportedQuery(
            f"{what} reading rowid: table {renumbered[0]} has no INTEGER PRIMARY KEY, so VACUUM may renumber "
            "its rowids without a change the view would see"
        )
    # (a set operation's column takes its first arm's type, which the other arms' values need not have:
    # stored untyped, as the SELECT returns them)
    compound = any(t.kind in (TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT) for ts in texts for t in ts)
    origins = () if compound else apsw.ext.query_info(conn, select).description_full or ()
    columns = []
    for name, decltype, origin in zip(names, decltypes, [*origins, *([None] * len(names))], strict=False):
        columns.append(_output_column(name, decltype, origin, infos, upstreams))
    # (a set operation inside a plain view, a derived table or a subquery hides its arms from
    # SQLite's origin of a column: only the SELECT's own top-level arms are looked at)
    nested = any(t.kind in SET_OPERATIONS for ts in texts[1:] for t in ts)
    if compound and not nested:
        kept = _arms_keep_their_types(conn, select, decltypes)
        columns = [replace(c, is_column=True) if passed else c for c, passed in zip(columns, kept)]
    shown = shown_collations(conn, select, len(columns))
    if len(shown) == len(columns):
        columns = [c if collation is None else replace(c, collation=collation) for c, collation in zip(columns, shown)]
    plan = Plan(
        sources=(*(i.name for i in infos), *(u.name for u in upstreams)),
        aliases=(*(i.name for i in infos), *(u.name for u in upstreams)),
        upstreams=tuple(Upstream(u.name, u.plan.kind == "aggregate", u.plan.columns) for u in upstreams),
        kind="rows",
        stage1=(),
        columns=tuple(columns),
        signatures=tuple((i.name, tuple((c.name, c.decltype, c.collation) for c in i.columns)) for i in infos),
        functions=functions,
        without_rowid=tuple(i.name for i in infos if not i.has_rowid),
        stable_rowid_tables=tuple(i.name for i in infos if i.ipk),
        plain_views=views,
        auto_indexes=False,
        whole=select,
        whole_reason=what,
    )
    source = FromClause(tuple(Occurrence(i, i.name) for i in infos), tuple(frozenset() for _ in infos), ())
    return plan, source


#: the opcodes that open a table or index b-tree for reading (p2: its root page, p3: the database)
_OPENS = frozenset({"OpenRead", "ReopenIdx"})


def _opened_tables(conn: apsw.Connection, program: list[tuple[Any, ...]]) -> list[tuple[str, str]]:
    """(database, table) of every table the EXPLAINed program opens, itself or through an index."""
    databases = {int(row[0]): str(row[1]) for row in conn.execute("PRAGMA database_list")}
    found: dict[tuple[str, str], None] = {}
    for row in program:
        if row[1] not in _OPENS:
            continue
        database = databases.get(int(row[4]), str(row[4]))
        if database not in ("main", "temp"):
            found[(database, "")] = None
            continue
        schema = "temp.sqlite_temp_master" if database == "temp" else "main.sqlite_master"
        table = conn.execute(f"SELECT tbl_name FROM {schema} WHERE rootpage = ?", (row[3],)).fetchone()
        if table is not None:
            found[(database, str(table[0]))] = None
    return list(found)


def cte_names(text: str) -> set[str]:
    """The (folded) names of the common table expressions `text` defines, at any depth: a name
    followed by `AS (`, `AS [NOT] MATERIALIZED (` or a column list and then one of those."""
    tokens = tokenize(text)
    found = set()
    for index, token in enumerate(tokens):
        if not token.is_name or token.kind == TokenType.STRING or index == 0:
            continue  # (a name sqlglot takes for a keyword — `first`, `key` — is a name here too)
        if tokens[index - 1].kind not in (TokenType.WITH, TokenType.RECURSIVE, TokenType.COMMA):
            continue
        at = index + 1
        if at < len(tokens) and tokens[at].kind == TokenType.L_PAREN:
            at = matching_paren(tokens, at) + 1
        if at < len(tokens) and tokens[at].kind == TokenType.ALIAS:
            rest = [t.text.upper() for t in tokens[at + 1 : at + 4]]
            if rest[:1] == ["("] or rest[:2] == ["MATERIALIZED", "("] or rest[:3] == ["NOT", "MATERIALIZED", "("]:
                found.add(fold(token.text))
    return found


def _names_matview_internals(text: str) -> bool:
    name = text.strip("\"'`[] ")
    return is_internal(name) or fold(name) == "pragma_schema_version"


def _arms_keep_their_types(conn: apsw.Connection, select: str, decltypes: list[str]) -> list[bool]:
    """Per column of a set operation `select`: whether every arm's column is a base table's
    column of the affinity SQLite gives the set operation's column (its declared type): its
    values passed that affinity, so it is stored typed and read as declared."""
    tokens = tokenize(select)
    cuts = set_operators(tokens)
    if not cuts or len(cuts) != sum(t.kind in SET_OPERATIONS for t in tokens):  # (one nested: see above)
        return [False] * len(decltypes)
    starts = [0, *(c + 2 if c + 1 < len(tokens) and tokens[c + 1].kind == TokenType.ALL else c + 1 for c in cuts)]
    ends = [*cuts, len(tokens)]
    kept = [bool(d) for d in decltypes]
    for start, end in zip(starts, ends, strict=True):
        if start >= end:
            return [False] * len(decltypes)
        try:  # (an arm after a WITH, say, is no SELECT of its own: nothing is kept)
            origins = apsw.ext.query_info(conn, select[tokens[start].start : tokens[end - 1].end]).description_full
        except apsw.Error:
            return [False] * len(decltypes)
        if origins is None or len(origins) != len(decltypes):
            return [False] * len(decltypes)
        for i, (origin, decltype) in enumerate(zip(origins, decltypes, strict=True)):
            base = origin[2] == "main" and bool(origin[3]) and not is_internal(str(origin[3]))
            kept[i] = kept[i] and base and affinity(str(origin[1] or "")) == affinity(decltype)
    return kept


def _output_column(
    name: str, decltype: str, origin: Any, infos: list[TableInfo], upstreams: list[ViewEntry]
) -> OutputColumn:
    """A column of the view: a plain column of a table it reads keeps its type and collation, of a
    materialized view it reads, what that view's column is; an expression's values are stored as
    they are."""
    if origin is not None and origin[3] and origin[2] == "main":
        info = next((i for i in infos if fold(i.name) == fold(origin[3])), None)
        column = next((c for c in info.columns if fold(c.name) == fold(origin[4] or "")), None) if info else None
        if column is not None:
            return OutputColumn(name, column.decltype, column.collation, True)
    elif origin is not None and origin[3] and origin[2] == "temp":
        # (read through its shadow: the virtual table itself, or the one under its temp view)
        entry = next((u for u in upstreams if fold(origin[3]) in (fold(u.name), fold(all_rows(u.name)))), None)
        shown = next((c for c in entry.plan.columns if fold(c.name) == fold(origin[4] or "")), None) if entry else None
        if shown is not None:
            return replace(shown, name=name)
    return OutputColumn(name, decltype, "BINARY")


def whole_tree() -> exp.Select:
    """The parse a whole view's `Compiled` carries (no pass reads it)."""
    return exp.Select()


def untracked_reads(conn: apsw.Connection, select: str, tables: set[str], views: set[str]) -> str | None:
    """What `select` reads, as SQLite's authorizer reports it, that an incremental plan reading
    base tables `tables` and materialized views `views` (folded names) does not follow: a
    safety net under the front end, which reads the text (SQLite's `x IN t` reads `t` with no
    subquery to see: `validate.refuse_in_table_names`). None when it follows everything."""
    read, _plain, materialized = _read_objects(conn, select, "the view")
    missed = [t for t in read if fold(t) not in tables] + [v for v in materialized if fold(v) not in views]
    if not missed:
        return None
    return f"the SELECT reads {missed[0]} where matview's delta rules would not see a change of it"


def _resolve_unnamed_database(
    conn: apsw.Connection, select: str, through: dict[str, set[str]], read: dict[str, str]
) -> None:
    """SQLite's authorizer names no database for the table a `count(*)` counts ("?" here). A
    materialized view's name resolves to its TEMP shadow unless the SELECT writes `main.<v>` or a
    plain view it reads (whose names resolve in main) names it: then it is the file's copy."""
    unnamed = [key for key, databases in through.items() if "?" in databases]
    if not unnamed:
        return

    def words(text: str) -> list[str]:
        return [fold(t.text.strip('"`[]')) for t in tokenize(text) if t.kind != TokenType.STRING]

    own = words(select)
    in_main = {c for a, b, c in zip(own, own[1:], own[2:]) if a == "main" and b == "."}
    for entry in read.values():
        in_main.update(words(plain_view_sql(conn, entry.split("\0", 1)[1]) or ""))
    for key in unnamed:
        through[key].discard("?")
        through[key].add("main" if key in in_main else "temp")


def _shadow_part_of(name: str) -> str:
    """The (folded) view whose TEMP shadow reads the virtual table `name` (`readable.create_shadow`),
    or ''."""
    for prefix in (all_rows(""), pending_rows("")):
        if fold(name).startswith(fold(prefix)):
            return fold(name[len(prefix) :])
    return ""


def _read_objects(
    conn: apsw.Connection, select: str, what: str
) -> tuple[list[str], tuple[tuple[str, str], ...], list[str]]:
    """The base tables, the plain views (name, CREATE VIEW text) and the materialized views
    `select` reads, as SQLite's authorizer reports them while it prepares the statement."""
    read: dict[str, str] = {}
    other: list[str] = []
    shadowed = {fold(e.name): e.name for e in load_views(conn).values() if not is_node(e.name)}
    through: dict[str, set[str]] = {}  # per materialized view read: the databases it is read in
    inside: list[str] = []  # matview's tables, read by a materialized view's shadow or file copy

    def authorize(action: int, name: str | None, _column: str | None, database: str | None, *_via: str | None) -> int:
        # (what a read's `via` says is no evidence: SQLite tags a CTE's reads with the CTE's name)
        if action == apsw.SQLITE_READ and name and fold(name) in shadowed:
            # (the view itself; no database for a count(*): `_resolve_unnamed_database`)
            through.setdefault(fold(name), set()).add(database or "?")
        elif action == apsw.SQLITE_READ and name and _shadow_part_of(name) in shadowed:
            # (the virtual table a view's TEMP shadow reads: the view, read on this connection, as
            # a count(*) over the shadow reports it, naming no column of the view)
            through.setdefault(_shadow_part_of(name), set()).add("temp")
        elif action == apsw.SQLITE_READ and name and (is_internal(name) or fold(name) == "pragma_schema_version"):
            inside.append(name)
        elif action == apsw.SQLITE_READ and name and database not in ("main", "temp", None):
            other.append(f"a table of attached database {database}")
        elif action == apsw.SQLITE_READ and name and database in ("main", "temp", None):
            # (no database for a count(*)'s table: the program's opens tell which, below)
            read.setdefault(fold(name), f"{database or '?'}\0{name}")
        elif action == apsw.SQLITE_PRAGMA and fold(name or "") == "schema_version":
            pass  # (read by a shadow view)
        elif action not in READ_ACTIONS:
            other.append(str(apsw.mapping_authorizer_function.get(action, action)))
        return apsw.SQLITE_OK

    try:
        with authorizing_instead(conn, authorize):  # (a cached statement skips the authorizer)
            program = conn.execute(f"EXPLAIN {select}", can_cache=False).fetchall()
    except apsw.SQLError as exc:
        raise Error(f"invalid view definition: {exc}") from None
    # (the authorizer is not told of every table: one read only for a USING/NATURAL join column
    # SQLite compares itself goes unreported — the program opens it, or an index of it, all the same)
    for database, name in _opened_tables(conn, program):
        if database not in ("main", "temp"):
            other.append(f"a table of attached database {database}")
        elif not is_internal(name) and fold(name) not in shadowed and read.get(fold(name), "?\0").startswith("?\0"):
            read[fold(name)] = f"{database}\0{name}"
    for key, entry in read.items():
        if entry.startswith("?\0"):  # (opened by no instruction: a TEMP one of its name is what SQLite reads)
            name = entry.split("\0", 1)[1]
            temp = conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = ? COLLATE NOCASE", (name,)).fetchone()
            read[key] = f"{'temp' if temp else 'main'}\0{name}"
    if other:  # (a table-valued PRAGMA: the fold runs the SELECT allowed to read only; ATTACHed tables
        # have no change capture)
        raise UnsupportedQuery(f"{what}: the SELECT does more than read the main database's tables ({other[0]})")
    if inside and not through:
        raise UnsupportedQuery(f"{what} over matview's own table {inside[0]} is not supported")
    _resolve_unnamed_database(conn, select, through, read)
    stale = [shadowed[key] for key, databases in through.items() if databases != {"temp"}]
    if stale:  # (main.<v>, the plain view other clients read, is as of the last fold)
        raise UnsupportedQuery(
            f"{what} reading materialized view {stale[0]} as the file stores it, as of its last fold (main.{stale[0]}, "
            f"which a plain view naming {stale[0]} reads too): name {stale[0]} in the view's own SELECT"
        )
    foreign = foreign_temp_objects(conn, [shadowed[key] for key in through])
    if foreign:
        raise UnsupportedQuery(f"{what} over a temporary table ({foreign[0]}) is not supported")
    materialized = [shadowed[key] for key in through]
    tables: list[str] = []
    views: dict[str, str] = {}
    unwatched: list[str] = []
    # (a TEMP table last: a refusal names the main tables' problems first)
    for entry in sorted(read.values(), key=lambda e: e.split("\0")[0] == "temp"):
        database, name = entry.split("\0", 1)
        if database == "temp":
            raise UnsupportedQuery(f"{what} over a temporary table ({name}) is not supported")
        kind = table_kind(conn, name)
        if kind == "view":
            text = plain_view_sql(conn, name)
            if text is None:
                raise UnsupportedQuery(f"{what} over materialized view {name} is not supported yet")
            views[name] = text
        elif kind is not None or name.lower().startswith("sqlite_"):
            tables.append(name)  # (`read_table` refuses the schema table, virtual tables)
        elif fold(name) not in _PURE_TABLE_FUNCTIONS:
            unwatched.append(name)
    # (a common table expression SQLite materializes is reported read by its own name: its
    # tables are reported, and opened, as well)
    ctes = {name for text in [select, *views.values()] for name in cte_names(text)}
    unwatched = [name for name in unwatched if fold(name) not in ctes]
    if unwatched:  # (an eponymous virtual table, dbstat, pragma_table_info: no capture sees what it reads)
        raise UnsupportedQuery(
            f"{what} reading {unwatched[0]}: a table-valued function or virtual table has no change capture"
        )
    _refuse_temp_namesakes(conn, select, what, tables)
    return tables, tuple(views.items()), materialized


def _refuse_temp_namesakes(conn: apsw.Connection, select: str, what: str, tables: list[str]) -> None:
    """A base table the SELECT names unqualified while a user's TEMP table or view has its name:
    SQLite reads the TEMP one (a TEMP view over `main.t` is read as `main.t` by the authorizer)."""
    namesakes = foreign_temp_objects(conn, tables)
    if not namesakes:
        return
    words = [fold(t.text.strip('"`[]')) for t in tokenize(select) if t.kind != TokenType.STRING]
    unqualified = {w for i, w in enumerate(words) if not (i >= 2 and words[i - 1] == "." and words[i - 2] == "main")}
    named = [name for name in namesakes if fold(name) in unqualified]
    if named:
        raise UnsupportedQuery(f"{what} over a temporary table or view ({named[0]}) is not supported")
