# ruff: noqa: E501  (each query stays on one line, as an application writes it)
"""Hunt 52: real application queries (Chinook / Northwind / blog-SaaS schemas) under random write
mixes in both modes — joins of 2–6 tables with GROUP BY/HAVING, LEFT JOIN chains with
COUNT/SUM/COALESCE, CASE buckets, strftime/date grouping over TEXT and epoch dates, string and
JSON functions, IN/EXISTS/NOT EXISTS/scalar subqueries, CTEs referenced twice, set operations,
windows and top N (recomputed whole), keyword-named columns, NOCASE join directions, messy
numeric text, INTEGER PRIMARY KEY DESC / INT PRIMARY KEY tables, user triggers with
RAISE(IGNORE), generated columns, stock sqlite3 writers.

No wrong answer was found; these are fast regressions of the shapes that held."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oracle import assert_view_matches, check_write_mix
from stock import stock_sqlite3

import matview

MODES = ("immediate", "deferred")

# as users run it: what the incremental engine refuses is recomputed whole
pytestmark = pytest.mark.fall_back_to_whole


def _q(v):
    if v is None:
        return "NULL"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


# --------------------------------------------------------------------------------------
# Chinook-like store: FK cascades, self-referencing employees, REPLACE/upserts, stock writes

CHINOOK = [
    "PRAGMA foreign_keys = ON",
    "CREATE TABLE artists(ArtistId INTEGER PRIMARY KEY, Name TEXT)",
    "CREATE TABLE albums(AlbumId INTEGER PRIMARY KEY, Title TEXT NOT NULL, ArtistId INTEGER REFERENCES artists(ArtistId) ON DELETE CASCADE)",
    "CREATE TABLE tracks(TrackId INTEGER PRIMARY KEY, Name TEXT, AlbumId INTEGER REFERENCES albums(AlbumId) ON DELETE SET NULL, GenreId INTEGER, Milliseconds INTEGER, UnitPrice NUMERIC(10,2))",
    "CREATE TABLE employees(EmployeeId INTEGER PRIMARY KEY, LastName TEXT, ReportsTo INTEGER REFERENCES employees(EmployeeId) ON DELETE SET NULL)",
    "CREATE TABLE customers(CustomerId INTEGER PRIMARY KEY, Email TEXT UNIQUE, Country TEXT, SupportRepId INTEGER REFERENCES employees(EmployeeId) ON DELETE SET NULL)",
    "CREATE TABLE invoices(InvoiceId INTEGER PRIMARY KEY, CustomerId INTEGER REFERENCES customers(CustomerId) ON DELETE CASCADE, InvoiceDate DATETIME, Total DECIMAL(10,2))",
    "CREATE TABLE invoice_items(InvoiceLineId INTEGER PRIMARY KEY, InvoiceId INTEGER REFERENCES invoices(InvoiceId) ON DELETE CASCADE, TrackId INTEGER, UnitPrice REAL, Quantity INTEGER)",
    "INSERT INTO artists VALUES (1, 'AC/DC'), (2, 'Accept'), (3, NULL), (4, 'Queen')",
    "INSERT INTO albums VALUES (1, 'A1', 1), (2, 'A2', 1), (3, 'A3', 2), (4, 'A4', 3), (5, 'A5', NULL)",
    "INSERT INTO tracks VALUES (1, 'Intro', 1, 1, 200000, 0.99), (2, 'Go Down', 1, 2, 400000, 1.99), (3, 'Night', 2, 1, NULL, 18), (4, NULL, 3, NULL, 150000, NULL), (5, 'Love', 4, 2, 370000, 0.99), (6, 'Dog', NULL, 1, 90000, '1.49')",
    "INSERT INTO employees VALUES (1, 'Adams', NULL), (2, 'Edwards', 1), (3, 'Peacock', 2), (4, 'Park', 2)",
    "INSERT INTO customers VALUES (1, 'a@x', 'USA', 3), (2, 'b@x', 'usa', 4), (3, 'c@x', NULL, NULL), (4, 'd@x', 'Brazil', 3)",
    "INSERT INTO invoices VALUES (1, 1, '2023-01-05 00:00:00', 1.98), (2, 1, '2023-02-11', 3.96), (3, 2, NULL, 0.99), (4, 4, '2023-02-28T10:00:00', 13), (5, 3, '2022-12-31 00:00:00', NULL)",
    "INSERT INTO invoice_items VALUES (1, 1, 1, 0.99, 2), (2, 2, 2, 1.99, 1), (3, 2, 5, 0.99, NULL), (4, 3, 3, 18, 1), (5, 4, 9, 0.99, 3), (6, 5, 1, 0.99, 0)",
]

CHINOOK_VIEWS = {
    "artist_albums": "SELECT ar.ArtistId, ar.Name, COUNT(al.AlbumId) AS albums FROM artists ar LEFT JOIN albums al ON al.ArtistId = ar.ArtistId GROUP BY ar.ArtistId",
    "monthly": "SELECT strftime('%Y-%m', InvoiceDate) AS month, COUNT(*) AS n, ROUND(SUM(Total), 2) AS total, ROUND(AVG(Total), 2) AS avg FROM invoices GROUP BY month",
    "rep_sales": "SELECT e.EmployeeId, COUNT(DISTINCT c.CustomerId) AS custs, SUM(i.Total) AS sales FROM employees e JOIN customers c ON c.SupportRepId = e.EmployeeId JOIN invoices i ON i.CustomerId = c.CustomerId GROUP BY e.EmployeeId",
    "manager": "SELECT e.EmployeeId, e.LastName, m.LastName AS manager FROM employees e LEFT JOIN employees m ON m.EmployeeId = e.ReportsTo",
    "no_invoice": "SELECT c.CustomerId, c.Email FROM customers c WHERE NOT EXISTS (SELECT 1 FROM invoices i WHERE i.CustomerId = c.CustomerId)",
    "artist_chain": "SELECT ar.Name, COUNT(t.TrackId) AS tracks, TOTAL(t.UnitPrice) AS price FROM artists ar LEFT JOIN albums al ON al.ArtistId = ar.ArtistId LEFT JOIN tracks t ON t.AlbumId = al.AlbumId GROUP BY ar.ArtistId",
    "longest": "SELECT AlbumId, Name, MAX(Milliseconds) AS longest FROM tracks GROUP BY AlbumId",
    "cte_twice": "WITH cs AS (SELECT CustomerId, SUM(Total) AS s FROM invoices GROUP BY CustomerId) SELECT a.CustomerId, a.s, (SELECT COUNT(*) FROM cs b WHERE b.s > a.s) AS better FROM cs a",
    "followups": "SELECT InvoiceId, date(InvoiceDate, '+7 days') AS followup FROM invoices WHERE date(InvoiceDate, '+30 days') > '2023-02-01'",
    "top": "SELECT t.TrackId, SUM(ii.Quantity) AS sold FROM tracks t JOIN invoice_items ii ON ii.TrackId = t.TrackId GROUP BY t.TrackId ORDER BY sold DESC, t.TrackId LIMIT 3",
    "running": "SELECT InvoiceId, SUM(Total) OVER (PARTITION BY CustomerId ORDER BY InvoiceDate, InvoiceId) AS running FROM invoices",
    "team": "SELECT m.EmployeeId, COUNT(e.EmployeeId) AS reports, group_concat(e.EmployeeId, ',' ORDER BY e.EmployeeId) AS ids FROM employees m LEFT JOIN employees e ON e.ReportsTo = m.EmployeeId GROUP BY m.EmployeeId",
}


def _chinook_write(conn, rng: random.Random) -> None:
    choice = rng.randrange(12)
    sql = [
        f"INSERT INTO tracks(Name, AlbumId, GenreId, Milliseconds, UnitPrice) VALUES ('T', {rng.randrange(1, 6)}, {rng.randrange(1, 3)}, {rng.choice([100000, 300000, 'NULL'])}, {rng.choice([0.99, 1.99, 2, 'NULL'])})",
        f"UPDATE tracks SET AlbumId = {rng.randrange(1, 6)}, Milliseconds = {rng.randrange(50000, 500000)} WHERE TrackId = {rng.randrange(1, 9)}",
        f"DELETE FROM albums WHERE AlbumId = {rng.randrange(1, 6)}",
        f"DELETE FROM artists WHERE ArtistId = {rng.randrange(1, 5)}",
        f"INSERT OR REPLACE INTO invoices VALUES ({rng.randrange(1, 8)}, {rng.randrange(1, 5)}, '2023-0{rng.randrange(1, 4)}-1{rng.randrange(10)}', {rng.choice([0.99, 1.98, 5, 'NULL'])})",
        f"INSERT INTO customers(CustomerId, Email, Country) VALUES ({rng.randrange(1, 7)}, '{rng.choice('abcdef')}@x', {rng.choice(['NULL', _q('USA'), _q('Canada')])}) ON CONFLICT(Email) DO UPDATE SET Country = excluded.Country",
        f"DELETE FROM customers WHERE CustomerId = {rng.randrange(1, 7)}",
        f"DELETE FROM employees WHERE EmployeeId = {rng.randrange(2, 5)}",
        f"INSERT INTO employees(LastName, ReportsTo) VALUES ('New', {rng.randrange(1, 5)})",
        f"UPDATE employees SET ReportsTo = {rng.choice(['NULL', rng.randrange(1, 6)])} WHERE EmployeeId = {rng.randrange(2, 6)}",
        f"INSERT INTO invoice_items(InvoiceId, TrackId, UnitPrice, Quantity) SELECT {rng.randrange(1, 6)}, TrackId, UnitPrice, 1 FROM tracks WHERE AlbumId = {rng.randrange(1, 6)}",
        f"UPDATE customers SET SupportRepId = {rng.randrange(1, 6)} WHERE CustomerId = {rng.randrange(1, 7)}",
    ][choice]
    try:
        conn.execute(sql)
    except matview.Error:
        raise
    except Exception as e:  # a FOREIGN KEY / UNIQUE failure is the application's, not the view's
        if "constraint" not in str(e).lower():
            raise


@pytest.mark.parametrize("seed", [1, 2])
def test_chinook_dashboard_views_hold_under_cascades_and_upserts(tmp_path, seed):
    conn, live = check_write_mix(tmp_path, CHINOOK, CHINOOK_VIEWS, _chinook_write, seed, steps=12)
    # a stock client's writes with the same FK actions, then a read through matview
    stock_sqlite3(
        tmp_path / "db.sqlite",
        [
            "DELETE FROM artists WHERE ArtistId = 1",
            "UPDATE invoices SET Total = 7 WHERE InvoiceId = 2",
            "INSERT INTO employees(LastName, ReportsTo) VALUES ('Stock', 2)",
        ],
        pragmas=["PRAGMA foreign_keys = ON"],
    )
    for name, sql in live.items():
        assert_view_matches(conn, name, sql)
    conn.close()


# --------------------------------------------------------------------------------------
# user triggers that skip rows with RAISE(IGNORE), before or after the views' capture triggers


@pytest.mark.parametrize("trigger_first", [True, False])
def test_raise_ignore_guards_with_replace_and_upserts(tmp_path, trigger_first):
    path = tmp_path / "db.sqlite"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT UNIQUE, locked INTEGER, plan TEXT)")
    conn.execute(
        "INSERT INTO users VALUES (1, 'a', 1, 'pro'), (2, 'b', 0, 'pro'), (3, 'c', 1, 'free'), (4, 'd', 0, 'free')"
    )
    triggers = [
        "CREATE TRIGGER u_nodel BEFORE DELETE ON users WHEN old.locked BEGIN SELECT RAISE(IGNORE); END",
        "CREATE TRIGGER u_noupd BEFORE UPDATE ON users WHEN old.locked AND new.locked BEGIN SELECT RAISE(IGNORE); END",
        "CREATE TRIGGER u_noins BEFORE INSERT ON users WHEN new.plan = 'bad' BEGIN SELECT RAISE(IGNORE); END",
    ]
    views = {
        "rows": "SELECT id, email, locked, plan FROM users",
        "plans": "SELECT plan, count(*), sum(locked) FROM users GROUP BY plan",
    }
    if trigger_first:
        for t in triggers:
            conn.execute(t)
    for name, sql in views.items():
        for mode in MODES:
            conn.execute(f"CREATE MATERIALIZED VIEW {name}_{mode[:3]} WITH (maintenance = '{mode}') AS {sql}")
    if not trigger_first:
        for t in triggers:
            conn.execute(t)

    def check():
        for name, sql in views.items():
            for mode in MODES:
                assert_view_matches(conn, f"{name}_{mode[:3]}", sql)

    for stmt in [
        "DELETE FROM users WHERE id IN (1, 2)",
        "UPDATE users SET plan = 'team' WHERE id = 3",
        "INSERT OR REPLACE INTO users VALUES (1, 'b', 1, 'bad')",
        "INSERT OR REPLACE INTO users VALUES (5, 'c', 1, 'x')",
        "UPDATE OR REPLACE users SET email = 'a' WHERE id = 4",
        "INSERT INTO users VALUES (6, 'a', 0, 'y') ON CONFLICT(email) DO UPDATE SET plan = 'z'",
        "UPDATE users SET locked = 0 WHERE id = 1",
        "DELETE FROM users",
    ]:
        conn.execute(stmt)
        check()
    conn.execute("INSERT INTO users VALUES (10, 'k', 1, 'pro'), (11, 'l', 1, 'free'), (12, 'm', 0, 'free')")
    stock_sqlite3(
        path,
        [
            "DELETE FROM users WHERE id >= 10",
            "UPDATE users SET plan = 'q' WHERE id = 11",
            "REPLACE INTO users VALUES (13, 'k', 0, 'r')",
        ],
    )
    check()
    conn.close()


# --------------------------------------------------------------------------------------
# INTEGER PRIMARY KEY DESC and INT PRIMARY KEY are not rowid aliases: scan order is the rowid's


@pytest.mark.parametrize("pk", ["id INTEGER PRIMARY KEY DESC", "id INT PRIMARY KEY", "id BIGINT PRIMARY KEY"])
def test_key_that_is_not_the_rowid_keeps_scan_order_views_exact(tmp_path, pk):
    setup = [
        f"CREATE TABLE orders({pk}, cust INTEGER, day TEXT, amount, note TEXT)",
        "CREATE TABLE items(order_id INTEGER, sku TEXT, qty INTEGER)",
        "INSERT INTO orders VALUES (5, 1, '2024-01-02', 5, 'a'), (3, 1, '2024-01-02', 5.0, 'b'), (9, 2, NULL, 7, 'c'), (1, 2, '2024-01-01', NULL, NULL), (7, 1, '2024-01-01', 7, 'd')",
        "INSERT INTO items VALUES (5, 'x', 1), (3, 'y', 2), (9, 'x', 1)",
    ]
    views = {
        "latest": "SELECT cust, id, note, max(day) FROM orders GROUP BY cust",
        "concat": "SELECT cust, group_concat(id), group_concat(note, '') FROM orders GROUP BY cust",
        "bare": "SELECT cust, id, note, count(*) FROM orders GROUP BY cust",
        "amounts": "SELECT amount, count(*), group_concat(note) FROM orders GROUP BY amount",
        "left_items": "SELECT o.id, count(i.sku), sum(i.qty) FROM orders o LEFT JOIN items i ON i.order_id = o.id GROUP BY o.id",
        "unsold": "SELECT o.id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.order_id = o.id)",
    }

    def write(conn, rng):
        conn.execute(
            rng.choice(
                [
                    f"UPDATE OR IGNORE orders SET id = {rng.randrange(1, 30)} WHERE id = {rng.randrange(1, 12)}",
                    f"REPLACE INTO orders VALUES ({rng.randrange(1, 12)}, {rng.randrange(1, 3)}, {rng.choice(['NULL', _q('2024-01-02')])}, {rng.choice([5, 5.0, 7, 'NULL'])}, {_q(rng.choice('abc'))})",
                    f"INSERT OR IGNORE INTO orders VALUES ({rng.randrange(1, 30)}, {rng.randrange(1, 3)}, '2024-01-02', 5.0, 'n')",
                    f"DELETE FROM orders WHERE id = {rng.randrange(1, 30)}",
                    f"INSERT INTO items VALUES ({rng.randrange(1, 30)}, 'z', 1)",
                ]
            )
        )

    conn, _ = check_write_mix(tmp_path, setup, views, write, seed=3, steps=12)
    conn.close()


# --------------------------------------------------------------------------------------
# columns named by keywords SQLite lets stand as identifiers (END, DESC, LEFT, RIGHT, KEY, ROWS…)

KEYWORDS = [
    "CREATE TABLE categories(id INTEGER PRIMARY KEY, name TEXT, left INTEGER, right INTEGER)",
    "CREATE TABLE rooms(id INTEGER PRIMARY KEY, desc TEXT, rows INTEGER)",
    "CREATE TABLE bookings(id INTEGER PRIMARY KEY, room INTEGER, start TEXT, end TEXT, key TEXT, desc TEXT)",
    "CREATE TABLE logs(id INTEGER PRIMARY KEY, action TEXT, key TEXT, no INTEGER, offset INTEGER, view INTEGER)",
    "INSERT INTO categories VALUES (1, 'root', 1, 10), (2, 'a', 2, 5), (3, 'a1', 3, 4), (4, 'b', 6, 9), (5, 'b1', 7, 8)",
    "INSERT INTO rooms VALUES (1, 'big', 10), (2, NULL, 3), (3, 'small', 6)",
    "INSERT INTO bookings VALUES (1, 1, '2024-05-01 09:00', '2024-05-01 11:00', 'k1', 'END of year'), (2, 1, '2024-05-01 10:00', NULL, 'k2', NULL), (3, 2, '2024-05-02 09:00', '2024-05-02 08:00', 'k1', 'like it')",
    "INSERT INTO logs VALUES (1, 'book', 'k1', 1, 10, 1), (2, 'cancel', 'k2', 2, 30, 0), (3, 'book', 'k1', 3, 5, 1)",
]
KEYWORD_VIEWS = {
    "descendants": "SELECT p.name, COUNT(c.id) AS n FROM categories p JOIN categories c ON c.left > p.left AND c.right < p.right GROUP BY p.id",
    "leaves": "SELECT id, name FROM categories WHERE right = left + 1",
    "chain": "SELECT b.id, r.rows, l.action FROM bookings b LEFT JOIN rooms r ON r.id = b.room LEFT JOIN logs l ON l.key = b.key AND l.no = b.room WHERE b.end > b.start",
    "comma_after_left": "SELECT b.id, r.desc, l.offset FROM bookings b LEFT JOIN rooms r ON r.id = b.room, logs l WHERE l.no = b.room AND l.view = 1 AND b.desc IS NOT NULL",
    "case_end": "SELECT id, CASE WHEN end IS NULL THEN 'open' WHEN end < start THEN 'bad' ELSE 'ok' END AS st FROM bookings",
    "in_kw": "SELECT id FROM bookings WHERE room IN (SELECT no FROM logs WHERE action = 'cancel' AND offset < 25)",
}


def test_keyword_named_columns_in_joins_and_subqueries(tmp_path):
    def write(conn, rng):
        conn.execute(
            rng.choice(
                [
                    f"UPDATE bookings SET room = {rng.randrange(1, 4)}, end = {rng.choice(['NULL', _q('2024-05-01 12:00')])} WHERE id = {rng.randrange(1, 6)}",
                    f"INSERT INTO bookings(room, start, end, key, desc) VALUES ({rng.randrange(1, 4)}, '2024-05-03 09:00', '2024-05-03 10:00', {_q(rng.choice(['k1', 'k2']))}, {rng.choice(['NULL', _q('x')])})",
                    f"UPDATE categories SET left = {rng.randrange(1, 11)}, right = {rng.randrange(1, 11)} WHERE id = {rng.randrange(2, 6)}",
                    f"UPDATE logs SET no = {rng.randrange(1, 4)}, offset = {rng.randrange(40)}, view = {rng.randrange(2)} WHERE id = {rng.randrange(1, 5)}",
                    f"UPDATE rooms SET rows = {rng.randrange(1, 12)}, desc = {rng.choice(['NULL', _q('big')])} WHERE id = {rng.randrange(1, 4)}",
                    f"DELETE FROM logs WHERE id = {rng.randrange(1, 6)}",
                    f"INSERT INTO logs(action, key, no, offset, view) VALUES ('cancel', 'k1', {rng.randrange(1, 4)}, 3, 1)",
                ]
            )
        )

    conn, _ = check_write_mix(tmp_path, KEYWORDS, KEYWORD_VIEWS, write, seed=5, steps=12)
    conn.close()


# --------------------------------------------------------------------------------------
# NOCASE e-mail: `x = y` takes the LEFT operand's collation, so the join direction matters


def test_nocase_email_join_direction_and_anti_joins(tmp_path):
    setup = [
        "CREATE TABLE users(id INTEGER PRIMARY KEY, email TEXT UNIQUE COLLATE NOCASE, name TEXT COLLATE NOCASE, team TEXT COLLATE RTRIM)",
        "CREATE TABLE invites(id INTEGER PRIMARY KEY, email TEXT, accepted BOOLEAN)",
        "INSERT INTO users VALUES (1, 'a@x.io', 'ann', 'red'), (2, 'B@X.IO', 'Ann', 'red '), (3, 'c@x.io', NULL, 'blue')",
        "INSERT INTO invites VALUES (1, 'A@x.io', 0), (2, 'b@x.io', 1), (3, 'c@x.io', NULL), (4, 'e@y.io', 0)",
    ]
    views = {
        "binary_dir": "SELECT i.id, u.id AS uid FROM invites i JOIN users u ON i.email = u.email",
        "nocase_dir": "SELECT i.id, u.id AS uid FROM invites i JOIN users u ON u.email = i.email",
        "pending": "SELECT i.email FROM invites i WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.email = i.email)",
        "pending_in": "SELECT i.email FROM invites i WHERE i.email NOT IN (SELECT email FROM users WHERE email IS NOT NULL)",
        "by_team": "SELECT team, COUNT(*), COUNT(DISTINCT name) FROM users GROUP BY team",
        "lookup": "SELECT i.id, (SELECT u.id FROM users u WHERE u.email = i.email) AS uid FROM invites i",
    }

    def write(conn, rng):
        emails = ["a@x.io", "A@X.IO", "b@x.io", "c@x.io", "C@x.io", "e@y.io"]
        conn.execute(
            rng.choice(
                [
                    f"INSERT INTO users(email, name, team) VALUES ({_q(rng.choice(emails))}, {_q(rng.choice(['ann', 'ANN', 'bob']))}, {_q(rng.choice(['red', 'red  ', 'blue']))}) ON CONFLICT(email) DO UPDATE SET email = excluded.email, name = excluded.name",
                    f"INSERT OR REPLACE INTO users(id, email, name, team) VALUES ({rng.randrange(1, 8)}, {_q(rng.choice(emails))}, 'x', 'blue')",
                    f"UPDATE invites SET email = {_q(rng.choice(emails))} WHERE id = {rng.randrange(1, 6)}",
                    f"DELETE FROM users WHERE email = {_q(rng.choice(emails))}",
                    f"INSERT INTO invites(email, accepted) VALUES ({_q(rng.choice(emails))}, 0)",
                ]
            )
        )

    conn, _ = check_write_mix(tmp_path, setup, views, write, seed=7, steps=12)
    conn.close()


# --------------------------------------------------------------------------------------
# imported money as messy text: SUM/AVG/TOTAL/MIN/MAX follow SQLite's numeric reading


def test_messy_numeric_text_aggregates(tmp_path):
    values = [
        "12.50",
        "3",
        " 4 ",
        "1,200",
        "$5",
        "",
        "1e2",
        "0x1A",
        "-0",
        "+7",
        "3abc",
        None,
        "-0.0",
        "5.",
        ".5",
        "4.0",
        7,
        2.5,
        -3,
    ]
    setup = ["CREATE TABLE imports(id INTEGER PRIMARY KEY, cat TEXT, amt TEXT, raw, num NUMERIC)"]
    rng = random.Random(11)
    setup += [
        f"INSERT INTO imports VALUES ({i}, {_q(rng.choice(['a', 'b', None]))}, {_q(rng.choice(values))}, {_q(rng.choice(values))}, {_q(rng.choice(values))})"
        for i in range(1, 40)
    ]
    views = {}
    for col in ("amt", "raw", "num"):
        views[f"agg_{col}"] = (
            f"SELECT cat, SUM({col}) AS s, typeof(SUM({col})) AS t, TOTAL({col}), AVG({col}), COUNT({col}) FROM imports GROUP BY cat"
        )
        views[f"ext_{col}"] = f"SELECT cat, MIN({col}), MAX({col}), COUNT(DISTINCT {col}) FROM imports GROUP BY cat"
        views[f"sub_{col}"] = (
            f"SELECT i.id, (SELECT SUM({col}) FROM imports j WHERE j.cat = i.cat) AS s FROM imports i WHERE i.id % 5 = 0"
        )

    def write(conn, rng):
        conn.execute(
            rng.choice(
                [
                    f"INSERT INTO imports(cat, amt, raw, num) VALUES ({_q(rng.choice(['a', 'b', None]))}, {_q(rng.choice(values))}, {_q(rng.choice(values))}, {_q(rng.choice(values))})",
                    f"UPDATE imports SET {rng.choice(['amt', 'raw', 'num'])} = {_q(rng.choice(values))}, cat = {_q(rng.choice(['a', 'b']))} WHERE id = {rng.randrange(1, 45)}",
                    f"DELETE FROM imports WHERE id = {rng.randrange(1, 45)}",
                ]
            )
        )

    conn, _ = check_write_mix(tmp_path, setup, views, write, seed=13, steps=12)
    conn.close()


# --------------------------------------------------------------------------------------
# application tables: quoted names with spaces, generated columns, a counter trigger, UPDATE FROM, RETURNING


def test_app_schema_generated_columns_counter_trigger_update_from(tmp_path):
    setup = [
        'CREATE TABLE "Customers"("Customer ID" INTEGER PRIMARY KEY AUTOINCREMENT, "Country" TEXT, order_count INTEGER NOT NULL DEFAULT 0)',
        'CREATE TABLE "Orders"("Order ID" INTEGER PRIMARY KEY, "Customer ID" INTEGER REFERENCES "Customers"("Customer ID") ON DELETE CASCADE, status TEXT, amount_cents INTEGER, amount REAL GENERATED ALWAYS AS (amount_cents / 100.0) VIRTUAL)',
        'CREATE TABLE "Order Details"("Order ID" INTEGER, "Product ID" INTEGER, "Unit Price" REAL, "Qty" INTEGER, line_total REAL GENERATED ALWAYS AS ("Unit Price" * "Qty") VIRTUAL, net REAL GENERATED ALWAYS AS (round("Unit Price" * "Qty" * 0.9, 2)) STORED, PRIMARY KEY("Order ID", "Product ID"))',
        'CREATE TRIGGER ord_ins AFTER INSERT ON "Orders" BEGIN UPDATE "Customers" SET order_count = order_count + 1 WHERE "Customer ID" = new."Customer ID"; END',
        'CREATE TRIGGER ord_del AFTER DELETE ON "Orders" BEGIN UPDATE "Customers" SET order_count = order_count - 1 WHERE "Customer ID" = old."Customer ID"; END',
        "CREATE VIEW paid_orders AS SELECT * FROM \"Orders\" WHERE status IN ('paid', 'shipped')",
        "INSERT INTO \"Customers\"(\"Country\") VALUES ('DE'), ('FR'), (NULL)",
        "INSERT INTO \"Orders\" VALUES (1, 1, 'paid', 999), (2, 1, 'new', NULL), (3, 2, 'shipped', 1050)",
        'INSERT INTO "Order Details" VALUES (1, 1, 9.5, 2), (1, 2, 18.0, NULL), (3, 1, 0.1, 3)',
    ]
    views = {
        "counts": 'SELECT c."Customer ID", c.order_count, (SELECT COUNT(*) FROM "Orders" o WHERE o."Customer ID" = c."Customer ID") AS real_count FROM "Customers" c',
        "lines": 'SELECT "Order ID", SUM(line_total), SUM(net), COUNT(*) FROM "Order Details" GROUP BY "Order ID"',
        "paid": 'SELECT p."Customer ID", COUNT(*), SUM(p.amount) FROM paid_orders p GROUP BY 1',
        "value": 'SELECT o."Order ID", o.amount, COALESCE(SUM(d.net), 0) FROM "Orders" o LEFT JOIN "Order Details" d ON d."Order ID" = o."Order ID" GROUP BY o."Order ID"',
    }

    def write(conn, rng):
        conn.execute(
            rng.choice(
                [
                    f'INSERT INTO "Orders"("Customer ID", status, amount_cents) VALUES ({rng.randrange(1, 4)}, {_q(rng.choice(["new", "paid", "shipped"]))}, {rng.choice([100, 2500, "NULL"])}) RETURNING "Order ID", amount',
                    'UPDATE "Orders" SET status = \'shipped\' FROM "Customers" c WHERE c."Customer ID" = "Orders"."Customer ID" AND c."Country" = \'DE\' AND "Orders".status = \'paid\'',
                    f'INSERT OR REPLACE INTO "Order Details" VALUES ({rng.randrange(1, 6)}, {rng.randrange(1, 4)}, {rng.choice([9.5, 0.1, "NULL"])}, {rng.choice([1, 2, "NULL"])})',
                    f'DELETE FROM "Orders" WHERE "Order ID" = {rng.randrange(1, 8)}',
                    f'DELETE FROM "Customers" WHERE "Customer ID" = {rng.randrange(1, 5)}',
                    f'UPDATE "Orders" SET "Customer ID" = {rng.randrange(1, 4)}, status = \'paid\' WHERE "Order ID" = {rng.randrange(1, 8)}',
                ]
            )
        )

    conn, _ = check_write_mix(tmp_path, setup, views, write, seed=17, steps=12)
    conn.close()
