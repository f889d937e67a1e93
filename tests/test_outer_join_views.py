"""A plain view, CTE or FROM-subquery whose own FROM clause has an outer join, read by a view
(the "summary view" habit: `CREATE VIEW cust_summary AS SELECT c.id, count(o.id) … FROM customers c
LEFT JOIN orders o … GROUP BY c.id`, then `SELECT * FROM cust_summary WHERE orders >= 2`). The
inline pass joins by WHERE and cannot flatten an outer join, so it is an internal node over its
own FROM clause (a plain view's body as written, which breaks the view when redefined). Refused
before (issue 5; six of a real-world hunt's queries)."""

from __future__ import annotations

import random

import pytest
from oracle import check_write_mix

import matview

SETUP = [
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)",
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, amount REAL)",
    "CREATE VIEW cust_summary AS SELECT c.id, c.name, count(o.id) AS orders, sum(o.amount) AS total "
    "FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id",
    "CREATE VIEW cust_orders AS SELECT c.name, o.amount FROM customers c LEFT JOIN orders o ON o.customer_id = c.id",
    "INSERT INTO customers(name) VALUES ('a'), ('b'), (NULL)",
    "INSERT INTO orders(customer_id, amount) VALUES (1, 2.5), (1, 3), (2, NULL)",
]

VIEWS = {
    "filtered": "SELECT * FROM cust_summary WHERE orders >= 2",
    "star": "SELECT * FROM cust_summary",
    "columns": "SELECT name, orders FROM cust_summary",
    "joined": "SELECT s.name, s.total, o.amount FROM cust_summary s JOIN orders o ON o.customer_id = s.id",
    "subquery": "SELECT * FROM (SELECT c.id, count(o.id) AS n FROM customers c LEFT JOIN orders o "
    "ON o.customer_id = c.id GROUP BY c.id) WHERE n > 0",
    "cte": "WITH x AS (SELECT c.id, count(o.id) AS n FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
    "GROUP BY c.id) SELECT n, count(*) FROM x GROUP BY n",
    "regrouped": "SELECT name, sum(amount) FROM cust_orders GROUP BY name",
    "rows": "SELECT * FROM cust_orders WHERE amount > 1",
    # the view's body reads the file's tables, not the query's CTE of the same name
    "shadowing_cte": "WITH customers AS (SELECT 1 AS id, 2 AS name) SELECT * FROM cust_summary",
}


def _write(conn, rng: random.Random) -> None:
    action = rng.random()
    if action < 0.3:
        conn.execute("INSERT INTO customers(name) VALUES (?)", (rng.choice(["a", "b", None]),))
    elif action < 0.4:
        conn.execute("DELETE FROM customers WHERE id = (SELECT id FROM customers ORDER BY random() LIMIT 1)")
    elif action < 0.75:
        values = (rng.randint(1, 8), rng.choice([1.5, 2, None]))
        conn.execute("INSERT INTO orders(customer_id, amount) VALUES (?, ?)", values)
    else:
        conn.execute("DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")


@pytest.mark.parametrize("seed", range(3))
def test_outer_joins_inside_derived_tables_follow_every_write(tmp_path, seed):
    check_write_mix(tmp_path, SETUP, VIEWS, _write, seed, steps=10)


def test_redefining_the_plain_view_breaks_the_view(tmp_path):
    conn, _live = check_write_mix(tmp_path, SETUP, {"v": VIEWS["filtered"]}, _write, seed=1, steps=2)
    conn.execute("DROP VIEW cust_summary")
    conn.execute("CREATE VIEW cust_summary AS SELECT id, name, 0 AS orders, 0 AS total FROM customers")
    with pytest.raises(matview.Error, match="cust_summary it reads was redefined"):
        conn.execute("SELECT * FROM v_imm").fetchall()


