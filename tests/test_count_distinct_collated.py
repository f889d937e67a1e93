"""COUNT(DISTINCT x) of a NOCASE or RTRIM value counts SQLite's classes ('a@x' and 'A@x' are one
under NOCASE, 't' and 't ' under RTRIM; 'é' and 'É' are two: NOCASE folds ASCII only), whichever
spelling each class shows — so it is maintained (it was refused like MIN/MAX over such values,
whose result is a spelling). Checked against SQLite under random writes, both modes, reopen."""

from __future__ import annotations

import random

import pytest
from oracle import assert_views_match, create_views_both_modes

import matview

VIEWS = {
    "per_city": "SELECT city, count(DISTINCT email) AS n FROM c GROUP BY city",
    "overall": "SELECT count(DISTINCT email), count(DISTINCT tag), count(*) FROM c",
    "filtered": "SELECT city, count(DISTINCT email) FILTER (WHERE id > 2) FROM c GROUP BY city",
}


@pytest.mark.parametrize("seed", range(2))
def test_count_distinct_of_collated_values(tmp_path, seed):
    rng = random.Random(seed)
    path = str(tmp_path / "db.sqlite")
    conn = matview.connect(path)
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, email TEXT COLLATE NOCASE, city TEXT, tag TEXT COLLATE RTRIM)")
    live = create_views_both_modes(conn, VIEWS)
    for step in range(40):
        with conn:
            for _ in range(rng.randint(1, 5)):
                kind = rng.random()
                if kind < 0.5:
                    conn.execute(
                        "INSERT INTO c(email, city, tag) VALUES (?, ?, ?)",
                        (
                            rng.choice(["a@x", "A@x", "b@x", "B@X", None, "é@x", "É@x"]),
                            rng.choice("xy"),
                            rng.choice(["t", "t ", "t  ", "T", None]),
                        ),
                    )
                elif kind < 0.75:
                    conn.execute("DELETE FROM c WHERE id % 4 = ?", (rng.randint(0, 3),))
                else:
                    conn.execute("UPDATE c SET email = upper(email) WHERE id % 3 = ?", (rng.randint(0, 2),))
        if step % 15 == 14:
            conn.close()
            conn = matview.connect(path)
        assert_views_match(conn, live)


def test_min_of_a_collated_value_stays_refused_over_a_join(tmp_path):
    """(Over one table it is maintained now: `test_bare_columns`.)"""
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, email TEXT COLLATE NOCASE)")
    conn.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT)")
    with pytest.raises(matview.UnsupportedQuery, match="NOCASE-collated"):
        conn.execute("CREATE MATERIALIZED VIEW v AS SELECT min(email) FROM c JOIN o ON o.cid = c.id")
