"""Writes by a program that has never heard of matview: stdlib `sqlite3` in its own process.

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
