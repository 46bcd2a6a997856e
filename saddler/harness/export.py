"""Export one node's harness: a clean tree, the patch against the baseline, a git bundle and EXPORT.json.

Layout of `dest`: `harness/` (the commit's files, no .git), `<name>.patch` (`git diff baseline node`),
`<name>.bundle` (clone-able with `git clone <name>.bundle`), `EXPORT.json` (what was exported and its
scores). Re-exporting into a folder that holds a previous export replaces it, leaving only the new export's files
(and any file that is not saddler's); any other non-empty `dest/harness` is refused.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.errors import DiskFullError, HarnessError
from saddler.files import remove_path
from saddler.harness.space import HarnessSpace
from saddler.scoring import node_score, recorded_score_kind

STAGE = ".saddler-export.tmp"


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "harness"


def export_harness(
    space: HarnessSpace, store: EvoDAG, node_id: int, dest: Path, name: str | None = None
) -> dict[str, Any]:
    """Export node `node_id` of `store` from `space` into `dest`; returns the EXPORT.json content.

    `name` (default `<harness name>-node<id>`) names the .patch and .bundle files. The export is written whole
    in `dest/.saddler-export.tmp` first, then moved in place of the previous export (whose files, named by its
    EXPORT.json, are removed; other files in `dest` are left alone). A full disk raises `DiskFullError` and
    leaves the previous export as it was. Raises `HarnessError` when `dest/harness` exists, is not empty and
    `dest` holds no trace of a previous saddler export.
    """
    node = store.get_node(node_id)
    run = store.get_run(node.run_id)
    nodes = {n.id: n for n in store.nodes(run.id)}
    base = nodes.get(run.baseline_node_id) if run.baseline_node_id is not None else None
    base_commit = base.commit if base else space.baseline_commit()
    name = _safe_name(name or f"{space.config.name}-node{node.id}")

    dest = Path(dest)
    stage = dest / STAGE
    tree_dir = dest / "harness"
    ours = (dest / "EXPORT.json").is_file() or stage.is_dir()
    if tree_dir.exists() and any(tree_dir.iterdir()) and not ours:
        raise HarnessError(f"{tree_dir} exists and is not a saddler export: remove it or export somewhere else")
    try:
        interrupted: set[str] = set()  # a swap cut short moved some of these into dest already
        if stage.exists():
            interrupted = {p.name for p in stage.iterdir()}
            shutil.rmtree(stage)
        stage.mkdir(parents=True)
        try:
            kind = recorded_score_kind(run.config, run.inputs)  # the score node.test_mean is in
            info = _write(space, store, run.id, node, base_commit, name, kind, stage)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)  # the previous export stays as it was
            raise
        _swap_in(stage, dest, interrupted)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError("the export", dest) from exc
        raise
    except DiskFullError as exc:  # git (archive, bundle) ran out of space writing into the export
        if exc.what != "the export":
            raise DiskFullError("the export", dest) from exc
        raise
    return info


def _write(
    space: HarnessSpace, store: EvoDAG, run_id: int, node: Node, base: str, name: str, kind: str, out: Path
) -> dict[str, Any]:
    space.export_tree(node.commit, out / "harness")
    patch_path = out / f"{name}.patch"
    patch_path.write_text(space.diff(base, node.commit), encoding="utf-8")
    bundle_path = out / f"{name}.bundle"
    space.bundle(node.commit, bundle_path)
    added, removed = space.numstat(base, node.commit)
    test = node_score(store.rollouts(run_id, node_id=node.id, split="test"), kind)
    info: dict[str, Any] = {
        "run_id": run_id,
        "node_id": node.id,
        "commit": node.commit,
        "baseline_commit": base,
        "status": node.status,
        "lineage": [n.id for n in store.lineage(node.id)],
        "dev_mean": node.dev_mean,
        "dev_std": node.dev_std,
        "test_mean": round(test.mean, 6) if test.runs else node.test_mean,
        "test_std": round(test.std, 6) if test.runs else node.test_std,
        "test_runs": test.runs,
        "files_changed": space.changed_files(base, node.commit),
        "lines_added": added,
        "lines_removed": removed,
        "harness_dir": "harness",
        "patch": patch_path.name,
        "bundle": bundle_path.name,
    }
    (out / "EXPORT.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return info


def _swap_in(stage: Path, dest: Path, interrupted: set[str]) -> None:
    """Replace the previous export in `dest` by the staged one: old files out (EXPORT.json last), new files in
    (EXPORT.json last). Interrupted, the stage folder remains and marks `dest` as ours for the next export."""
    old = _listed(dest / "EXPORT.json") | {n for n in interrupted if "/" not in n}
    new = sorted(p.name for p in stage.iterdir())
    for item in sorted((old | set(new)) - {"EXPORT.json"}):
        remove_path(dest / item)
    remove_path(dest / "EXPORT.json")
    for item in sorted(new, key=lambda n: n == "EXPORT.json"):
        os.replace(stage / item, dest / item)
    stage.rmdir()


def _listed(export_json: Path) -> set[str]:
    """The files a previous export wrote, from its EXPORT.json (nothing if it is absent or unreadable)."""
    try:
        info = json.loads(export_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    names = {info.get(k) for k in ("harness_dir", "patch", "bundle")} if isinstance(info, dict) else set()
    return {n for n in names if isinstance(n, str) and n and "/" not in n and n not in (".", "..")}
