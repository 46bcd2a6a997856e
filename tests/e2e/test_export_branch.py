"""The pull-request hand-off: `saddler export RUN --branch NAME [--repo PATH] [--open-pr]` and best/PR.md.

One small opsdesk run from a user's git repository serves every test (each test writes its own branch name)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from gitrepo import git
from typer.testing import CliRunner

from evodag.store import EvoDAG
from saddler.cli.app import app
from saddler.reporting.pr import commit_subject
from saddler.resources import template_path
from saddler.run.folder import init_run
from saddler.run.loop import Optimizer

pytestmark = pytest.mark.slow
runner = CliRunner()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("handoff")
    user = root / "user-harness"
    shutil.copytree(template_path("opsdesk"), user)
    git(user, "init", "-q", "-b", "main")
    git(user, "add", "-A")
    git(user, "commit", "-qm", "my harness")
    run = root / "run"
    sets = {"loop": {"max_iterations": 4, "batch_size": 6, "test_runs": 1}, "minimize": {"enabled": False}}
    init_run(run, harness=user, benchmark="opsdesk", seed=0, overrides=sets)  # the lineage's own commits
    Optimizer(run, quiet=True).run()
    return {"run": run, "user": user}


def _lineage(run: Path) -> list[Any]:
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        return store.lineage(store.get_run().best_node_id)


def test_the_branch_has_one_commit_per_lineage_change_and_the_best_tree(finished: dict[str, Path]) -> None:
    run = finished["run"]
    result = runner.invoke(app, ["export", str(run), "--branch", "saddler/best", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    lineage = _lineage(run)
    assert len(lineage) > 1, "the fixture run accepted nothing"
    clone = run / "harness"
    assert sorted(out) == ["branch", "commits", "minimized", "node_id", "pr_md", "pr_url", "repo"]
    assert (out["branch"], out["repo"], out["node_id"], out["minimized"]) == (
        "saddler/best",
        str(clone.resolve()),
        lineage[-1].id,
        False,
    )
    log = git(clone, "log", "--format=%H %s", f"{lineage[0].commit}..saddler/best").splitlines()[::-1]
    assert [line.split(" ", 1)[0] for line in log] == out["commits"]
    assert [line.split(" ", 1)[1] for line in log] == [commit_subject(n.hypothesis["plan"]) for n in lineage[1:]]
    assert git(clone, "rev-parse", "saddler/best^{tree}") == git(clone, "rev-parse", f"{lineage[-1].commit}^{{tree}}")
    pr = Path(out["pr_md"]).read_text()
    for section in ("## Summary", "## Per task (before → after)", "## Changes", "## Lessons", "## Risks", "## Cost"):
        assert section in pr
    assert "Measured contribution: not measured (`saddler minimize RUN`" in pr
    assert "| task | before | after |" in pr and "\ndev: " in pr and "\ntest: " in pr


def test_best_holds_pr_md_at_the_end_of_a_run(finished: dict[str, Path]) -> None:
    text = (finished["run"] / "best" / "PR.md").read_text()
    assert text.startswith("# saddler: ") and "## Changes" in text


def test_into_the_users_repository_only_when_named_and_clean(finished: dict[str, Path]) -> None:
    run, user = finished["run"], finished["user"]
    head = git(user, "rev-parse", "HEAD")
    result = runner.invoke(app, ["export", str(run), "--branch", "saddler/pr", "--repo", str(user)])
    assert result.exit_code == 0, result.output
    assert git(user, "rev-parse", "HEAD") == head and git(user, "status", "--porcelain") == ""
    assert git(user, "rev-parse", "saddler/pr^{tree}") == git(run / "harness", "rev-parse", "saddler/pr^{tree}")
    assert git(user, "rev-list", "--count", f"{head}..saddler/pr") == str(len(_lineage(run)) - 1)

    again = runner.invoke(app, ["export", str(run), "--branch", "saddler/pr", "--repo", str(user)])
    assert again.exit_code == 2 and "branch 'saddler/pr' already exists" in again.output

    (user / "prompts" / "system.md").write_text("edited\n")
    try:
        dirty = runner.invoke(app, ["export", str(run), "--branch", "saddler/dirty", "--repo", str(user)])
        assert dirty.exit_code == 2 and "has uncommitted changes" in dirty.output
        assert subprocess.run(["git", "rev-parse", "--verify", "-q", "saddler/dirty"], cwd=user).returncode == 1
    finally:
        git(user, "checkout", "-q", "--", ".")


def test_a_repository_without_the_runs_baseline_is_refused(finished: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / "README").write_text("x\n")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "unrelated")
    result = runner.invoke(app, ["export", str(finished["run"]), "--branch", "x", "--repo", str(other)])
    assert result.exit_code == 2 and "does not hold the run's baseline commit" in result.output
    assert git(other, "branch", "--list", "x") == ""


def _stand_in_gh(folder: Path) -> Path:
    """A `gh` that records its argv and the body file, and prints a PR URL as `gh pr create` does on success."""
    folder.mkdir()
    gh = folder / "gh"
    gh.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "assert args[:2] == ['pr', 'create'], args\n"
        "body = open(args[args.index('--body-file') + 1]).read()\n"
        "json.dump({'argv': args, 'cwd': os.getcwd(), 'body': body}, open(os.environ['GH_RECORD'], 'w'))\n"
        "print('https://github.com/example/harness/pull/7')\n"
    )
    gh.chmod(0o755)
    return gh


def test_open_pr_runs_gh_pr_create_with_the_branch_title_and_body(
    finished: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gh = _stand_in_gh(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{gh.parent}:{Path(shutil.which('git') or 'git').parent}")
    monkeypatch.setenv("GH_RECORD", str(tmp_path / "gh.json"))
    run, user = finished["run"], finished["user"]
    result = runner.invoke(app, ["export", str(run), "--branch", "saddler/open", "--repo", str(user), "--open-pr"])
    assert result.exit_code == 0, result.output
    assert "pull request https://github.com/example/harness/pull/7" in result.output
    record = json.loads((tmp_path / "gh.json").read_text())
    title = record["argv"][record["argv"].index("--title") + 1]
    assert record["argv"] == [
        "pr", "create", "--head", "saddler/open", "--title", title, "--body-file", str(run.resolve() / "PR.md")
    ]  # fmt: skip
    assert title.startswith("saddler: ") and record["body"] == (run / "PR.md").read_text()
    assert Path(record["cwd"]).resolve() == user.resolve()


def test_open_pr_is_refused_without_gh_or_without_repo(
    finished: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import saddler.run.handoff as handoff

    monkeypatch.setattr(handoff.shutil, "which", lambda name: None)
    run, user = finished["run"], finished["user"]
    absent = runner.invoke(app, ["export", str(run), "--branch", "saddler/nogh", "--repo", str(user), "--open-pr"])
    assert absent.exit_code == 2 and "--open-pr needs the gh CLI on PATH" in absent.output
    assert git(user, "branch", "--list", "saddler/nogh") == ""
    no_repo = runner.invoke(app, ["export", str(run), "--branch", "saddler/norepo", "--open-pr"])
    assert no_repo.exit_code == 2 and "pass --repo PATH too" in no_repo.output
    neither = runner.invoke(app, ["export", str(run)])
    assert neither.exit_code == 2 and "give exactly one of --to DIR or --branch NAME" in neither.output


def test_a_minimized_best_is_exported_with_each_kept_change_and_its_measured_points(
    finished: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Minimization's record as `saddler.minimized` gives it (a stand-in module written from its contract): one
    kept change (the first lineage edge's, 0.05 dev points), the second one dropped."""
    run = finished["run"]
    lineage = _lineage(run)
    with EvoDAG(run / "evodag.sqlite", readonly=True) as store:
        edges = [store.edge_into(n.id) for n in lineage[1:]]
        first = store.get_blob(edges[0].diff_sha)  # type: ignore[union-attr]
    kept = types.SimpleNamespace(change=1, file="f", header="@@", patch=first, lines=1, edge=edges[0].id,  # type: ignore[union-attr]
                                 kept=True, dev_points=0.05, step=1)  # fmt: skip
    dropped = types.SimpleNamespace(**{**kept.__dict__, "change": 2, "kept": False, "edge": None, "dev_points": -0.01})
    minimized = types.SimpleNamespace(
        best_node=lineage[-1].id, node=lineage[1].id, contributions=(kept, dropped),
        summary=lambda: "1 of 2 changes, dev 0.900 → 0.900",
    )  # fmt: skip
    module = types.ModuleType("saddler.minimized")
    module.minimization = lambda store, run_id, best_node=None: minimized  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "saddler.minimized", module)
    result = runner.invoke(app, ["export", str(run), "--branch", "saddler/minimized", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["minimized"], out["node_id"], len(out["commits"])) == (True, lineage[1].id, 1)
    clone = run / "harness"
    assert git(clone, "rev-parse", "saddler/minimized^{tree}") == git(
        clone, "rev-parse", f"{lineage[1].commit}^{{tree}}"
    )
    pr = Path(out["pr_md"]).read_text()
    assert "minimized: 1 of 2 changes, dev 0.900 → 0.900" in pr and "carries +0.050 dev" in pr
    assert "Measured contribution: not measured" not in pr
