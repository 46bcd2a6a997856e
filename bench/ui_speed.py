"""The dashboard on a 300-iteration run: how long `saddler ui` takes to answer each view, end to end over HTTP.

    .venv/bin/python bench/ui_speed.py [--iterations 300] [--repeat 5] [--browser] [--keep DIR]

Builds a synthetic finished run through the store API (each iteration: a candidate of a recent kept node with a
~40-line diff, its parent and itself on a 6-task batch with 3 repetitions, 20 dev tasks when accepted, three
sessions, two lessons, the best recorded as the run's ranking would), serves it with `saddler.ui.server`, and
prints per view the slowest of `--repeat` requests as `ui_<view>_ms_max: <ms>` (the page, head, summary, graph,
history, progress, tasks, the deepest node's page with every diff from the baseline, a task's page), then
`ui_view_ms_max: <ms>` over all of them (budget 1000 ms: exit status 1 above it) and `ui_report_html_s` (writing
report.html, every page inlined; not budgeted) with its size. With `--browser` (chromium + selenium), also the time
headless chromium takes to draw the graph and the timeline (`ui_browser_<view>_ms`).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from evodag.store import EvoDAG
from saddler.reporting.html import write_report_html
from saddler.ui.api import RunSource
from saddler.ui.server import make_server, serve_in_thread

VIEW_BUDGET_MS = 1000.0
TRAIN = [f"train-{i:02d}" for i in range(60)]
DEV = [f"dev-{i:02d}" for i in range(20)]
TEST = [f"test-{i:02d}" for i in range(30)]
REPS = 3


def _diff(i: int) -> str:
    body = "".join(f"+    step_{i}_{k} = retry(call, attempts={k})\n" for k in range(36))
    return f"diff --git a/tools/t{i % 9}.py b/tools/t{i % 9}.py\n--- a/tools/t{i % 9}.py\n+++ b/tools/t{i % 9}.py\n" \
           f"@@ -1,2 +1,38 @@\n def f():\n-    pass\n{body}"  # fmt: skip


def _rollouts(run: int, node: int, tasks: list[str], split: str, p: float, rng: random.Random) -> list[dict]:
    rows = []
    for task in tasks:
        for rep in range(REPS if split != "dev" else 1):
            passed = rng.random() < p
            rows.append({
                "run_id": run, "node_id": node, "task_id": task, "split": split, "seed": rep, "repetition": rep,
                "score": float(passed), "passed": passed, "disposition": "success" if passed else "task_failure",
                "cost": 0.002, "rationale": "" if passed else "answer: wrong total", "failure_file": "tools/t1.py",
                "cache_key": f"{node}:{task}:{split}:{rep}",
            })  # fmt: skip
    return rows


def build(path: Path, iterations: int, seed: int = 0) -> int:
    """Write the synthetic run; returns the deepest node's id."""
    rng = random.Random(seed)
    with EvoDAG(path) as s:
        run = s.create_run({"name": "ui-speed", "benchmark": "synthetic"}, seed).id
        base = s.add_node(run, "0" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline").id
        s.update_run(run, baseline_node_id=base, best_node_id=base)
        s.add_rollouts(_rollouts(run, base, DEV, "dev", 0.3, rng))
        s.update_node(base, dev_mean=0.3, dev_std=0.0)
        kept, dev, best, depth = [base], {base: 0.3}, base, {base: 0}
        for i in range(1, iterations + 1):
            parent = rng.choice(kept[-5:])
            batch = rng.sample(TRAIN, 6)
            it = s.start_iteration(run, i, i // 60, batch, parent_id=parent, phase="capability")
            s.add_rollouts(_rollouts(run, parent, batch, "train", 0.4, rng))
            node = s.add_node(run, f"{i:040x}", parent, i, "capability", "capability", "patch",
                              hypothesis={"plan": f"retry the flaky tool {i}", "target_tasks": batch[:2]},
                              lines_changed=40 * depth[parent] + 40).id  # fmt: skip
            depth[node] = depth[parent] + 1
            edge = s.add_edge(run, parent, node, "patch", _diff(i), [f"tools/t{i % 9}.py"], 37, 1).id
            s.add_rollouts(_rollouts(run, node, batch, "train", 0.5, rng))
            s.set_edge_transitions(edge, batch[:2], batch[2:3], batch[3:4], batch[4:])
            accepted = rng.random() < 0.3
            for role in ("evolution", "diagnosis_patch", "reflection"):
                s.add_session(run, role, "offline", iteration=i, node_id=node, cost_usd=0.05, turns=7)
            s.add_lesson(run, "fixed", "true_fix", f"the retry fixes {batch[0]}", node_id=node, edge_id=edge,
                         iteration=i, task_id=batch[0])  # fmt: skip
            s.add_lesson(run, "general", "uncertain", f"general lesson {i}", node_id=node, iteration=i)
            if accepted:
                s.add_rollouts(_rollouts(run, node, DEV, "dev", min(0.95, dev[parent] + 0.05), rng))
                dev[node] = round(min(0.95, dev[parent] + rng.random() * 0.05), 4)
                s.update_node(node, status="accepted", dev_mean=dev[node], dev_std=0.01, batch_before=0.4,
                              batch_after=0.6)  # fmt: skip
                kept.append(node)
                if dev[node] > dev[best]:
                    best = node
                    s.update_run(run, best_node_id=best)
            else:
                s.update_node(node, status="rejected", status_reason="batch 0.4 -> 0.4: not a strict improvement",
                              batch_before=0.4, batch_after=0.4)  # fmt: skip
            s.update_iteration(it.id, candidate_id=node, step="done", decision="accepted" if accepted else "rejected",
                               finished_at=s.clock(), last_rollout=s.last_rollout_id())  # fmt: skip
        for node in (base, best):
            s.add_rollouts(_rollouts(run, node, TEST, "test", 0.6, rng))
            s.update_node(node, test_mean=0.6, test_std=0.02)
        s.update_run(run, status="finished", finished_at=s.clock(), termination_reason="max_iterations")
    return max(depth, key=lambda n: (depth[n], n))


def _max_ms(url: str, repeat: int) -> float:
    with urllib.request.urlopen(url, timeout=30) as res:  # warm-up
        res.read()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as res:
            res.read()
        times.append((time.perf_counter() - t0) * 1000)
    return max(times)


def _browser_ms(base: str, views: list[str]) -> dict[str, float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=opts)
    out = {}
    try:
        for view in views:
            driver.get("about:blank")
            t0 = time.perf_counter()
            driver.get(f"{base}#/0/{view}")
            WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
            out[view] = (time.perf_counter() - t0) * 1000
    finally:
        driver.quit()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also time chromium drawing the graph and timeline")
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ui_speed_"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evodag.sqlite").unlink(missing_ok=True)
    try:
        t0 = time.perf_counter()
        deepest = build(folder / "evodag.sqlite", args.iterations)
        with EvoDAG(folder / "evodag.sqlite", readonly=True) as s:
            n_rollouts, n_nodes = s.count_rollouts(), len(s.nodes())
        print(f"built {args.iterations} iterations, {n_nodes} nodes, {n_rollouts} rollouts in "
              f"{time.perf_counter() - t0:.1f} s; deepest node {deepest}")  # fmt: skip
        server = make_server([RunSource(folder)], port=0)
        serve_in_thread(server)
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        views = {"page": "", **{v: f"api/0/{v}" for v in ("head", "summary", "graph", "history", "progress", "tasks")},
                 "node": f"api/0/node/{deepest}", "task": f"api/0/task/{TRAIN[7]}"}  # fmt: skip
        worst = 0.0
        for name, path in views.items():
            ms = _max_ms(base + path, args.repeat)
            worst = max(worst, ms)
            print(f"ui_{name}_ms_max: {ms:.1f}")
        print(f"ui_view_ms_max: {worst:.1f}  (budget {VIEW_BUDGET_MS:.0f} ms)")
        if args.browser:
            for view, ms in _browser_ms(base, ["graph", "timeline", f"node/{deepest}"]).items():
                print(f"ui_browser_{view.split('/')[0]}_ms: {ms:.0f}")
        server.shutdown()
        server.server_close()
        t0 = time.perf_counter()
        with EvoDAG(folder / "evodag.sqlite", readonly=True) as s:
            report = write_report_html(s, folder)
        print(f"ui_report_html_s: {time.perf_counter() - t0:.2f}  ({report.stat().st_size / 1e6:.1f} MB)")
        if worst > VIEW_BUDGET_MS:
            print("over budget: a view took more than 1 s", file=sys.stderr)
            return 1
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
