"""The dashboard and report.html in a real headless browser: Debian's chromium driven by Selenium (chromium-driver).

The page loads with no console error on every view; the graph has one element per node; a real click on a node
shows its diff; during a running demo a new iteration appears without a reload; report.html opened from file://
makes no network request (Chrome's own network log). With `SADDLER_UI_SCREENSHOTS=DIR` the tests save the main
views there as ui-*.png (`SADDLER_UI_SCREENSHOTS=docs/images` makes the screenshots docs/ui.md shows).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag.errors import EvoDAGError
from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.ui.api import RunSource
from saddler.ui.server import make_server, serve_in_thread

webdriver = pytest.importorskip("selenium.webdriver", exc_type=ModuleNotFoundError)
from selenium.webdriver.common.actions.action_builder import ActionBuilder  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.slow
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
NO_BROWSER = "needs Debian's chromium and chromium-driver (scripts/test.sh installs them with apt-get)"
WAIT_S = 30


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(NO_BROWSER)
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900",
                "--disable-background-networking", "--no-first-run"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, make_run: Callable[..., Path]) -> Path:
    """A finished offline opsdesk run of 6 iterations (its report.md and report.html written at its end)."""
    run_dir = make_run(tmp_path_factory.mktemp("ui") / "demo-run")
    result = CliRunner().invoke(app, ["run", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir


@pytest.fixture(scope="module")
def served(demo: Path) -> Iterator[str]:
    server = make_server([RunSource(demo), RunSource(demo)], port=0)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _open(driver: Any, url: str, selector: str) -> Any:
    """Load `url`, wait until the page has rendered its view and `selector` is there; returns that element."""
    driver.get(url)
    wait = WebDriverWait(driver, WAIT_S)
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    return wait.until(lambda d: d.find_element(By.CSS_SELECTOR, selector))


def _shot(driver: Any, name: str) -> None:
    folder = os.environ.get("SADDLER_UI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"ui-{name}.png"))


def _best(run_dir: Path) -> tuple[int, str]:
    with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
        best = store.best_node()
        assert best is not None and best.parent_id is not None
        edge = store.edge_into(best.id)
        assert edge is not None
        return best.id, store.get_blob(edge.diff_sha)


def test_every_view_loads_with_no_console_error(browser: Any, served: str, demo: Path) -> None:
    best, _ = _best(demo)
    with EvoDAG(demo / "evodag.sqlite", readonly=True) as store:
        task = next(r.task_id for r in store.rollouts() if r.split == "train" and not r.passed)
    browser.get("about:blank")
    browser.get_log("browser")  # drop what came before
    views = {"graph": "#cy canvas", "timeline": "#timeline tr.iteration", "progress": "svg.plot circle.pt",
             "tasks": "#tasks tbody tr", f"node/{best}": "#node-diff", f"task/{task}": "#task-page",
             "compare": "#cy-1 canvas"}  # fmt: skip
    for view, selector in views.items():
        _open(browser, f"{served}#/0/{view}", selector)
        if view in ("graph", "compare"):
            WebDriverWait(browser, WAIT_S).until(lambda d: d.execute_script(
                "return !!window.saddlerUI.state.cy || document.querySelectorAll('canvas').length > 0"))  # fmt: skip
        assert _errors(browser) == [], view
        assert "error" not in browser.find_element(By.ID, "view").get_attribute("innerHTML")[:200], view
        _shot(browser, view.split("/")[0])


def test_the_graph_has_one_element_per_node_and_a_click_shows_the_diff(browser: Any, served: str, demo: Path) -> None:
    best, diff = _best(demo)
    with EvoDAG(demo / "evodag.sqlite", readonly=True) as store:
        nodes, edges = len(store.nodes()), len(store.edges())
    _open(browser, f"{served}#/0/graph", "#cy canvas")
    counts = browser.execute_script(
        "const cy = window.saddlerUI.state.cy; return [cy.nodes().length, cy.edges().length]"
    )
    assert counts == [nodes, edges]
    x, y = browser.execute_script(
        """const n = window.saddlerUI.state.cy.getElementById(arguments[0]), p = n.renderedPosition();
           const r = n.cy().container().getBoundingClientRect(); return [r.left + p.x, r.top + p.y];""",
        f"n{best}",
    )
    actions = ActionBuilder(browser)
    actions.pointer_action.move_to_location(int(x), int(y)).click()
    actions.perform()  # a real click at the node's place on the canvas
    pre = WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.ID, "node-diff"))
    assert browser.current_url.endswith(f"#/0/node/{best}")
    first = next(line for line in diff.splitlines() if line.startswith(("+", "-")) and line.strip("+- "))
    assert first in pre.text
    assert pre.find_elements(By.CSS_SELECTOR, "span.d-add, span.d-del")  # coloured per line kind
    assert _errors(browser) == []


def test_report_html_from_file_makes_no_network_request(browser: Any, demo: Path) -> None:
    report = demo / "report.html"
    assert report.is_file()
    best, _ = _best(demo)
    url = report.resolve().as_uri()
    browser.get("about:blank")
    browser.get_log("performance")
    _open(browser, url, "#cy canvas")
    _open(browser, f"{url}#/0/node/{best}", "#node-diff")
    _open(browser, f"{url}#/0/timeline", "#timeline tr.iteration")
    requests = [
        json.loads(e["message"])["message"]["params"]["request"]["url"]
        for e in browser.get_log("performance")
        if json.loads(e["message"])["message"]["method"] == "Network.requestWillBeSent"
    ]
    assert requests and all(r.split("#")[0] == url or r.startswith("data:") for r in requests), requests
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert _errors(browser) == []
    _shot(browser, "report")


def _finished_iterations(run_dir: Path) -> int:
    if not (run_dir / "evodag.sqlite").is_file():
        return 0
    try:
        with EvoDAG(run_dir / "evodag.sqlite", readonly=True) as store:
            return sum(1 for it in store.iterations() if it.finished_at)
    except EvoDAGError:  # created, no run row yet
        return 0


def test_a_running_demo_shows_a_new_iteration_without_a_reload(
    browser: Any, tmp_path: Path, make_run: Callable[..., Path]
) -> None:
    run_dir = make_run(tmp_path / "live-run", loop={"max_iterations": 20})
    proc = subprocess.Popen([sys.executable, "-m", "saddler", "run", str(run_dir), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    server = None
    try:
        wait = WebDriverWait(browser, 120, poll_frequency=0.5)
        wait.until(lambda _: _finished_iterations(run_dir) >= 1)  # a person opens a run that has started
        server = make_server([RunSource(run_dir)], port=0)
        serve_in_thread(server)
        _open(browser, f"http://127.0.0.1:{server.server_address[1]}/#/0/timeline", "#timeline")
        browser.execute_script("window.__sameDocument = true")
        before = len(browser.find_elements(By.CSS_SELECTOR, "#timeline tr.iteration"))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline tr.iteration")) > before)
        assert browser.execute_script("return window.__sameDocument === true")  # no reload
        assert proc.poll() is None or proc.returncode == 0
        _shot(browser, "live")
        assert _errors(browser) == []
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=60)
