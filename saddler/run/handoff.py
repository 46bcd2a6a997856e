"""The pull-request hand-off: `saddler export RUN --branch NAME [--repo PATH] [--open-pr]`.

The exported harness is the run's minimized best when a minimization finished (`saddler.minimized`), else the
best node (or `--node`). It becomes a branch of one commit per kept change along the lineage, on the baseline
commit, each with its message from the hypothesis: in the run's own clone, or, when `--repo` names it, in the
user's repository, which must be clean, hold the run's baseline commit and not have the branch yet (else exit
2, nothing written). Saddler's git never runs hooks or the user's config (`saddler.harness.gitcmd`); the commits
are made in the run's clone and fetched into the user's repository. PR.md is written to `RUN/PR.md`; with
`--open-pr` (needs `--repo` and the `gh` CLI) `gh pr create --head NAME --title … --body-file PR.md` opens the
pull request of the branch, which must be pushed first.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evodag.models import Node
from evodag.store import EvoDAG
from saddler.config import load_run_config
from saddler.errors import HandoffRefusedError, HarnessError, RunStateError
from saddler.harness.gitcmd import git, is_repo_root
from saddler.harness.plumbing import apply_on_index, commit_tree
from saddler.harness.space import HarnessSpace
from saddler.procs import run_process_group
from saddler.reporting.pr import Change, lineage_changes, pr_title, render_pr
from saddler.run.folder import RunPaths

GH_TIMEOUT_S = 120.0


@dataclass
class Handoff:
    """What `export_branch` did: the branch, where, its commits (oldest first), PR.md, the pull request's URL."""

    branch: str
    repo: Path
    node_id: int
    minimized: bool
    commits: list[str]
    pr_md: Path
    pr_url: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "repo": str(self.repo), "pr_md": str(self.pr_md)}


def minimization_of(store: EvoDAG, run_id: int) -> Any:
    """The run's finished minimization of its best node (`saddler.minimized`), None without one."""
    from saddler.minimized import minimization

    best = store.get_run(run_id).best_node_id
    return minimization(store, run_id, best) if best is not None else None


def handoff_changes(store: EvoDAG, space: HarnessSpace, target: Node, minimized: Any) -> list[tuple[Change, str]]:
    """(change, tree) per commit of the branch, oldest first. Without `minimized`: every lineage node's own tree.
    With it: the kept changes (hunks) grouped by the lineage edge they came from, each commit adding its group to
    the previous tree; the last commit's tree is the minimized harness's."""
    changes = lineage_changes(store, target if minimized is None else store.get_node(minimized.best_node))
    if minimized is None:
        return [(c, space.tree_of(c.node.commit)) for c in changes]
    by_edge: dict[int | None, list[Any]] = {}
    for contribution in minimized.contributions:
        if contribution.kept:
            by_edge.setdefault(contribution.edge, []).append(contribution)
    edge_of = {c.node.id: e.id for c in changes if (e := store.edge_into(c.node.id)) is not None}
    out: list[tuple[Change, str]] = []
    tree = space.tree_of(space.baseline_commit())
    for change in changes:
        kept = by_edge.pop(edge_of.get(change.node.id), [])
        if not kept:
            continue
        for contribution in kept:
            made, why = apply_on_index(space.repo_dir, space.git_dir, tree, contribution.patch)
            if made is None:
                raise HarnessError(f"change {contribution.change} of the minimized harness does not apply: {why}")
            tree = made
        points = [c.dev_points for c in kept if c.dev_points is not None]
        change.hunks.extend(f"{c.file} {c.header}" for c in kept)
        out.append((_with(change, sum(points) if points else None), tree))
    final = space.tree_of(target.commit)
    if out and out[-1][1] != final:  # hunks no edge names, or offsets git resolved otherwise: the harness is exact
        out[-1] = (out[-1][0], final)
    elif not out and final != tree:  # every kept change is in a file no lineage edge names
        whole = Change(target, "saddler: the minimized harness", f"saddler: node n{target.id}.", None)
        out.append((_with(whole, None), final))
    return out


def write_pr_md(store: EvoDAG, space: HarnessSpace, run_id: int, dest: Path) -> Path:
    """`dest/PR.md` for the run's answer (the minimized best when measured, else the best): `best/PR.md`."""
    minimized = minimization_of(store, run_id)
    best = store.get_run(run_id).best_node_id
    target_id = minimized.node if minimized is not None else best
    if target_id is None:
        raise RunStateError("the run has no best node yet; run it first with `saddler run DIR`")
    target = store.get_node(target_id)
    planned = handoff_changes(store, space, target, minimized)
    path = Path(dest) / "PR.md"
    path.write_text(render_pr(store, run_id, target, [c for c, _ in planned], minimized), encoding="utf-8")
    return path


