"""`saddler fork RUN NEW --from-iteration N`: a new run folder holding RUN's history up to iteration N, which then
continues on its own.

NEW gets RUN's `saddler.toml` (named after NEW, `--set` overrides applied), a copy of its harness repository
(keep-refs of candidates made after iteration N dropped), the EvoDAG history up to N (`evodag.fork.fork_store`:
nodes, edges, rollouts, lessons, sessions with their stored answers, events), the traces of the copied nodes and
the transcripts of the copied sessions (stored paths rewritten to NEW), and RUN's other rollouts in its rollout
cache. Nothing is paid twice: the copied sessions are replayed from the store, rollouts are reused. NEW records
its best node by its own ranking policy and its inputs; what `--set` changed is logged in its `run.forked` event.
RUN is only read, under its lock.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from evodag.fork import fork_store
from evodag.store import EvoDAG
from saddler.benchmark import load_benchmark
from saddler.config import RunConfig, load_run_config, read_toml
from saddler.errors import RunStateError
from saddler.harness.gitcmd import git
from saddler.harness.space import KEEP_PREFIX, HarnessSpace
from saddler.policies import make_ranking
from saddler.run.context import resolve_score_kind
from saddler.run.folder import RunPaths, merge_overrides, render_run_toml, run_lock
from saddler.run.inputs import changes, fingerprint


def fork_run(source: Path, dest: Path, from_iteration: int, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Make the run folder `dest` from `source`'s history up to iteration `from_iteration` (see the module doc)."""
    src, new = RunPaths(Path(source).resolve()), RunPaths(Path(dest).resolve())
    if not src.db.is_file():
        raise RunStateError(f"{source} has no EvoDAG to fork (no evodag.sqlite); run it first")
    if new.root.exists() and any(new.root.iterdir()):
        raise RunStateError(f"{dest} exists and is not empty; fork into a new folder")
    src_cfg = load_run_config(src.root)
    with run_lock(src.root):
        new.root.mkdir(parents=True, exist_ok=True)
        try:
            return _fork(src, new, src_cfg, from_iteration, overrides or {})
        except BaseException:
            shutil.rmtree(new.root, ignore_errors=True)
            raise


def _fork(src: RunPaths, new: RunPaths, src_cfg: RunConfig, n: int, overrides: dict[str, Any]) -> dict[str, Any]:
    run_table = read_toml(src.config)["run"]
    merge_overrides(run_table, {**overrides, "name": new.root.name})
    new.config.write_text(render_run_toml(run_table), encoding="utf-8")
    cfg = load_run_config(new.root)
    old_root = f"{src.root}/"

    def rewrite(path: str | None) -> str | None:
        if not path or not path.startswith(old_root):
            return path
        parts = path[len(old_root) :].split("/")
        if parts[0] == src.traces.name and len(parts) > 2:  # `traces/n<id>/<split>/...` -> its split's trace root
            parts[0] = new.trace_root(parts[2]).name
        return "/".join([str(new.root), *parts])

    with EvoDAG(src.db, readonly=True) as source:
        source_inputs = source.get_run().inputs
        run = fork_store(source, new.db, n, rewrite=rewrite)
    shutil.copytree(src.harness(src_cfg.harness), new.harness(cfg.harness), symlinks=True)
    space = HarnessSpace(new.harness(cfg.harness), new.worktrees)
    space.prune()
    with EvoDAG(new.db) as store:
        nodes = store.nodes(run_id=run.id)
        _drop_later_candidates(space, {node.commit for node in nodes})
        _copy_artifacts(src, new, store, run.id)
        best = make_ranking(cfg.policies.ranking)(nodes)
        bench = load_benchmark(cfg.benchmark, cfg.benchmark_options)
        inputs = fingerprint(
            cfg, new.root, space.baseline_commit(), bench.fingerprint(), bench.model_fingerprint(),
            resolve_score_kind(cfg.policies.score, bench),
        )  # fmt: skip
        changed = changes(source_inputs, inputs) if source_inputs is not None else {}
        store.update_run(run.id, best_node_id=best.id if best else None, inputs=inputs)
        store.log_event(
            "run.forked",
            {"source": str(src.root), "from_iteration": n, "changed": changed},
            run_id=run.id,
        )
        return {
            "source": str(src.root),
            "fork": str(new.root),
            "from_iteration": n,
            "nodes": len(nodes),
            "rollouts": store.count_rollouts(run.id),
            "sessions": store.count_sessions(run.id),
            "best_node": best.id if best else None,
            "changed": changed,
        }


def _drop_later_candidates(space: HarnessSpace, commits: set[str]) -> None:
    """Delete the keep-refs of commits no copied node holds (candidates of the source's later iterations)."""
    refs = git(["for-each-ref", "--format=%(refname)", KEEP_PREFIX], space.repo_dir).stdout.split()
    drop = [ref for ref in refs if ref[len(KEEP_PREFIX) :] not in commits]
    if drop:
        git(["update-ref", "--stdin"], space.repo_dir, input="".join(f"delete {ref}\n" for ref in drop))


def _copy_artifacts(src: RunPaths, new: RunPaths, store: EvoDAG, run_id: int) -> None:
    """The train and dev traces of the copied nodes (never a test trace: a fork carries no test data) and the
    transcripts (with prompt and answer files) of the copied sessions."""
    for node in store.nodes(run_id=run_id):
        for split in ("train", "dev"):
            for root in dict.fromkeys(
                (src.trace_root(split), src.traces)
            ):  # runs before `heldout/` kept all in traces/
                traces = root / f"n{node.id}" / split
                if traces.is_dir():
                    shutil.copytree(traces, new.trace_root(split) / f"n{node.id}" / split, symlinks=True)
    for session in store.sessions(run_id=run_id):
        if not session.transcript_path:
            continue
        target = Path(session.transcript_path)
        try:
            relative = target.relative_to(new.root)
        except ValueError:
            continue  # a transcript kept outside the run folder stays where it is
        origin = src.root / relative
        base = origin.with_suffix("")
        for file in (origin, Path(f"{base}.prompt.md"), Path(f"{base}.result.json")):
            if file.is_file():
                dest = new.root / file.relative_to(src.root)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, dest)
