"""The Datasette plugin for real: a Datasette server on loopback over the demo file, its
pages rendered by headless Chromium (the DOM asserted, a screenshot kept in the test's
tmp_path). Skipped where Chromium is missing; CI installs it (.ci/run).

Set MATVIEW_UPDATE_SCREENSHOT=1 to also copy the screenshot to docs/datasette.png (the
README's picture).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="datasette is not installed (pip install 'matview[datasette]')")

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from test_datasette import MATERIALIZED, PENDING, build_demo  # noqa: E402

ROOT = _HERE.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium; CI installs it)"
)
SERVER_START_SECONDS = 60
BROWSER_SECONDS = 90


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Datasette server over the demo file on 127.0.0.1, terminated at the end; its base URL."""
    path = build_demo(tmp_path_factory.mktemp("browser") / "shop.db")
    port = _free_port()
    log = path.with_suffix(".log").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "datasette", "serve", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"datasette exited with {process.returncode}: {log.read()}")
            try:
                with urllib.request.urlopen(f"{base}/-/versions.json", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"datasette did not answer on {base} within {SERVER_START_SECONDS} s")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with a profile of its own under `tmp_path` (root needs --no-sandbox)."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_SECONDS)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def dom(tmp_path: Path, url: str) -> str:
    return chromium(tmp_path, "--dump-dom", url).stdout


def test_the_matview_page_in_a_browser(server: str, tmp_path: Path) -> None:
    html = dom(tmp_path, f"{server}/-/matview")
    assert "<h1>Materialized views</h1>" in html
    for name in MATERIALIZED:
        assert f'data-view="{name}"' in html
    assert f'<td class="matview-pending">{PENDING}</td>' in html
    assert "SELECT region, COUNT(*) AS orders" in html
    shot = tmp_path / "datasette.png"
    chromium(tmp_path, "--window-size=1280,640", f"--screenshot={shot}", f"{server}/-/matview")
    picture = shot.read_bytes()
    assert picture.startswith(b"\x89PNG\r\n\x1a\n") and len(picture) > 10_000
    if os.environ.get("MATVIEW_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, ROOT / "docs" / "datasette.png")


def test_the_database_and_view_pages_in_a_browser(server: str, tmp_path: Path) -> None:
    database = dom(tmp_path, f"{server}/shop")
    assert "__dbsp_" not in database
    for name in MATERIALIZED:
        assert f'href="/shop/{name}"' in database
    assert "hidden tables" in database and "Materialized views in this database" in database
    view = dom(tmp_path, f"{server}/shop/revenue")
    assert "CREATE MATERIALIZED VIEW revenue AS" in view
    for region in ("north", "south", "east", "west"):
        assert f">{region}<" in view