def _with(change: Change, contribution: float | None) -> Change:
    return Change(change.node, change.subject, change.body, change.dev_delta, contribution, change.hunks)


def export_branch(
    run_dir: Path,
    branch: str,
    *,
    repo: Path | None = None,
    node_id: int | None = None,
    open_pr: bool = False,
    which: Callable[[str], str | None] | None = None,
) -> Handoff:
    """Write the hand-off branch and PR.md (see the module docstring); refusals raise `HandoffRefusedError`."""
    paths = RunPaths(Path(run_dir).resolve())
    cfg = load_run_config(paths.root)
    if open_pr and repo is None:
        raise HandoffRefusedError("--open-pr opens the pull request from your repository: pass --repo PATH too")
    gh = (which or shutil.which)("gh") if open_pr else None
    if open_pr and gh is None:
        raise HandoffRefusedError(
            "--open-pr needs the gh CLI on PATH (https://cli.github.com); without it, export without --open-pr and "
            "open the pull request by hand with PR.md as its description"
        )
    _check_branch_name(branch, paths.root)
    with EvoDAG(paths.db, readonly=True) as store:
        run = store.get_run()
        minimized = minimization_of(store, run.id) if node_id is None else None
        target_id = minimized.node if minimized is not None else node_id if node_id is not None else run.best_node_id
        if target_id is None:
            raise RunStateError("the run has no best node yet; run it first with `saddler run DIR`")
        target = store.get_node(target_id)
        space = HarnessSpace(paths.harness(cfg.harness), paths.worktrees)
        try:
            planned = handoff_changes(store, space, target, minimized)
            dest = _destination(repo, space, branch)
            parent, commits = space.baseline_commit(), []
            for change, tree in planned:
                parent = commit_tree(space.repo_dir, tree, parent, change.message, None)
                commits.append(parent)
            text = render_pr(store, run.id, target, [c for c, _ in planned], minimized)
            title = pr_title(store, run.id, target)
            git(["update-ref", f"refs/heads/{branch}", parent, ""], space.repo_dir)
        finally:
            space.close()
    if dest != space.repo_dir:
        git(["fetch", "--quiet", "--no-tags", str(space.repo_dir), f"refs/heads/{branch}:refs/heads/{branch}"], dest)
    pr_md = paths.root / "PR.md"
    pr_md.write_text(text, encoding="utf-8")
    done = Handoff(branch, dest, target.id, minimized is not None, commits, pr_md)
    if gh is not None:
        done.pr_url = _open_pr(gh, dest, branch, title, pr_md)
    return done


def _check_branch_name(branch: str, cwd: Path) -> None:
    if git(["check-ref-format", "--branch", branch], cwd, check=False).returncode != 0:
        raise HandoffRefusedError(f"--branch {branch!r} is not a valid git branch name")


def _destination(repo: Path | None, space: HarnessSpace, branch: str) -> Path:
    """The repository the branch goes into: the run's clone, or `repo` once it is checked (exit 2 if not fit)."""
    dest = space.repo_dir if repo is None else Path(repo).expanduser().resolve()
    if repo is not None:
        if not dest.is_dir() or not is_repo_root(dest):
            raise HandoffRefusedError(f"--repo {dest}: not the top folder of a git repository")
        dirty = git(["status", "--porcelain", "--untracked-files=normal"], dest).stdout.strip()
        if dirty:
            first = dirty.splitlines()[0].strip()
            raise HandoffRefusedError(
                f"--repo {dest} has uncommitted changes ({first}…): commit or stash them first, then export again"
            )
        base = space.baseline_commit()
        if git(["cat-file", "-e", f"{base}^{{commit}}"], dest, check=False).returncode != 0:
            raise HandoffRefusedError(
                f"--repo {dest} does not hold the run's baseline commit {base[:12]}: it is not the repository the "
                "run's harness came from (or not at that commit); export without --repo into the run's clone "
                f"({space.repo_dir}) and fetch the branch from there"
            )
    for where in {dest, space.repo_dir}:
        if git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], where, check=False).returncode == 0:
            raise HandoffRefusedError(f"branch {branch!r} already exists in {where}: choose another --branch")
    return dest


def _open_pr(gh: str, repo: Path, branch: str, title: str, body: Path) -> str:
    """`gh pr create` for the pushed branch; its URL (gh prints it), else a `HandoffRefusedError` saying why."""
    argv = [gh, "pr", "create", "--head", branch, "--title", title, "--body-file", str(body)]
    done = run_process_group(argv, cwd=repo, timeout_s=GH_TIMEOUT_S)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-600:]
        raise HandoffRefusedError(
            f"gh pr create failed ({tail or f'exit {done.returncode}'}): push the branch first (`git -C {repo} push "
            f"-u origin {branch}`), then `gh pr create --head {branch} --body-file {body}`"
        )
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
