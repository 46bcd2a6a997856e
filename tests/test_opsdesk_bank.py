"""The opsdesk patch bank: metadata consistency, clean application, order independence, real conflicts."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from benchmarks.opsdesk import TEMPLATE_DIR, OpsdeskBenchmark
from benchmarks.opsdesk.bank import bank_metadata

BANK = {p.id: p for p in OpsdeskBenchmark().patch_bank()}
META = bank_metadata()


def _git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
    )


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "harness"
    shutil.copytree(TEMPLATE_DIR, dest)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    assert _git(dest, "commit", "-qm", "baseline").returncode == 0
    return dest


def _apply_all(repo: Path, ids: list[str]) -> list[str]:
    failures = []
    for pid in ids:
        proc = _git(repo, "apply", "--3way", "-", stdin=BANK[pid].diff)
        unmerged = _git(repo, "diff", "--name-only", "--diff-filter=U").stdout.strip()
        if proc.returncode or unmerged:
            failures.append(pid)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", pid)
    return failures


def test_metadata_is_consistent_with_the_component_map() -> None:
    components = tomllib.loads((TEMPLATE_DIR / "saddler.toml").read_text())["harness"]["components"]
    ids = [p["id"] for p in META["patches"]]
    assert len(ids) == len(set(ids)) >= 20
    effects = [p["effect"] for p in META["patches"]]
    assert effects.count("harmful") >= 3 and effects.count("placebo") >= 2
    pairs = {tuple(sorted((p["id"], other))) for p in META["patches"] for other in p["conflicts_with"]}
    assert len(pairs) >= 2
    for p in META["patches"]:
        patch = BANK[p["id"]]
        assert p["kind"] in ("capability", "steering")
        assert p["subtype"] in ("tool", "loop", "infra", "prompt", "reminder", "hook")
        assert p["symptoms"] and p["description"]
        assert patch.files, p["id"]
        for other in p["conflicts_with"]:
            assert other in BANK and p["id"] in {q["id"]: q for q in META["patches"]}[other]["conflicts_with"]
        for path in patch.files:
            assert not any(fnmatch.fnmatch(path, g) for g in components["protected"]), (p["id"], path)
            assert any(fnmatch.fnmatch(path, g) for g in components[p["kind"]]), (p["id"], path, p["kind"])
    assert set(META["best_combination"]) <= set(BANK)
    assert not {"harmful", "placebo"} & {
        next(p["effect"] for p in META["patches"] if p["id"] == i) for i in META["best_combination"]
    }


def test_every_patch_applies_cleanly_to_the_baseline(repo: Path) -> None:
    for pid, patch in BANK.items():
        proc = _git(repo, "apply", "--check", "-", stdin=patch.diff)
        assert proc.returncode == 0, f"{pid}: {proc.stderr}"


@pytest.mark.parametrize("order", ["bank", "reverse"])
def test_best_combination_applies_in_any_order(repo: Path, order: str) -> None:
    ids = list(META["best_combination"])
    if order == "reverse":
        ids.reverse()
    assert _apply_all(repo, ids) == []
    for pid in ids:  # every patch is fully present: reversing it must now apply
        assert _git(repo, "apply", "--check", "-R", "-", stdin=BANK[pid].diff).returncode == 0, pid


@pytest.mark.parametrize(
    "pair", [("calendar_tz_aware", "calendar_tz_hardcode"), ("loop_retry_backoff", "loop_retry_all")]
)
def test_conflicting_pairs_really_conflict(repo: Path, pair: tuple[str, str]) -> None:
    assert _apply_all(repo, [pair[0]]) == []
    assert _apply_all(repo, [pair[1]]) == [pair[1]]


def test_patched_harness_still_compiles(repo: Path) -> None:
    assert _apply_all(repo, list(META["best_combination"])) == []
    for path in repo.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
