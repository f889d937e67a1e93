"""The tools around the views: explain as a picture, the CLI's conventions, the shell in a
real terminal (tmux), progress and Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import matview
from matview import explain
from matview.cli import COMMANDS, main
from matview.progress import Progress

_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "tools.db"
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE orders(id INTEGER PRIMARY KEY, cust INTEGER, amount REAL)")
    conn.execute("CREATE TABLE customers(id INTEGER PRIMARY KEY, region TEXT)")
    conn.execute("INSERT INTO customers VALUES (1, 'eu'), (2, 'us')")
    conn.execute("INSERT INTO orders VALUES (1, 1, 10), (2, 2, 5), (3, 1, 7)")
    conn.execute(
        "CREATE MATERIALIZED VIEW by_region AS SELECT c.region, count(*) AS n, sum(o.amount) AS total "
        "FROM orders o JOIN customers c ON c.id = o.cust GROUP BY c.region"
    )
    conn.execute(
        "CREATE MATERIALIZED VIEW big WITH (maintenance = 'deferred') AS SELECT DISTINCT region FROM by_region "
        "WHERE total > 6"
    )
    conn.execute(
        "CREATE MATERIALIZED VIEW eu_orders AS SELECT id FROM orders WHERE cust IN "
        "(SELECT id FROM customers WHERE region = 'eu')"
    )
    conn.close()
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matview.cli", *args], capture_output=True, text=True, timeout=120, cwd=_ROOT
    )


# -- explain --------------------------------------------------------------------------


def test_explain_shows_the_circuit(db: Path) -> None:
    conn = matview.connect(str(db))
    sqlite3.connect(db).execute("INSERT INTO orders VALUES (4, 2, 1)").connection.commit()  # pending
    text = conn.view("by_region").explain()
    for part in ("view by_region", "aggregate", "JOIN", "table orders", "table customers", "rule:", "index __dbsp_ix"):
        assert part in text, text
    assert "state __dbsp_state_by_region: 2 rows" in text and "pending for this view: 1" in text
    assert "{source" not in text  # no template placeholders
    circuit = json.loads(conn.view("big").explain("json"))
    kinds = {node["kind"] for node in circuit["nodes"]}
    assert kinds == {"upstream", "map", "distinct", "view"}
    assert [edge[1] for edge in circuit["edges"]][-1] == "view"
    sub = conn.view("eu_orders").circuit()
    subquery = next(n for n in sub.nodes if n.kind == "subquery")
    assert [sub.node(i).label for i in subquery.inputs] == ["table customers"]
    dot = conn.view("by_region").explain("dot")
    assert dot.startswith("digraph") and "aggregate" in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (apt-get install graphviz)")
def test_explain_pictures(db: Path, tmp_path: Path) -> None:
    for image_format, magic in (("svg", b"<svg"), ("png", b"\x89PNG")):
        out = tmp_path / f"by_region.{image_format}"
        done = _cli("explain", str(db), "by_region", "--format", image_format, "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert magic in out.read_bytes()[:400]
    conn = matview.connect(str(db))
    assert b"aggregate" in explain.render_image(conn.view("by_region").circuit(), "svg")


# -- CLI conventions ------------------------------------------------------------------


def test_help_lists_every_command() -> None:
    done = _cli("--help")
    assert done.returncode == 0
    for name, _handler, help_text, _args, _json in COMMANDS:
        assert name in done.stdout and help_text[:30] in done.stdout.replace("\n", " "), done.stdout
    assert "backfill" in done.stdout and "exit codes" in done.stdout


def test_json_output_and_exit_codes(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["views", str(db), "--json"]) == 0
    views = json.loads(capsys.readouterr().out)
    assert {v["name"]: v["maintenance"] for v in views} == {
        "by_region": "immediate",
        "big": "deferred",
        "eu_orders": "immediate",
    }
    assert main(["verify", str(db), "--json"]) == 0
    assert all(result["ok"] for result in json.loads(capsys.readouterr().out))
    assert main(["explain", str(db), "big", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["view"] == "big"
    assert main(["explain", str(db), "nope"]) == 2  # an error
    capsys.readouterr()
    # a view that differs from its SELECT: exit 1
    plain = sqlite3.connect(db)
    plain.execute("UPDATE __dbsp_view_by_region SET n = 99")
    plain.commit()
    assert main(["verify", str(db), "by_region", "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == [{"view": "by_region", "ok": False, "error": None}]
    assert _cli("views").returncode == 2  # bad arguments (argparse)


# -- progress and Ctrl-C --------------------------------------------------------------


def _big_table(path: Path, rows: int) -> None:
    conn = matview.connect(str(path))
    conn.execute("CREATE TABLE t(g INTEGER, x INTEGER)")
    with conn:  # one transaction, not one per row
        conn.executemany("INSERT INTO t VALUES (?, ?)", ((i % 3, i) for i in range(rows)))
    conn.close()


_SLOW_VIEW = "SELECT a.g, count(*) AS n FROM t a JOIN t b ON a.g = b.g GROUP BY a.g"


def test_progress_callback_and_cancel(tmp_path: Path) -> None:
    path = tmp_path / "progress.db"
    _big_table(path, 1500)
    conn = matview.connect(str(path))
    seen: list[Progress] = []
    with conn.progress(seen.append):
        conn.execute(f"CREATE MATERIALIZED VIEW v AS {_SLOW_VIEW}")
    assert len(seen) > 2 and seen[-1].what == "CREATE v" and seen[-1].steps >= seen[0].steps

    class Cancel(Exception):
        pass

    def cancel(report: Progress) -> None:
        if report.steps > 1_000_000:
            raise Cancel

    conn.execute("INSERT INTO t VALUES (0, -1)")
    before = conn.execute("SELECT * FROM __dbsp_view_v ORDER BY 1").fetchall()
    with pytest.raises(Cancel):
        conn.refresh("v", progress=cancel)
    with pytest.raises(Cancel), conn.progress(cancel):
        conn.execute(f"CREATE MATERIALIZED VIEW w AS {_SLOW_VIEW}")
    assert [v.name for v in conn.views()] == ["v"]
    assert conn.execute("SELECT * FROM __dbsp_view_v ORDER BY 1").fetchall() == before
    assert conn.view("v").verify()


def test_ctrl_c_leaves_the_file_unchanged(tmp_path: Path) -> None:
    """SIGINT to `matview sql DB "CREATE MATERIALIZED VIEW …"` while it populates: exit 130, no view."""
    path = tmp_path / "interrupt.db"
    _big_table(path, 6000)  # ~12M join rows: seconds of work
    before = sqlite3.connect(path).execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    child = subprocess.Popen(
        [sys.executable, "-m", "matview.cli", "sql", str(path), f"CREATE MATERIALIZED VIEW v AS {_SLOW_VIEW}"],
        cwd=_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for_journal(path, child)
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "nothing was changed" in err
    after = sqlite3.connect(path).execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    assert after == before


def _wait_for_journal(path: Path, child: subprocess.Popen[str]) -> None:
    """Until the child's write transaction is open (its rollback journal or WAL exists)."""
    for _ in range(2000):
        if any(Path(f"{path}{suffix}").exists() for suffix in ("-journal", "-wal")):
            return
        assert child.poll() is None, child.communicate()
        time.sleep(0.01)
    pytest.fail("the CREATE never started writing")


