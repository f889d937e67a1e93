"""GROUP_CONCAT concatenates in the order SQLite's plan visits a group's rows; matview keeps
rowid order. An index on just the GROUP BY columns keeps it (maintained); an index with other
columns changes it: refused at CREATE, and a view whose table gains one later reads as broken
(naming the index) while writes go on — dropping the index brings the view back, exact."""

from __future__ import annotations

import sqlite3

import pytest
from oracle import assert_view_matches

import matview

SELECT = "SELECT AlbumId, group_concat(Name) AS names FROM tracks GROUP BY AlbumId"


def _connect(tmp_path):
    conn = matview.connect(str(tmp_path / "db.sqlite"))
    conn.execute("CREATE TABLE tracks(id INTEGER PRIMARY KEY, AlbumId INT, Name TEXT)")
    conn.execute("INSERT INTO tracks VALUES (1, 1, 'b'), (2, 1, 'a'), (3, 2, 'z'), (4, 2, 'c')")
    return conn


def test_an_index_on_the_group_columns_keeps_the_order(tmp_path):
    conn = _connect(tmp_path)
    conn.execute("CREATE INDEX by_album ON tracks(AlbumId)")
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {SELECT}")
    conn.execute("INSERT INTO tracks VALUES (5, 1, 'aa'), (6, 3, 'q')")
    conn.execute("DELETE FROM tracks WHERE id = 2")
    assert_view_matches(conn, "v", SELECT)


def test_an_index_that_reorders_a_group_is_refused_at_create(tmp_path):
    conn = _connect(tmp_path)
    conn.execute("CREATE INDEX by_album_name ON tracks(AlbumId, Name)")
    with pytest.raises(matview.UnsupportedQuery, match="by_album_name"):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {SELECT}")


@pytest.mark.parametrize("who", ["matview", "stock sqlite3"])
def test_an_index_made_later_breaks_the_view_until_it_is_dropped(tmp_path, who):
    conn = _connect(tmp_path)
    conn.execute(f"CREATE MATERIALIZED VIEW v AS {SELECT}")
    ddl = "CREATE INDEX by_album_name ON tracks(AlbumId, Name)"
    if who == "matview":
        conn.execute(ddl)
    else:
        stock = sqlite3.connect(str(tmp_path / "db.sqlite"))
        stock.execute(ddl)
        stock.commit()
        stock.close()
    conn.execute("INSERT INTO tracks VALUES (5, 1, 'aa')")  # writes go on
    with pytest.raises(matview.Error, match="by_album_name"):
        conn.execute("SELECT * FROM v").fetchall()
    conn.execute("DROP INDEX by_album_name")
    conn.execute("INSERT INTO tracks VALUES (6, 2, 'd')")
    assert_view_matches(conn, "v", SELECT)