def test_plain_views_with_a_subquery_or_distinct_read_by_a_view(tmp_path):
    """A plain view with a select-list subquery, or DISTINCT, read by a view: an internal node
    over the view's body, as a CTE of the same text is (refused before: a view's body would not
    follow its redefinition; `Node.views` now records the view)."""
    setup = [
        "CREATE TABLE posts(id INTEGER PRIMARY KEY, user_id INT, title TEXT)",
        "CREATE TABLE comments(id INTEGER PRIMARY KEY, post_id INT)",
        "CREATE VIEW post_stats AS SELECT p.id, p.user_id, "
        "(SELECT count(*) FROM comments c WHERE c.post_id = p.id) AS n_comments FROM posts p",
        "CREATE VIEW authors AS SELECT DISTINCT user_id FROM posts",
        "INSERT INTO posts(user_id, title) VALUES (1, 'a'), (2, 'b'), (1, 'c')",
        "INSERT INTO comments(post_id) VALUES (1), (1), (3)",
    ]
    views = {
        "per_user": "SELECT user_id, sum(n_comments) FROM post_stats GROUP BY user_id",
        "commented": "SELECT * FROM post_stats WHERE n_comments > 0",
        # "materialize my existing view", as it is (hunt 21's M6: refused before)
        "as_it_is": "SELECT * FROM post_stats",
        "distinct_as_it_is": "SELECT * FROM authors",
        "joined": "SELECT a.user_id, count(*) FROM authors a JOIN posts p ON p.user_id = a.user_id GROUP BY a.user_id",
    }

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.3:
            conn.execute("INSERT INTO posts(user_id, title) VALUES (?, 't')", (rng.choice([1, 2, 3, None]),))
        elif action < 0.4:
            conn.execute("DELETE FROM posts WHERE id = (SELECT id FROM posts ORDER BY random() LIMIT 1)")
        elif action < 0.8:
            conn.execute("INSERT INTO comments(post_id) VALUES (?)", (rng.randint(1, 10),))
        else:
            conn.execute("DELETE FROM comments WHERE id = (SELECT id FROM comments ORDER BY random() LIMIT 1)")

    conn, _live = check_write_mix(tmp_path, setup, views, write, seed=4, steps=10)
    conn.execute("DROP VIEW post_stats")
    conn.execute("CREATE VIEW post_stats AS SELECT id, user_id, 0 AS n_comments FROM posts")
    with pytest.raises(matview.Error, match="post_stats it reads was redefined"):
        conn.execute("SELECT * FROM per_user_imm").fetchall()
    with pytest.raises(matview.Error, match="post_stats it reads was redefined"):
        conn.execute("SELECT * FROM as_it_is_imm").fetchall()


def test_a_plain_view_joining_an_aggregating_view(tmp_path):
    """`CREATE VIEW big AS SELECT c.name, s.total FROM customers c JOIN spend s …` over an
    aggregating view `spend`, read by a view: big is a node over its body, where spend is a node
    joined again (refused before: "view spend with GROUP BY … joined")."""
    setup = [
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INT, amount INT)",
        "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT)",
        "CREATE VIEW spend AS SELECT customer_id, sum(amount) AS total FROM orders GROUP BY customer_id",
        "CREATE VIEW big AS SELECT c.name, s.total FROM customers c JOIN spend s ON s.customer_id = c.id "
        "WHERE s.total > 10",
        "INSERT INTO customers VALUES (1, 'x'), (2, 'y')",
        "INSERT INTO orders(customer_id, amount) VALUES (1, 9), (1, 5), (2, 3)",
    ]
    views = {
        "star": "SELECT * FROM big",
        "filtered": "SELECT name FROM big WHERE total > 20",
        "counted": "SELECT count(*), sum(total) FROM big",
    }

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.5:
            values = (rng.randint(1, 4), rng.randint(1, 9))
            conn.execute("INSERT INTO orders(customer_id, amount) VALUES (?, ?)", values)
        elif action < 0.7:
            conn.execute("DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)")
        else:
            conn.execute("INSERT OR REPLACE INTO customers VALUES (?, ?)", (rng.randint(1, 4), rng.choice("xyz")))

    conn, _live = check_write_mix(tmp_path, setup, views, write, seed=6, steps=10)
    conn.execute("DROP VIEW spend")
    conn.execute("CREATE VIEW spend AS SELECT customer_id, count(*) AS total FROM orders GROUP BY customer_id")
    with pytest.raises(matview.Error, match="spend it reads was redefined"):
        conn.execute("SELECT * FROM star_imm").fetchall()


def test_a_plain_view_with_a_column_list_and_an_outer_join(tmp_path):
    """`CREATE VIEW csl(k, nm, cnt) AS … LEFT JOIN … GROUP BY …`: the node renames the body's
    columns as the list does (a review found CREATE recursing here)."""
    setup = [
        "CREATE TABLE c(id INTEGER PRIMARY KEY, name TEXT)",
        "CREATE TABLE o(id INTEGER PRIMARY KEY, cid INTEGER)",
        "CREATE VIEW csl(k, nm, cnt) AS SELECT c.id, c.name, count(o.id) FROM c LEFT JOIN o ON o.cid = c.id "
        "GROUP BY c.id",
        "INSERT INTO c(name) VALUES ('a'), ('b')",
        "INSERT INTO o(cid) VALUES (1), (1)",
    ]
    views = {"one": "SELECT k FROM csl", "star": "SELECT * FROM csl", "filtered": "SELECT * FROM csl WHERE cnt > 1"}

    def write(conn, rng: random.Random) -> None:
        action = rng.random()
        if action < 0.4:
            conn.execute("INSERT INTO c(name) VALUES ('n')")
        elif action < 0.8:
            conn.execute("INSERT INTO o(cid) VALUES (?)", (rng.randint(1, 6),))
        else:
            conn.execute("DELETE FROM o WHERE id = (SELECT max(id) FROM o)")

    check_write_mix(tmp_path, setup, views, write, seed=1, steps=10)
