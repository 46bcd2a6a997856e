"""One writer process, concurrent readers (CLI subprocess, CliRunner, read-only store): never locked, always valid."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evodag.cli import app
from evodag.store import EvoDAG

READ_SECONDS = 3.0  # readers poll at least this long (and at least MIN_CLI_READS CLI processes)
MIN_CLI_READS = 3
WRITER_LIMIT_SECONDS = 60.0


def _writer(path: str, ready: Any, stop: Any) -> None:
    """Write nodes, edges, rollouts and iterations in a loop until `stop` is set."""
    with EvoDAG(path) as s:
        run = s.create_run({"writer": True}, 1).id
        parent = s.add_node(run, "root", None, 0, "baseline", "baseline", "baseline", status="baseline").id
        ready.set()
        end = time.monotonic() + WRITER_LIMIT_SECONDS
        i = 0
        while not stop.is_set() and time.monotonic() < end:
            i += 1
            with s.transaction():
                child = s.add_node(run, f"c{i}", parent, i, "capability", "capability", "patch").id
                s.add_edge(run, parent, child, "patch", f"+line {i}\n", ["f.py"], 1, 0)
            for rep in range(5):
                s.add_rollout(run_id=run, node_id=child, task_id=f"t{rep}", split="train", seed=rep, repetition=0,
                              score=1.0, passed=True, disposition="success", cost=0.001,
                              cache_key=f"{i}:{rep}")  # fmt: skip
            s.update_node(child, status="accepted", dev_mean=i / 1e6)
            s.start_iteration(run, i, 0, [f"t{r}" for r in range(5)], parent_id=parent, candidate_id=child)
            parent = child


@pytest.mark.slow
def test_readers_never_see_locks_while_writer_runs(tmp_path: Path) -> None:
    path = tmp_path / "evodag.sqlite"
    EvoDAG(path).close()
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_writer, args=(str(path), ready, stop))
    proc.start()
    assert ready.wait(30)
    env = {**os.environ, "EVODAG_DB": str(path)}
    runner = CliRunner()
    counts: list[int] = []
    subprocess_reads = 0
    try:
        started = time.monotonic()
        while time.monotonic() - started < READ_SECONDS or subprocess_reads < MIN_CLI_READS:
            assert proc.is_alive(), "the writer stopped before the readers finished"
            out = subprocess.run([sys.executable, "-m", "evodag.cli", "summary", "--json"], env=env,
                                 capture_output=True, text=True, timeout=30)  # fmt: skip
            assert out.returncode == 0, out.stderr
            assert "locked" not in out.stderr
            counts.append(json.loads(out.stdout)["nodes"]["total"])
            subprocess_reads += 1
            for _ in range(5):
                inproc = runner.invoke(app, ["summary", "--json", "--db", str(path)])
                assert inproc.exit_code == 0, inproc.stderr
                counts.append(json.loads(inproc.stdout)["nodes"]["total"])
                with EvoDAG(path, readonly=True) as ro:
                    nodes = ro.nodes()
                    total = len(nodes)
                    assert all(ro.edge_into(n.id) is not None for n in nodes[1:])
                    assert json.loads(runner.invoke(app, ["batch", "--json", "--db", str(path)]).stdout)["tasks"]
                counts.append(total)
    finally:
        stop.set()
        proc.join(timeout=60)
    assert proc.exitcode == 0
    assert counts == sorted(counts)  # readers see a growing DAG, never a torn or rolled-back one
    with EvoDAG(path, readonly=True) as ro:
        final = ro.summary()
        assert final["nodes"]["total"] == len(ro.nodes()) > counts[0]
        assert final["rollouts"]["count"] == 5 * (final["nodes"]["total"] - 1)
