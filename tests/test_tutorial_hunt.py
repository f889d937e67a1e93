# ruff: noqa: E501  (each query stays on one line, as a tutorial writes it)
"""Hunt 31: ~470 queries from the exercises people write for the Chinook, Northwind and Sakila
sample databases, maintained under random write mixes. Two defects, kept here as regressions:

* a view grouped by a CASE of text literals (`CASE WHEN Milliseconds < 180000 THEN 'short' …
  END`) was taken for one grouped by values with several spellings, so an ordinary index made
  later (which changes SQLite's scan order) broke it, REFRESH too; such a CASE has one storage
  class (`sql.value_classes`);
* a common table expression SQLite materializes is reported read under its own name, which the
  whole-recompute front end took for a table-valued function: a textbook query (customer
  grouping percentages) was refused instead of recomputed whole (`sql.whole.cte_names`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from oracle import assert_view_matches

import matview

TRACKS = "CREATE TABLE Track(TrackId INTEGER PRIMARY KEY, Name NVARCHAR(200) NOT NULL, GenreId INTEGER, Milliseconds INTEGER NOT NULL, Composer NVARCHAR(220))"
BY_LENGTH = "SELECT CASE WHEN Milliseconds < 180000 THEN 'short' WHEN Milliseconds < 300000 THEN 'medium' ELSE 'long' END AS Length, COUNT(*) AS Tracks FROM Track GROUP BY 1"
BY_RATING = "SELECT CASE GenreId WHEN 1 THEN 'Rock' WHEN 2 THEN 'Jazz' END AS Genre, sum(Milliseconds) AS ms FROM Track GROUP BY Genre"


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_a_group_by_case_of_text_literals_survives_a_later_index(tmp_path: Path, mode: str) -> None:
    conn = matview.connect(str(tmp_path / "t.db"))
    conn.execute(TRACKS)
    conn.execute("INSERT INTO Track VALUES (1,'a',1,100000,'x'),(2,'b',1,250000,'y'),(3,'c',2,400000,NULL)")
    views = {"by_length": BY_LENGTH, "by_rating": BY_RATING}
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = '{mode}') AS {sql}")
        assert "recomputed whole" not in conn.view(name).explain()
    conn.execute("CREATE INDEX IX_Track_Genre_Ms ON Track (GenreId, Milliseconds)")
    conn.execute("INSERT INTO Track VALUES (4,'d',2,500000,NULL), (5,'e',3,1000,NULL)")
    conn.execute("DELETE FROM Track WHERE TrackId = 2")
    for name, sql in views.items():
        assert_view_matches(conn, name, sql)
        conn.execute(f"REFRESH MATERIALIZED VIEW {name}")
        assert_view_matches(conn, name, sql)


@pytest.mark.fall_back_to_whole
def test_a_materialized_cte_is_not_taken_for_a_table_function(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "g.db"))
    conn.execute("CREATE TABLE Orders(OrderID INTEGER PRIMARY KEY, CustomerID TEXT, Amount NUMERIC)")
    conn.execute("INSERT INTO Orders VALUES (1,'ALFKI',500),(2,'ALFKI',900),(3,'BONAP',7000)")
    grouping = (
        # (`first`: a CTE name sqlglot takes for a keyword)
        "WITH first AS (SELECT CustomerID, SUM(Amount) AS Total FROM Orders GROUP BY CustomerID), "
        "g AS (SELECT CustomerID, CASE WHEN Total < 1000 THEN 'Low' WHEN Total < 5000 THEN 'Medium' ELSE 'High' END AS CustomerGroup FROM first) "
        "SELECT CustomerGroup, COUNT(*) AS n, COUNT(*) * 1.0 / (SELECT COUNT(*) FROM g) AS pct FROM g GROUP BY CustomerGroup"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW grp AS {grouping}")
    assert_view_matches(conn, "grp", grouping)
    with conn:
        conn.execute("INSERT INTO Orders VALUES (4, 'CACTU', 1500), (5, 'ALFKI', 4000)")
        conn.execute("UPDATE Orders SET Amount = 10 WHERE OrderID = 3")
    assert_view_matches(conn, "grp", grouping)
    assert conn.view("grp").verify()
