"""Recognizing the statements a matview connection handles itself.

SQLite does not know CREATE/DROP/REFRESH MATERIALIZED VIEW, and virtual tables cannot
be indexed, so these are recognized before SQLite sees them. Everything else goes to
SQLite unchanged; COMMIT/END/RELEASE are noticed so the connection can fold first.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import apsw
from sqlglot.tokens import TokenType

from matview.errors import Error
from matview.sql.sqltext import tokenize

# (unquoted: SQLite's identifier characters — ASCII letters, digits, `_`, `$` and every
# character past ASCII — not starting with a digit; `w+x`, `w,x` are no name)
_NAME = (
    r'(?:"(?:[^"]|"")+"|\'(?:[^\']|\'\')+\'|\[[^\]]+\]|`(?:[^`]|``)+`'
    r"|[A-Za-z_\u0080-\U0010FFFF][A-Za-z0-9_$\u0080-\U0010FFFF]*)"
)
_QUALIFIED = rf"(?:({_NAME})\s*\.\s*)?({_NAME})"  # (schema, name)
_LEAD = r"\A(?:\s|;|--[^\n]*(?:\n|\Z)|/\*[\s\S]*?\*/)*"  # (an empty statement `;` too)
# between a keyword and a name: spaces, or none before a quoted name (`DROP TABLE"t"`)
_TO_NAME = r"(?:\s+|(?=[\"'`\[]))"

_CREATE = re.compile(
    _LEAD + rf"CREATE\s+MATERIALIZED\s+VIEW{_TO_NAME}(IF\s+NOT\s+EXISTS{_TO_NAME})?{_QUALIFIED}\s*"
    r"(?:WITH\s*\((?P<options>[^)]*)\)\s*)?AS\b(?P<select>.*)\Z",
    re.IGNORECASE | re.DOTALL,
)
_DROP = re.compile(
    _LEAD + rf"DROP\s+MATERIALIZED\s+VIEW{_TO_NAME}(IF\s+EXISTS{_TO_NAME})?{_QUALIFIED}\s*;?\s*\Z",
    re.IGNORECASE | re.DOTALL,
)
_REFRESH = re.compile(
    _LEAD + rf"REFRESH\s+MATERIALIZED\s+VIEW{_TO_NAME}{_QUALIFIED}\s*;?\s*\Z", re.IGNORECASE | re.DOTALL
)
_MATERIALIZED = re.compile(_LEAD + r"(CREATE|DROP|REFRESH)\s+MATERIALIZED\b", re.IGNORECASE)
_CREATE_INDEX = re.compile(
    _LEAD + rf"CREATE\s+(UNIQUE\s+)?INDEX{_TO_NAME}(IF\s+NOT\s+EXISTS{_TO_NAME})?{_QUALIFIED}\s*ON{_TO_NAME}"
    rf"{_QUALIFIED}\s*(?P<rest>\(.*)\Z",
    re.IGNORECASE | re.DOTALL,
)
_TABLE_DDL = re.compile(
    _LEAD + rf"(DROP\s+TABLE|DROP\s+VIEW|ALTER\s+TABLE){_TO_NAME}(?:IF\s+EXISTS{_TO_NAME})?{_QUALIFIED}",
    re.IGNORECASE,
)
_ADD_COLUMN = re.compile(_LEAD + rf"ALTER\s+TABLE{_TO_NAME}{_QUALIFIED}\s*ADD\b", re.IGNORECASE)
_FIRST_WORD = re.compile(_LEAD + r"([A-Za-z]+)")
_OPTION = re.compile(r"\s*(\w+)\s*=\s*('(?:[^']|'')*'|\w+)\s*")


def unquote(name: str) -> str:
    if name[:1] == '"' and name[-1:] == '"':
        return name[1:-1].replace('""', '"')
    if name[:1] == "'" and name[-1:] == "'":  # SQLite reads a string where a name must stand as that name
        return name[1:-1].replace("''", "'")
    if name[:1] == "`" and name[-1:] == "`":
        return name[1:-1].replace("``", "`")
    if name[:1] == "[" and name[-1:] == "]":
        return name[1:-1]
    return name


@dataclass(frozen=True)
class CreateView:
    name: str
    select: str
    if_not_exists: bool
    options: dict[str, str]


@dataclass(frozen=True)
class DropView:
    name: str
    if_exists: bool


@dataclass(frozen=True)
class RefreshView:
    name: str


@dataclass(frozen=True)
class CreateIndex:
    unique: bool
    if_not_exists: bool
    index: str
    table: str
    rest: str  # "(columns…) [WHERE …]" as written


def _options(text: str | None) -> dict[str, str]:
    options: dict[str, str] = {}
    if not text or not text.strip():
        return options
    for part in text.split(","):
        match = _OPTION.fullmatch(part)
        if not match:
            raise Error(f"cannot read view option {part.strip()!r}: write WITH (maintenance = 'deferred')")
        value = match.group(2)
        if value.startswith("'"):
            value = value[1:-1].replace("''", "'")
        options[match.group(1).lower()] = value.lower()
    return options


def without_comments(sql: str) -> str:
    """`sql` with each comment (`-- …`, `/* … */`) outside literals and quoted names written as
    one space, as SQLite's tokenizer reads it: what the statement patterns here read."""
    if "--" not in sql and "/*" not in sql:
        return sql
    out: list[str] = []
    index, length = 0, len(sql)
    closing = {"'": "'", '"': '"', "`": "`", "[": "]"}
    while index < length:
        char = sql[index]
        if char in closing:
            end = sql.find(closing[char], index + 1)
            while end != -1 and char != "[" and sql[end + 1 : end + 2] == char:  # (a doubled quote)
                end = sql.find(char, end + 2)
            end = length if end == -1 else end + 1
            out.append(sql[index:end])
            index = end
        elif sql.startswith("--", index):
            end = sql.find("\n", index)
            index = length if end == -1 else end
            out.append(" ")
        elif sql.startswith("/*", index):
            end = sql.find("*/", index + 2)
            index = length if end == -1 else end + 2
            out.append(" ")
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _in_main(schema: str | None, name: str) -> str:
    """A materialized view's name: it lives in main (another schema named is refused)."""
    if schema is not None and unquote(schema).lower() != "main":
        raise Error(f"materialized view {unquote(schema)}.{name}: materialized views live in the main database")
    return name


