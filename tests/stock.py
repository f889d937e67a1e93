"""A program that has never heard of matview: stdlib `sqlite3` (and tools built on it) in its
own process, writing (`stock_sqlite3`) or reading (`stock_read`, `stock_python`).

Never in the test process itself: two different SQLite libraries (apsw's and the stdlib's)
open on one file in one process corrupt it, because POSIX advisory locks are per process and
closing either library's file descriptor drops the other's locks (sqlite.org/howtocorrupt.html
§2.2.1). A real stock client is always another process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

_SCRIPT = r"""
import json, sqlite3, sys
path, pragmas, statements, commit = json.loads(sys.stdin.read())
db = sqlite3.connect(path, timeout=10, isolation_level=None)
errors = []
for pragma in pragmas:
    db.execute(pragma)
txn = len(statements) > 1 or not commit
if txn:
    db.execute("BEGIN")
for sql in statements:
    try:
        db.execute(sql)
    except sqlite3.IntegrityError:
        pass
    except sqlite3.Error as e:
        errors.append(f"{sql}: {e!r}")
if txn:
    db.execute("COMMIT" if commit else "ROLLBACK")
db.close()
print(json.dumps({"version": sqlite3.sqlite_version, "errors": errors}))
"""


def stock_sqlite3(path: str | Path, statements: list[str], *, pragmas: list[str] = (), commit: bool = True) -> dict:
    """Run `statements` with stdlib sqlite3 in a subprocess (one transaction when several or
    when not committing); constraint violations are ignored. Returns {"version", "errors"}."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        input=json.dumps([str(path), list(pragmas), statements, commit]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


_READ_SCRIPT = r"""
import json, sqlite3, sys
path, queries = json.loads(sys.stdin.read())
def typed(value):
    return {"blob": value.hex()} if isinstance(value, bytes) else value
db = sqlite3.connect(path, timeout=10, isolation_level=None)
results = []
for sql in queries:
    try:
        cursor = db.execute(sql)
        rows = [[typed(v) for v in row] for row in cursor.fetchall()]
        results.append({"columns": [d[0] for d in cursor.description or ()], "rows": rows})
    except sqlite3.Error as e:
        results.append({"error": f"{type(e).__name__}: {e}"})
db.close()
print(json.dumps({"version": sqlite3.sqlite_version, "results": results}))
"""


class StockError(Exception):
    """A statement failed in the stock client; the message is its error."""


def _untyped(value: Any) -> Any:
    return bytes.fromhex(value["blob"]) if isinstance(value, dict) else value


def stock_python(script: str, payload: Any, timeout: float = 120) -> Any:
    """Run a Python `script` in a subprocess (stdlib sqlite3 world, matview never imported),
    with `payload` as JSON on its stdin; its stdout is parsed as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"stock subprocess failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def stock_reads(path: str | Path, queries: list[str]) -> list[dict[str, Any]]:
    """Run each query with stdlib sqlite3 in one subprocess. Per query: {"columns", "rows"} with
    rows as lists of JSON-able typed values (int, float, str, None; a blob is {"blob": hex}),
    or {"error": "OperationalError: …"}."""
    return list(stock_python(_READ_SCRIPT, [str(path), queries])["results"])


def stock_read(path: str | Path, query: str) -> list[tuple[Any, ...]]:
    """The rows of one query read by stdlib sqlite3 in a subprocess, as Python values (int
    stays int, 3.0 stays float, blobs are bytes); raises StockError with the client's message."""
    result = stock_reads(path, [query])[0]
    if "error" in result:
        raise StockError(result["error"])
    return [tuple(_untyped(v) for v in row) for row in result["rows"]]
