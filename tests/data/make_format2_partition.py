"""Makes tests/data/matview-format2-partition.db (catalog format 2, kept rows as msgpack state):
run with the matview of commit 53e5dbd on PYTHONPATH: `python make_format2_partition.py OUT.db`."""

import os
import sys

import matview

p = sys.argv[1]
for s in ("", "-wal", "-shm"):
    if os.path.exists(p + s):
        os.remove(p + s)
db = matview.connect(p)
db.execute("PRAGMA journal_mode=DELETE")
db.execute("CREATE TABLE c(id INTEGER PRIMARY KEY, region TEXT)")
db.execute("CREATE TABLE o(id INTEGER PRIMARY KEY, cid INT, amount REAL, status TEXT)")
db.execute("CREATE TABLE k(a TEXT, b INT, PRIMARY KEY (a, b))")  # rowid table, PK may hold NULLs
with db:
    db.executemany("INSERT INTO c VALUES (?, ?)", [(i, ["n", "s", None][i % 3]) for i in range(1, 9)])
    db.executemany(
        "INSERT INTO o VALUES (?, ?, ?, ?)",
        [(i, i % 10, [1, 2.5, None][i % 3], ["open", "done"][i % 2]) for i in range(1, 30)],
    )
    db.executemany("INSERT INTO k VALUES (?, ?)", [("x", 1), ("y", None), (None, 2), ("z", 3)])
db.execute(
    "CREATE MATERIALIZED VIEW ex AS "
    "SELECT * FROM c WHERE EXISTS (SELECT 1 FROM o WHERE o.cid = c.id AND o.status = 'open')"
)
db.execute("CREATE MATERIALIZED VIEW mx AS SELECT c.id, (SELECT max(o.amount) FROM o WHERE o.cid = c.id) AS m FROM c")
db.execute(
    "CREATE MATERIALIZED VIEW lj WITH (maintenance = 'deferred') AS "
    "SELECT c.region, count(o.id) AS n, sum(o.amount) AS s "
    "FROM c LEFT JOIN o ON o.cid = c.id LEFT JOIN k ON k.b = c.id GROUP BY c.region"
)
db.execute("CREATE MATERIALIZED VIEW kn AS SELECT k.a, k.b FROM k WHERE k.b IN (SELECT cid FROM o)")
db.execute("INSERT INTO o VALUES (100, 3, 7, 'open')")  # pending for the deferred view
print(
    matview.__file__,
    db.execute("SELECT value FROM __dbsp_meta WHERE key='format_version'").fetchall(),
    db.execute("SELECT count(*) FROM __dbsp_state_ex WHERE operator_id = -1").fetchall(),
)
db.close()
