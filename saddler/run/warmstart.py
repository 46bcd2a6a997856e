"""Warm start (`saddler init … --warm-start OTHER_RUN`): another run's lessons, excluded ideas, per-task registry and
accepted edges for a new run of the same harness and benchmark (the document: `saddler.warmstart`).

`read_run` takes, from the other run's store, train-side history only: its lessons about train tasks and its
general ones, each excluded idea (an invalid or rejected candidate: origin, status, reason, plan) and each train
task its best node still fails, all as lessons; and the accepted edges along its best node's lineage. Anything that
names a dev or test task is left out, so the session view stays sealed whatever the other run recorded. `prepare`
checks the fingerprints (the harness baseline tree, the benchmark's fingerprint) and writes the document; a
mismatch is refused (`WarmStartMismatchError`, exit 2, naming which) unless forced. `import_once` puts the lessons
into the new run's store when it starts, once, with a `warmstart.imported` event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evodag.decisions import INVALID, KEPT_DECISIONS, REJECTED
from evodag.models import Node
from evodag.store import EvoDAG
from saddler.benchmark import load_benchmark
from saddler.config import load_run_config
from saddler.errors import ConfigError, WarmStartMismatchError
from saddler.harness.space import HarnessSpace
from saddler.run.folder import RunPaths
from saddler.warmstart import WarmEdge, WarmLesson, WarmStart, load_warm_start, save_warm_start

IMPORTED_EVENT = "warmstart.imported"
EXCLUDED_STATUSES = (INVALID, REJECTED)


def read_run(other: Path) -> WarmStart:
    """The warm-start document of the run folder `other` (see the module docstring)."""
    paths = RunPaths(Path(other).expanduser().resolve())
    if not paths.db.is_file():
        raise ConfigError(f"--warm-start {paths.root}: no run there (no evodag.sqlite): name a run folder")
    cfg = load_run_config(paths.root)
    bench = load_benchmark(cfg.benchmark, cfg.benchmark_options)
    train = {t.id for t in bench.tasks("train")}
    held_out = [t.id for s in ("dev", "test") for t in bench.tasks(s)]

    def sealed(text: str) -> bool:
        return not any(task in text for task in held_out)

    space = HarnessSpace(paths.harness(cfg.harness), paths.worktrees)
    with EvoDAG(paths.db, readonly=True) as store:
        run = store.get_run()
        name = str(run.config.get("name", paths.root.name))
        tag = f"[warm start from {name}]"
        lessons = [
            WarmLesson(les.category, les.attribution, f"{tag} {les.text}", les.task_id)
            for les in store.lessons(run_id=run.id)
            if (les.task_id is None or les.task_id in train) and sealed(les.text)
        ]
        for node in store.nodes(run_id=run.id):
            if node.status in EXCLUDED_STATUSES:
                plan = str((node.hypothesis or {}).get("plan", ""))
                text = f"{tag} excluded idea {node.origin} ({node.status}): {node.status_reason}; plan: {plan}"
                if sealed(text):
                    lessons.append(WarmLesson("general", "uncertain", text))
        best = store.get_node(run.best_node_id) if run.best_node_id is not None else None
        accepted: list[WarmEdge] = []
        if best is not None:
            for row in store.rollouts(run.id, node_id=best.id, split="train"):
                if not row.passed and row.task_id in train and sealed(row.rationale):
                    why = row.rationale or row.disposition
                    text = f"{tag} {row.task_id} still failing on its best node n{best.id}: {why}"
                    lessons.append(WarmLesson("still_failing", "uncertain", text, row.task_id))
            accepted = _accepted_edges(store, best, train)
        fingerprint = str((run.inputs or {}).get("benchmark.fingerprint") or bench.fingerprint())
    try:
        tree = space.tree_of(space.baseline_commit())
    finally:
        space.close()
    unique = list(dict.fromkeys(lessons))
    return WarmStart(str(paths.root), name, tree, cfg.benchmark, fingerprint, unique, accepted)


def _accepted_edges(store: EvoDAG, best: Node, train: set[str]) -> list[WarmEdge]:
    out = []
    for node in store.lineage(best.id)[1:]:
        edge = store.edge_into(node.id)
        if edge is None or edge.kind not in ("patch", "cherry_pick") or node.status not in KEPT_DECISIONS:
            continue
        source = store.get_node(store.get_edge(edge.source_edge_id).child_id) if edge.source_edge_id else node
        hyp = source.hypothesis or {}
        fixed = [t for t in edge.fixed if t in train]
        diff = store.get_blob(edge.diff_sha)
        out.append(WarmEdge(source.origin, node.patch_kind, str(hyp.get("plan", "")), diff, fixed))
    return out


def mismatches(warm: WarmStart, harness_tree: str, benchmark: str, fingerprint: str) -> list[str]:
    """What differs between the other run and this one, each said in words; [] when they match."""
    found = []
    if warm.harness_tree != harness_tree:
        found.append(f"the harness baseline tree ({warm.harness_tree[:12]} there, {harness_tree[:12]} here)")
    if warm.benchmark != benchmark or warm.benchmark_fingerprint != fingerprint:
        found.append(
            f"the benchmark ({warm.benchmark} {warm.benchmark_fingerprint} there, {benchmark} {fingerprint} here)"
        )
    return found


def prepare(run_dir: Path, other: Path, force: bool) -> list[str]:
    """Read `other`, check it against the new run folder `run_dir` (its clone and config exist), write the
    document; returns the mismatches accepted by `force` ([] when none). Refuses a mismatch without `force`."""
    paths = RunPaths(Path(run_dir))
    cfg = load_run_config(paths.root)
    warm = read_run(other)
    space = HarnessSpace(paths.harness(cfg.harness), paths.worktrees)
    try:
        tree = space.tree_of(space.baseline_commit())
    finally:
        space.close()
    found = mismatches(warm, tree, cfg.benchmark, load_benchmark(cfg.benchmark, cfg.benchmark_options).fingerprint())
    if found and not force:
        raise WarmStartMismatchError(
            f"--warm-start {warm.source} is not a run of this harness and benchmark: {'; '.join(found)} differ; "
            "pass --force to import its history anyway"
        )
    save_warm_start(paths.root, warm)
    return found


def import_once(store: EvoDAG, run_id: int, run_dir: Path) -> int:
    """Add the warm start's lessons to the run's store, once (a `warmstart.imported` event marks it done); the
    number of lessons imported (0 when there is no warm start or it was imported before)."""
    warm = load_warm_start(run_dir)
    if warm is None or store.events(run_id=run_id, kind=IMPORTED_EVENT):
        return 0
    with store.transaction():
        for lesson in warm.lessons:
            store.add_lesson(run_id, lesson.category, lesson.attribution, lesson.text, task_id=lesson.task_id)
        payload: dict[str, Any] = {
            "source": warm.source,
            "name": warm.name,
            "lessons": len(warm.lessons),
            "accepted": [e.origin for e in warm.accepted],
        }
        store.log_event(IMPORTED_EVENT, payload, run_id=run_id)
    return len(warm.lessons)
