"""The Datasette plugin (matview_ext.datasette_plugin) through Datasette's own test client.

Datasette reads files with stdlib ``sqlite3``; this process never opens the demo file with
apsw (two SQLite libraries on one file in one process corrupt it, see stock.py): the file is
written, and flushed, by matview in a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("datasette", reason="datasette is not installed (pip install 'matview[datasette]')")

from datasette.app import Datasette
from datasette.plugins import get_plugins
from datasette.utils import tilde_encode

from matview import names
from matview.sql import nodes
from matview_ext.datasette_plugin import catalog as plugin_catalog

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "datasette_demo.py"
MATERIALIZED = ["big_orders", "by_customer", "order_count_histogram", "revenue"]
PENDING = 25  # the demo's writes after the deferred view's CREATE


def build_demo(path: Path) -> Path:
    """The demo file, written by matview in another process."""
    subprocess.run([sys.executable, str(DEMO), str(path)], check=True, capture_output=True, timeout=120, cwd=ROOT)
    return path


def flush(path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "matview.cli", "flush", str(path)], check=True, capture_output=True, timeout=120
    )


_ENGINE_PENDING = r"""
import json, sys
import matview
conn = matview.connect(sys.argv[1])
print(json.dumps({v.name: v.pending() for v in conn.views()}))
conn.close()
"""


def engine_pending(path: Path) -> dict[str, int]:
    """Each view's pending count as matview itself reports it (`ViewInfo.pending`), in another process."""
    done = subprocess.run(
        [sys.executable, "-c", _ENGINE_PENDING, str(path)], check=True, capture_output=True, text=True, timeout=120
    )
    return dict(json.loads(done.stdout))


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo(tmp_path_factory.mktemp("datasette") / "shop.db")


def fetch(paths: list[Path], urls: list[str], metadata: dict[str, Any] | None = None) -> list[Any]:
    """Each url through a fresh Datasette over `paths`: (status, JSON or text)."""

    async def run() -> list[Any]:
        ds = Datasette([str(p) for p in paths], metadata=metadata)
        await ds.invoke_startup()
        out = []
        for url in urls:
            response = await ds.client.get(url)
            body = response.json() if ".json" in url.split("?")[0] else response.text
            out.append((response.status_code, body))
        return out

    return asyncio.run(run())