def parse_materialized(sql: str) -> CreateView | DropView | RefreshView | None:
    """The MATERIALIZED VIEW statement `sql` is (comments read as spaces), or None when it is none."""
    sql = without_comments(sql)
    if not _MATERIALIZED.match(sql):
        return None
    if match := _CREATE.match(sql):
        name = _in_main(match.group(2), unquote(match.group(3)))
        return CreateView(name, match.group("select"), bool(match.group(1)), _options(match.group("options")))
    if match := _DROP.match(sql):
        return DropView(_in_main(match.group(2), unquote(match.group(3))), bool(match.group(1)))
    if match := _REFRESH.match(sql):
        return RefreshView(_in_main(match.group(1), unquote(match.group(2))))
    raise Error(
        "syntax error in materialized view statement; expected CREATE MATERIALIZED VIEW [IF NOT EXISTS] name "
        "[WITH (maintenance = 'immediate'|'deferred')] AS SELECT …, DROP MATERIALIZED VIEW [IF EXISTS] name, "
        "or REFRESH MATERIALIZED VIEW name"
    )


def parse_create_index(sql: str) -> CreateIndex | None:
    match = _CREATE_INDEX.match(without_comments(sql))
    if not match:
        return None
    for schema in (match.group(3), match.group(5)):
        if schema is not None and unquote(schema).lower() != "main":
            return None  # (an index of another database's table: SQLite's to make)
    return CreateIndex(
        bool(match.group(1)),
        bool(match.group(2)),
        unquote(match.group(4)),
        unquote(match.group(6)),
        match.group("rest"),
    )


def table_ddl_target(sql: str) -> tuple[str | None, str] | None:
    """(schema as written or None, name) of the table or view a DROP TABLE / DROP VIEW /
    ALTER TABLE statement names (a materialized view is both: a plain view in main, a virtual
    table in temp)."""
    match = _TABLE_DDL.match(without_comments(sql))
    if not match:
        return None
    return (None if match.group(2) is None else unquote(match.group(2)).lower()), unquote(match.group(3))