# -- the shell in a real terminal ------------------------------------------------------


class Terminal:
    """A tmux session of its own (a private server socket) running one command."""

    def __init__(self, command: list[str]) -> None:
        self.socket = f"matview-test-{uuid.uuid4().hex[:8]}"
        self._tmux("new-session", "-d", "-s", "t", "-x", "160", "-y", "200", " ".join(command))

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def send(self, *keys: str) -> None:
        """Type `keys`: text literally (tmux would take a trailing ";" as a separator), and
        the named keys Enter and Tab."""
        for key in keys:
            if key in ("Enter", "Tab"):
                self._tmux("send-keys", "-t", "t", key)
            else:
                literal = key[:-1] + "\\;" if key.endswith(";") else key
                self._tmux("send-keys", "-t", "t", "-l", literal)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-1000", "-t", "t").rstrip()

    def wait_for(self, text: str, after: int = 0) -> str:
        """The screen once `text` appears (after `after` characters of it); fails after 30 s."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen[after:]:
                return screen
            time.sleep(0.05)
        pytest.fail(f"{text!r} never appeared:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def terminal() -> Iterator[type[Terminal]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux); CI installs it")
    opened: list[Terminal] = []

    def open_terminal(command: list[str]) -> Terminal:
        term = Terminal(command)
        opened.append(term)
        return term

    yield open_terminal  # type: ignore[misc]
    for term in opened:
        term.close()


def test_shell_in_a_terminal(db: Path, terminal: type[Terminal]) -> None:
    env = f"cd {_ROOT} && TERM=xterm COLUMNS=160"
    term = terminal(["sh", "-c", f"'{env} {sys.executable} -m matview.cli shell {db}'"])
    term.wait_for("sqlite>")
    term.send(".mode list", "Enter")
    term.send(".views", "Enter")
    term.wait_for("by_region")
    term.send("INSERT INTO orders VALUES (10, 2, 100);", "Enter")
    term.send("SELECT region, total FROM by_region ORDER BY region;", "Enter")
    screen = term.wait_for("us|105.0")
    # the write was folded like any matview write: what stock clients read has it
    assert sqlite3.connect(db).execute("SELECT total FROM by_region WHERE region = 'us'").fetchone() == (105.0,)
    term.send(".create-view cheap AS SELECT id FROM orders WHERE amount < 8 AND id <> 'x'", "Enter")
    term.send(".pending", "Enter")
    term.wait_for("cheap: 0")
    mark = len(term.screen())
    term.send(".explain by_r", "Tab")  # tab completes the view name
    screen = term.wait_for(".explain by_region", mark)
    term.send("Enter")
    screen = term.wait_for("table customers", mark)
    assert "aggregate" in screen[mark:] and "rule:" in screen[mark:]
    sqlite3.connect(db).execute("INSERT INTO orders VALUES (11, 1, 1)").connection.commit()  # another client
    term.send(".pending big", "Enter")
    term.wait_for("big: ")
    term.send(".flush", "Enter")
    term.send(".pending big", "Enter")
    term.wait_for("big: 0")
    term.send(".refresh cheap", "Enter")
    term.send(".verify", "Enter")
    screen = term.wait_for("cheap: ok")
    assert "DIFFERS" not in screen and "by_region: ok" in screen and "eu_orders: ok" in screen
    term.send(".help create-view", "Enter")
    term.wait_for("create a materialized view")
    term.send(".explain", "Enter")
    term.wait_for("usage: .explain VIEW")
    term.send(".quit", "Enter")
    assert sqlite3.connect(db).execute("SELECT id FROM cheap ORDER BY id").fetchall() == [(2,), (3,), (11,)]
    assert os.path.exists(db)
