"""matview demo: create materialized views over a SQLite file, stream writes, watch them stay exact.

Run:  python examples/demo.py [path.db]
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import apsw.ext
from rich.console import Console
from rich.table import Table

import matview

console = Console()


def show(conn: matview.Connection, sql: str, title: str) -> None:
    # (a query that returns no row has finished before its columns could be asked for)
    columns = [name for name, *_rest in apsw.ext.query_info(conn.apsw, sql).description or ()]
    rows = conn.execute(sql).fetchall()
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    console.print(table)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "shop.db"
    conn = matview.connect(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, region TEXT, amount INTEGER, note TEXT)")
    with conn:
        conn.executemany(
            "INSERT INTO orders(region, amount, note) VALUES (?, ?, ?)",
            [(random.choice(["north", "south", "east", "west"]), random.randint(1, 500), None) for _ in range(5000)],
        )
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS revenue AS
                    SELECT region, COUNT(*) AS n, SUM(amount) AS total, AVG(amount) AS mean,
                           MIN(amount) AS smallest, MAX(amount) AS largest
                    FROM orders GROUP BY region""")
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS big_orders WITH (maintenance = 'deferred') AS
                    SELECT id, region, amount * 2 AS doubled FROM orders WHERE amount >= 450""")
    # joins: every region's manager, and the regions nobody ordered from yet (a LEFT JOIN)
    conn.execute("CREATE TABLE IF NOT EXISTS regions(name TEXT PRIMARY KEY, manager TEXT)")
    conn.executemany(
        "INSERT OR IGNORE INTO regions VALUES (?, ?)",
        [
            ("north", "Ada"),
            ("south", "Grace"),
            ("east", "Ada"),
            ("west", "Edsger"),
            ("central", "Barbara"),
            ("islands", "Barbara"),
        ],
    )
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS by_manager AS
                    SELECT r.manager, COUNT(*) AS orders, SUM(o.amount) AS total
                    FROM orders o JOIN regions r ON o.region = r.name GROUP BY r.manager""")
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS quiet_regions AS
                    SELECT r.name, r.manager FROM regions r LEFT JOIN orders o ON o.region = r.name
                    WHERE o.id IS NULL""")
    # subqueries and CTEs: managers whose region has a big order; regions above the average order
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS big_spender_managers AS
                    SELECT r.name, r.manager FROM regions r
                    WHERE EXISTS (SELECT 1 FROM orders o WHERE o.region = r.name AND o.amount > 495)""")
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS above_average AS
                    WITH per_region AS (SELECT region, AVG(amount) AS mean, COUNT(*) AS n FROM orders GROUP BY region)
                    SELECT region, n FROM per_region WHERE mean > 250""")
    # a view over a view (it folds with revenue), and an aggregate of an aggregate (TPC-H Q13's shape)
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS busy_regions AS
                    SELECT rv.region, rv.total, r.manager FROM revenue rv JOIN regions r ON r.name = rv.region
                    WHERE rv.n > 1200""")
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS order_size_histogram AS
                    SELECT orders_per_manager, COUNT(*) AS managers FROM
                      (SELECT r.manager, COUNT(o.id) AS orders_per_manager FROM regions r
                       LEFT JOIN orders o ON o.region = r.name GROUP BY r.manager)
                    GROUP BY orders_per_manager""")
    # bare columns beside MAX: each region's largest order, the row it comes from (SQLite's rule)
    conn.execute("""CREATE MATERIALIZED VIEW IF NOT EXISTS largest_order AS
                    SELECT region, id, max(amount) AS amount FROM orders GROUP BY region""")
    console.print(f"[bold]database:[/bold] {path}")
    show(conn, "SELECT * FROM revenue ORDER BY region", "revenue (immediate) after CREATE")

    console.print("\n[bold]streaming 2,000 single-row transactions (inserts, updates, deletes)…[/bold]")
    start = time.perf_counter()
    for _ in range(2000):
        with conn:
            action = random.random()
            if action < 0.6:
                conn.execute(
                    "INSERT INTO orders(region, amount) VALUES (?, ?)",
                    (random.choice(["north", "south", "east", "west", "central"]), random.randint(1, 500)),
                )
            elif action < 0.8:
                conn.execute("UPDATE orders SET amount = amount + 1 WHERE id = ?", (random.randint(1, 7000),))
            else:
                conn.execute("DELETE FROM orders WHERE id = ?", (random.randint(1, 7000),))
    elapsed = time.perf_counter() - start
    console.print(f"{2000 / elapsed:,.0f} transactions/s with views maintained")
    console.print(f"big_orders has {conn.view('big_orders').pending()} pending deltas (deferred mode)")

    show(conn, "SELECT * FROM revenue ORDER BY region", "revenue after the stream")
    show(conn, "SELECT count(*), sum(doubled) FROM big_orders", "big_orders (deferred, read merges pending)")
    show(conn, "SELECT * FROM by_manager ORDER BY manager", "by_manager (orders ⋈ regions)")
    show(conn, "SELECT * FROM quiet_regions ORDER BY name", "quiet_regions (regions ⟕ orders, no order yet)")
    show(conn, "SELECT * FROM big_spender_managers ORDER BY name", "big_spender_managers (EXISTS subquery)")
    show(conn, "SELECT * FROM largest_order ORDER BY region", "largest_order (the row of each region's MAX)")
    show(conn, "SELECT * FROM above_average ORDER BY region", "above_average (an aggregating CTE, filtered)")
    for view in conn.views():
        ok = view.verify()
        console.print(f"verify {view.name}: {'[green]equals its SELECT[/green]' if ok else '[red]DIFFERS[/red]'}")
        if not ok:
            sys.exit(1)
    console.print("\n" + conn.view("by_manager").explain(), markup=False)
    conn.close()


if __name__ == "__main__":
    main()