#: the head of a write whose only table is its target (`plain_write_target`), and the target
_WRITE_HEAD = re.compile(
    _LEAD + r"(?:(?:INSERT|REPLACE)(?:\s+OR\s+\w+)?\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)\s+"
    rf"(?:main\s*\.\s*)?({_NAME})(?=\s|\(|\Z)(?!\s*\.)",
    re.IGNORECASE,
)
#: what lets the rest of a write read another table: a subquery (SELECT, WITH, VALUES of a
#: subquery start with SELECT), UPDATE … FROM, `x IN table` (any IN not followed by a
#: parenthesis), a second statement; and a comment, behind which any of these may hide
_READS_ANOTHER = re.compile(r"\bselect\b|\bfrom\b|\bin\b(?!\s*\()|;|--|/\*", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def plain_write_target(sql: str) -> str | None:
    """The table `sql` writes, where it is one INSERT/REPLACE/UPDATE/DELETE that reads no table
    but that one: no subquery, no `UPDATE … FROM`, no `x IN table`; None otherwise (a word
    like these inside a string literal only makes this say None, never a target wrongly).
    Cached: it runs before every write, mostly of a few statement texts."""
    head = _WRITE_HEAD.match(sql)
    if head is None or _READS_ANOTHER.search(sql, head.end()) is not None:
        return None
    return unquote(head.group(1))


_DROP_INDEX = re.compile(_LEAD + r"DROP\s+INDEX\b", re.IGNORECASE)
_DROPPED_OBJECT = re.compile(
    _LEAD + rf"DROP\s+(?:INDEX|TRIGGER){_TO_NAME}(?:IF\s+EXISTS{_TO_NAME})?{_QUALIFIED}", re.IGNORECASE
)


def dropped_index_or_trigger(sql: str) -> str | None:
    """The index or trigger a DROP INDEX / DROP TRIGGER names, or None."""
    match = _DROPPED_OBJECT.match(without_comments(sql))
    return unquote(match.group(2)) if match else None


def changes_plans(sql: str) -> bool:
    """CREATE INDEX, DROP INDEX, ANALYZE or `PRAGMA optimize`: SQLite may read a table otherwise
    afterwards (`matview.replan`)."""
    sql = without_comments(sql)
    return changes_statistics(sql) or _CREATE_INDEX.match(sql) is not None or _DROP_INDEX.match(sql) is not None


def changes_statistics(sql: str) -> bool:
    """ANALYZE or `PRAGMA optimize`: new statistics, which may change SQLite's plans."""
    word = first_word(sql)
    return word == "ANALYZE" or (word == "PRAGMA" and "optimize" in sql.lower())


def is_temporary(sql: str) -> bool:
    """`CREATE TEMP …`: writes no table of the file (so takes no write lock first)."""
    words = without_comments(sql).split(None, 2)
    return len(words) > 1 and words[1].upper() in ("TEMP", "TEMPORARY")


def adds_column(sql: str) -> bool:
    """Whether the statement is `ALTER TABLE … ADD [COLUMN] …`."""
    return _ADD_COLUMN.match(without_comments(sql)) is not None


_BLANK = re.compile(_LEAD + r";?\s*\Z", re.DOTALL)


def split_script(sql: str) -> list[str]:
    """The statements of `sql`, each with its `;` (SQLite's own sqlite3_complete decides
    where one ends: a `;` inside a string, a comment or a trigger body ends nothing)."""
    if ";" not in sql:
        return [sql]
    parts, start = [], 0
    for match in re.finditer(";", sql):
        chunk = sql[start : match.end()]
        if apsw.complete(chunk):
            parts.append(chunk)
            start = match.end()
    parts.append(sql[start:])
    found = [part for part in parts if not _BLANK.match(part)]
    return found or [sql]


#: what a statement that starts with WITH does: the first of these after its common table expressions
_VERBS_AFTER_WITH = {"SELECT", "VALUES", "INSERT", "REPLACE", "UPDATE", "DELETE"}


def first_word(sql: str) -> str:
    """The statement's verb (`SELECT`, `INSERT`, `CREATE`, …), upper case: its first word, or
    for `WITH … INSERT/UPDATE/DELETE/SELECT` the verb after the common table expressions (a
    write must fold and take the write lock as a plain `INSERT` does)."""
    match = _FIRST_WORD.match(sql)
    word = match.group(1).upper() if match else ""
    if word != "WITH":
        return word
    try:
        tokens = tokenize(sql)
    except Error:
        return word  # (SQLite will say what is wrong with it)
    depth = 0
    for token in tokens:
        if token.kind == TokenType.L_PAREN:
            depth += 1
        elif token.kind == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and token.text.upper() in _VERBS_AFTER_WITH:
            return token.text.upper()
    return word
