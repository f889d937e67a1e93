"""A small shop file for trying matview in Datasette (and the file the plugin's tests serve).

Run:  python examples/datasette_demo.py shop.db && datasette shop.db
then open http://127.0.0.1:8001/-/matview (the plugin ships with ``pip install 'matview[datasette]'``).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import matview

REGIONS = ["north", "south", "east", "west"]

VIEWS = {
    "revenue": "SELECT region, COUNT(*) AS orders, SUM(amount) AS total, MAX(amount) AS largest "
    "FROM orders GROUP BY region",
    "by_customer": "SELECT c.name, c.region, COUNT(o.id) AS orders, SUM(o.amount) AS total "
    "FROM customers c LEFT JOIN orders o ON o.customer = c.id GROUP BY c.name, c.region",
    # an aggregate over an aggregate (TPC-H Q13's shape): matview keeps the inner one as a hidden node
    "order_count_histogram": "SELECT n AS orders_per_customer, COUNT(*) AS customers FROM "
    "(SELECT c.id, COUNT(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer = c.id GROUP BY c.id) "
    "GROUP BY n",
}
#: deferred: the writes after its CREATE stay pending until a flush (the page shows the count)
DEFERRED = ("big_orders", "SELECT id, customer, amount FROM orders WHERE amount >= 900")


def build(path: str | Path, *, customers: int = 40, orders: int = 400, pending: int = 25, seed: int = 7) -> None:
    """Write the demo file: two tables, three immediate views, one deferred view with
    `pending` writes not folded yet."""
    rng = random.Random(seed)
    conn = matview.connect(str(path))
    try:
        with conn:
            conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL)")
            conn.execute(
                "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER NOT NULL REFERENCES customers(id), "
                "region TEXT NOT NULL, amount INTEGER NOT NULL)"
            )
            conn.executemany(
                "INSERT INTO customers(id, name, region) VALUES (?, ?, ?)",
                [(i, f"customer {i:02d}", rng.choice(REGIONS)) for i in range(1, customers + 1)],
            )
            conn.executemany(
                "INSERT INTO orders(customer, region, amount) VALUES (?, ?, ?)",
                [(rng.randint(1, customers), rng.choice(REGIONS), rng.randint(1, 1000)) for _ in range(orders)],
            )
        for name, select in VIEWS.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
        name, select = DEFERRED
        conn.execute(f"CREATE MATERIALIZED VIEW {name} WITH (maintenance = 'deferred') AS {select}")
        with conn:
            conn.executemany(
                "INSERT INTO orders(customer, region, amount) VALUES (?, ?, ?)",
                [(rng.randint(1, customers), rng.choice(REGIONS), rng.randint(1, 1000)) for _ in range(pending)],
            )
    finally:
        conn.close()


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "shop.db")
    if target.exists():
        sys.exit(f"{target} exists; give a new path")
    build(target)
    print(f"wrote {target}; now: datasette {target}   (then open http://127.0.0.1:8001/-/matview)")
