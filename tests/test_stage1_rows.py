"""A joined stage-1 that several set-at-a-time statements read (MIN/MAX's ordered multisets,
REAL sums) is computed once into a TEMP table (`aggregate_sql._Stage1Rows`): the views stay
equal to their SELECT through CREATE, large inserts, deletes, updates of either table and
rollbacks, in both modes; the TEMP table is left empty; a fold of inserts only skips the
ordered multisets' delete pass and still drops nothing it should keep."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_views_match, create_views_both_modes

import matview
from matview.circuit import BULK_ROWS

VIEWS = {
    "by_region": "SELECT c.region, COUNT(*), SUM(o.amt), AVG(o.amt), MIN(o.amt), MAX(o.amt), TOTAL(o.q) "
    "FROM o JOIN c ON o.cid = c.id GROUP BY c.region",
    "filtered": "SELECT c.region, o.st, SUM(o.amt * (1 - o.disc)), SUM(o.amt) FILTER (WHERE o.q > 2), MAX(c.name), "
    "MIN(o.q) FROM o JOIN c ON o.cid = c.id WHERE o.st <> 'x' GROUP BY c.region, o.st",
    "outer": "SELECT c.id, SUM(o.amt), MIN(o.amt), MAX(o.disc) FROM c LEFT JOIN o ON o.cid = c.id GROUP BY c.id",
    "whole": "SELECT SUM(o.amt), AVG(o.disc), COUNT(o.amt), MAX(o.amt) FROM o LEFT JOIN c ON o.cid = c.id",
}


def _value(rng: random.Random) -> object:
    pick = rng.random()
    if pick < 0.05:
        return None
    if pick < 0.12:
        return rng.choice([0.0, -0.0, 2.0**-10, -(2.0**-10), 2.0**53, 2.0**53 - 1, 1e-5, 5, -7, "12.5", "abc"])
    if pick < 0.2:
        return rng.uniform(-1e6, 1e6)
    return round(rng.uniform(-50, 1000), 2)


def _orders(rng: random.Random, count: int) -> list[tuple[object, ...]]:
    return [(rng.randrange(35), _value(rng), _value(rng), rng.randrange(5), rng.choice("xyz")) for _ in range(count)]


def _stage1_rows_left(conn: matview.Connection) -> int:
    tables = [r[0] for r in conn.apsw.execute("SELECT name FROM temp.sqlite_master WHERE name LIKE '__dbsp_stage1_%'")]
    return sum(conn.apsw.execute(f'SELECT count(*) FROM temp."{t}"').fetchone()[0] for t in tables)


def test_joined_stage1_read_by_several_passes(tmp_path: Path) -> None:
    rng = random.Random(32)
    conn = matview.connect(str(tmp_path / "stage1.db"))
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, region TEXT, name TEXT)")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amt REAL, disc REAL, q INT, st TEXT)")
    insert = "INSERT INTO o(cid, amt, disc, q, st) VALUES (?, ?, ?, ?, ?)"
    with conn:
        customers = [(i, rng.choice("NSEW"), rng.choice("aBc")) for i in range(30)]
        conn.executemany("INSERT INTO c VALUES (?, ?, ?)", customers)
        conn.executemany(insert, _orders(rng, 4 * BULK_ROWS))
    live = create_views_both_modes(conn, VIEWS)
    assert_views_match(conn, live)
    made = conn.apsw.execute("SELECT count(*) FROM temp.sqlite_master WHERE name LIKE '__dbsp_stage1_%'").fetchone()
    assert made[0] > 0  # (the CREATEs took the TEMP table path)
    for step in range(12):
        try:
            with conn:
                kind = step % 4
                if kind == 0:
                    conn.executemany(insert, _orders(rng, 3 * BULK_ROWS))  # inserts only: no delete pass
                elif kind == 1:
                    conn.execute("DELETE FROM o WHERE id % ? = ?", (rng.randrange(2, 5), rng.randrange(2)))
                elif kind == 2:
                    conn.execute("UPDATE o SET amt = amt * 1.5 + 0.01 WHERE id % 3 = ?", (rng.randrange(3),))
                    conn.execute("UPDATE c SET region = ? WHERE id % 4 = ?", (rng.choice("NSEW"), rng.randrange(4)))
                else:
                    conn.executemany(insert, _orders(rng, 2 * BULK_ROWS))
                    conn.execute("DELETE FROM c WHERE id % 7 = ?", (rng.randrange(7),))
                if step % 5 == 4:
                    raise KeyError("roll back")
        except KeyError:
            pass
        assert_views_match(conn, live)
        assert _stage1_rows_left(conn) == 0
    conn.execute("PRAGMA integrity_check")
    conn.close()
    reopened = matview.connect(str(tmp_path / "stage1.db"))
    assert_views_match(reopened, live)
