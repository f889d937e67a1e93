"""What hunts 37 (decision-support SQL under write mixes) and 38 (values, types, every way of
reading a view) found.

* The plain view stock clients read (`main.v`) read a CAST column as its untyped stored
  column: `CAST(c AS TEXT) = 1` matched '1' in the SELECT and nothing in the view
  (`readable._no_affinity` casts it again, which changes no value).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from oracle import bag  # noqa: E402

import matview  # noqa: E402

CASTS = (
    "SELECT id, CAST(c AS TEXT) AS z, CAST(a AS NUMERIC) AS an, CAST(c AS INTEGER) AS i, CAST(a AS REAL) AS r FROM t"
)


def test_stock_readers_compare_a_cast_column_under_its_affinity(tmp_path: Path) -> None:
    path = str(tmp_path / "casts.db")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, c)")
    conn.execute("INSERT INTO t(a, c) VALUES ('1', '1'), ('x', 2), ('2.0', 2.0), (NULL, X'31')")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {CASTS}")
    filters = ["z = 1", "an = '1'", "i = '1'", "r = '2'", "z > 1", "an IN ('1', '2')", "z = '1'", "i = 2"]
    conn.close()
    stock = sqlite3.connect(path)
    for where in filters:
        got = stock.execute(f"SELECT * FROM v WHERE {where}").fetchall()
        want = stock.execute(f"SELECT * FROM ({CASTS}) WHERE {where}").fetchall()
        assert bag(got) == bag(want), where
    stock.close()
