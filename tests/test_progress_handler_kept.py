"""An application's progress handler survives CREATE, REFRESH and DROP MATERIALIZED VIEW, which
report their own progress through a handler of matview's (found by hunt 69: removing matview's
removed the application's too)."""

from __future__ import annotations

from pathlib import Path

import matview


def test_an_applications_progress_handler_stays(tmp_path: Path) -> None:
    conn = matview.connect(str(tmp_path / "t.db"))
    conn.execute("CREATE TABLE t(g INT, x INT)")
    with conn:
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i % 5, i) for i in range(5000)])
    calls: list[int] = []

    def application() -> bool:
        calls.append(1)
        return False

    conn.apsw.set_progress_handler(application, 100)
    conn.execute("CREATE MATERIALIZED VIEW v AS SELECT g, sum(x) FROM t GROUP BY g")
    conn.execute("REFRESH MATERIALIZED VIEW v")
    conn.execute("DROP MATERIALIZED VIEW v")
    calls.clear()
    conn.execute("SELECT sum(t2.x) FROM t t1, t t2 WHERE t1.g = t2.g AND t1.x < 300").fetchall()
    assert calls  # (the application's handler is still called)
