"""Export one node's harness: a clean tree, the patch against the baseline, a git bundle and EXPORT.json.

Layout of `dest`: `harness/` (the commit's files, no .git), `<name>.patch` (`git diff baseline node`),
`<name>.bundle` (clone-able with `git clone <name>.bundle`), `EXPORT.json` (what was exported and its
scores). Re-exporting into a folder that holds a previous export replaces it; any other non-empty
`dest/harness` is refused.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from evodag.store import EvoDAG
from saddler.errors import HarnessError
from saddler.harness.space import HarnessSpace
from saddler.scoring import pass_at_1


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "harness"


def export_harness(
    space: HarnessSpace, store: EvoDAG, node_id: int, dest: Path, name: str | None = None
) -> dict[str, Any]:
    """Export node `node_id` of `store` from `space` into `dest`; returns the EXPORT.json content.

    `name` (default `<harness name>-node<id>`) names the .patch and .bundle files. Raises `HarnessError`
    when `dest/harness` exists, is not empty and `dest` holds no EXPORT.json of a previous export.
    """
    node = store.get_node(node_id)
    run = store.get_run(node.run_id)
    nodes = {n.id: n for n in store.nodes(run.id)}
    base = nodes.get(run.baseline_node_id) if run.baseline_node_id is not None else None
    base_commit = base.commit if base else space.baseline_commit()
    name = _safe_name(name or f"{space.config.name}-node{node.id}")

    dest = Path(dest)
    tree_dir = dest / "harness"
    if tree_dir.exists() and any(tree_dir.iterdir()):
        if not (dest / "EXPORT.json").is_file():
            raise HarnessError(f"{tree_dir} exists and is not a saddler export: remove it or export somewhere else")
        shutil.rmtree(tree_dir)
    dest.mkdir(parents=True, exist_ok=True)
    space.export_tree(node.commit, tree_dir)
    patch_path = dest / f"{name}.patch"
    patch_path.write_text(space.diff(base_commit, node.commit), encoding="utf-8")
    bundle_path = dest / f"{name}.bundle"
    if bundle_path.exists():
        bundle_path.unlink()
    space.bundle(node.commit, bundle_path)
    added, removed = space.numstat(base_commit, node.commit)
    test = pass_at_1(store.rollouts(run.id, node_id=node.id, split="test"))
    info: dict[str, Any] = {
        "run_id": run.id,
        "node_id": node.id,
        "commit": node.commit,
        "baseline_commit": base_commit,
        "status": node.status,
        "lineage": [n.id for n in store.lineage(node.id)],
        "dev_mean": node.dev_mean,
        "dev_std": node.dev_std,
        "test_mean": round(test.mean, 6) if test.runs else node.test_mean,
        "test_std": round(test.std, 6) if test.runs else node.test_std,
        "test_runs": test.runs,
        "files_changed": space.changed_files(base_commit, node.commit),
        "lines_added": added,
        "lines_removed": removed,
        "harness_dir": "harness",
        "patch": patch_path.name,
        "bundle": bundle_path.name,
    }
    (dest / "EXPORT.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return info