def stock_rows(path: Path, sql: str) -> Counter[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return Counter(conn.execute(sql).fetchall())
    finally:
        conn.close()


def test_reader_names_are_the_engines() -> None:
    assert plugin_catalog.PREFIX == names.PREFIX
    assert (plugin_catalog.CATALOG, plugin_catalog.META, plugin_catalog.PROGRESS) == (
        names.CATALOG,
        names.META,
        names.PROGRESS,
    )
    assert plugin_catalog.SEQ == names.SEQ
    assert plugin_catalog.NODE_PREFIX == nodes.NODE_PREFIX
    assert plugin_catalog.delta_table("t") == names.delta_table("t")
    from matview.storage import catalog

    assert plugin_catalog.READABLE_FORMAT <= catalog.FORMAT_VERSION


def test_plugin_is_registered_by_entry_point() -> None:
    plugin = next((p for p in get_plugins() if p["name"] == "matview"), None)
    assert plugin is not None, "pip install -e . registers the datasette entry point"
    assert plugin["templates_path"], "the plugin ships its page template"
    assert {"get_metadata", "register_routes", "extra_template_vars"} <= set(plugin["hooks"])


def test_database_page_hides_internal_tables_and_nodes(shop: Path) -> None:
    (status, listing), (html_status, html), (_, shown) = fetch([shop], ["/shop.json", "/shop", "/shop?_show_hidden=1"])
    assert status == html_status == 200
    tables = {t["name"]: t["hidden"] for t in listing["tables"]}
    internal = {name for name in tables if name.startswith(names.PREFIX)}
    assert internal and all(tables[name] for name in internal)
    assert tables["orders"] is False and tables["customers"] is False
    views = [v["name"] for v in listing["views"]]
    assert sorted(views) == MATERIALIZED  # the internal node's plain view is not listed
    assert names.PREFIX not in html  # neither tables, nor views, nor links
    assert f"{len(internal)} hidden tables" in html
    assert "__dbsp_catalog" in shown
    assert "/-/matview" in html  # the database action


def test_matview_page_lists_views_with_sql_mode_and_pending(shop: Path) -> None:
    [(status, data), (html_status, html)] = fetch([shop], ["/-/matview.json", "/-/matview"])
    assert status == html_status == 200
    [database] = data["databases"]
    assert database["database"] == "shop" and database["readable"] and database["format_version"] >= 2
    views = {v["name"]: v for v in database["views"]}
    assert sorted(views) == MATERIALIZED
    assert views["big_orders"]["maintenance"] == "deferred"
    assert views["big_orders"]["pending"] == PENDING
    assert all(views[name]["pending"] == 0 and views[name]["maintenance"] == "immediate" for name in MATERIALIZED[1:])
    assert {name: view["pending"] for name, view in views.items()} == engine_pending(shop)
    catalog_sql = dict(stock_rows(shop, "SELECT name, sql FROM __dbsp_catalog").keys())
    assert all(view["sql"] == catalog_sql[name] for name, view in views.items())
    assert views["revenue"]["columns"] == ["region", "orders", "total", "largest"]
    assert views["revenue"]["base_tables"] == ["orders"]
    for name in MATERIALIZED:
        assert f'data-view="{name}"' in html
    assert "deferred" in html and f">{PENDING}<" in html


def test_view_pages_show_rows_and_the_materialized_definition(shop: Path) -> None:
    [(status, rows), (page_status, page), (_, orders_page), (node_status, _)] = fetch(
        [shop],
        [
            "/shop/revenue.json?_shape=array&_size=max",
            "/shop/revenue",
            "/shop/orders",
            f"/shop/{nodes.NODE_PREFIX}order_count_histogram_1",
        ],
    )
    assert status == page_status == 200
    select = "SELECT region, COUNT(*), SUM(amount), MAX(amount) FROM orders GROUP BY region"
    got = Counter((r["region"], r["orders"], r["total"], r["largest"]) for r in rows)
    assert got == stock_rows(shop, select)  # immediate: exact, nothing pending
    assert "CREATE MATERIALIZED VIEW revenue AS" in page and "changes pending: 0" in page
    assert "Materialized view maintained by matview (immediate): rows as of the last fold; nothing pending" in page
    assert "__dbsp_view_revenue" not in page  # not the plain view's own SQL
    assert "CREATE TABLE orders" in orders_page and "__dbsp_ix_" not in orders_page  # the join index is matview's
    assert node_status == 403


def test_a_deferred_view_reads_as_of_the_last_fold_until_flushed(tmp_path: Path) -> None:
    path = build_demo(tmp_path / "shop.db")
    select = "SELECT id, customer, amount FROM orders WHERE amount >= 900"
    url = "/shop/big_orders.json?_shape=array&_size=max"

    def served() -> tuple[Counter[tuple[Any, ...]], int]:
        [(_, rows), (_, data)] = fetch([path], [url, "/-/matview.json"])
        pending = {v["name"]: v["pending"] for v in data["databases"][0]["views"]}["big_orders"]
        return Counter((r["id"], r["customer"], r["amount"]) for r in rows), pending

    before, pending = served()
    assert pending == PENDING
    [(_, page)] = fetch([path], ["/shop/big_orders"])
    assert f"{PENDING} changes pending (matview flush folds them)" in page
    late = stock_rows(path, f"{select} AND id > (SELECT max(id) - {PENDING} FROM orders)")
    assert before == stock_rows(path, select) - late  # the pending orders are not in it yet
    flush(path)
    after, pending = served()
    assert pending == 0 and after == stock_rows(path, select)


def test_a_file_without_views_is_left_alone(tmp_path: Path) -> None:
    plain = tmp_path / "plain.db"
    conn = sqlite3.connect(plain)
    conn.execute("CREATE TABLE t(x)")
    conn.execute("CREATE TABLE __dbsp_lookalike(x)")  # the prefix is matview's: hidden anywhere
    conn.commit()
    conn.close()
    [(status, data), (db_status, listing), (_, html)] = fetch([plain], ["/-/matview.json", "/plain.json", "/plain"])
    assert status == db_status == 200
    assert data == {"databases": []}
    assert {t["name"]: t["hidden"] for t in listing["tables"]} == {"t": False, "__dbsp_lookalike": True}
    assert "/-/matview" not in html


def test_the_readmes_query_lists_only_the_users_tables_and_views(shop: Path) -> None:
    user = (
        "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
        r"AND name NOT LIKE '\_\_dbsp\_%' ESCAPE '\'"
    )
    assert set(stock_rows(shop, user)) == {("customers", "table"), ("orders", "table")} | {
        (name, "view") for name in MATERIALIZED
    }


_ODD = r"""
import sys
import matview
conn = matview.connect(sys.argv[1])
conn.execute('CREATE TABLE "my table"(id INTEGER PRIMARY KEY, "é x" TEXT)')
conn.execute('''INSERT INTO "my table"("é x") VALUES ('<script>alert(1)</script>'), ('a')''')
conn.execute('''CREATE MATERIALIZED VIEW "odd ""name"" <b>" AS SELECT "é x", COUNT(*) AS n FROM "my table"
                WHERE "é x" <> '<i>' GROUP BY "é x"''')
conn.close()
"""
ODD_VIEW = 'odd "name" <b>'


def test_names_and_text_that_need_quoting_and_escaping(tmp_path: Path) -> None:
    path = tmp_path / "odd.db"
    subprocess.run([sys.executable, "-c", _ODD, str(path)], check=True, capture_output=True, timeout=120)
    [(_, data), (_, html), (status, page), (_, rows)] = fetch(
        [path],
        [
            "/-/matview.json",
            "/-/matview",
            f"/odd/{tilde_encode(ODD_VIEW)}",
            f"/odd/{tilde_encode(ODD_VIEW)}.json?_shape=array",
        ],
    )
    [view] = data["databases"][0]["views"]
    assert view["name"] == ODD_VIEW and view["columns"] == ["é x", "n"]
    assert "<b>" not in html and "&lt;i&gt;" in html  # the name and the SQL are escaped
    assert f'href="/odd/{tilde_encode(ODD_VIEW)}"' in html
    assert status == 200
    assert "CREATE MATERIALIZED VIEW &#34;odd &#34;&#34;name&#34;&#34; &lt;b&gt;&#34; AS" in page
    assert "<script>alert(1)</script>" not in page
    assert sorted((r["é x"], r["n"]) for r in rows) == [("<script>alert(1)</script>", 1), ("a", 1)]


def test_a_file_of_catalog_format_1_is_named_for_upgrade(tmp_path: Path) -> None:
    # matview 0.1.0 kept views as virtual tables only matview reads: Datasette cannot serve
    # them (nor its database page), the plugin's page says how to upgrade the file.
    path = tmp_path / "old.db"
    shutil.copyfile(ROOT / "tests" / "data" / "matview-0.1.0.db", path)
    [(status, data), (html_status, html)] = fetch([path], ["/-/matview.json", "/-/matview"])
    assert status == html_status == 200
    [database] = data["databases"]
    assert database["format_version"] == 1 and not database["readable"]
    assert {v["name"]: v["pending"] for v in database["views"]} == {"dist": 0, "expr": 0, "rows_d": 1, "totals": 0}
    assert "catalog format 1" in html and "upgrade" in html


def test_the_users_own_metadata_is_kept(shop: Path) -> None:
    tables = {"revenue": {"description": "Revenue by region, live"}, "customers": {"hidden": True}}
    metadata = {"databases": {"shop": {"tables": tables}}}
    [(_, page), (_, listing)] = fetch([shop], ["/shop/revenue", "/shop.json"], metadata)
    assert "Revenue by region, live" in page and "Materialized view maintained by matview" not in page
    hidden = {t["name"]: t["hidden"] for t in listing["tables"]}
    assert hidden["customers"] and hidden["__dbsp_catalog"] and not hidden["orders"]


def test_the_page_lists_only_the_views_the_actor_may_see(shop: Path) -> None:
    metadata = {"databases": {"shop": {"tables": {"revenue": {"allow": {"id": "root"}}}}}}
    [(_, data), (_, html)] = fetch([shop], ["/-/matview.json", "/-/matview"], metadata)
    assert sorted(v["name"] for v in data["databases"][0]["views"]) == sorted(set(MATERIALIZED) - {"revenue"})
    assert 'data-view="revenue"' not in html
