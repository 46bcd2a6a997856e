"""The opsdesk patch bank: metadata consistency, clean application, order independence, real conflicts."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.opsdesk import TEMPLATE_DIR, OpsdeskBenchmark
from benchmarks.opsdesk.bank import bank_metadata

BANK = {p.id: p for p in OpsdeskBenchmark().patch_bank()}
META = bank_metadata()


DIFFS = {pid: p.diff for pid, p in BANK.items()}
Git = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture()
def repo(tmp_path: Path, template_repo: Callable[[Path, Path], Path]) -> Path:
    return template_repo(TEMPLATE_DIR, tmp_path / "harness")


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


def test_every_patch_applies_cleanly_to_the_baseline(repo: Path, git_check: Git) -> None:
    for pid, patch in BANK.items():
        proc = git_check(repo, "apply", "--check", "-", stdin=patch.diff)
        assert proc.returncode == 0, f"{pid}: {proc.stderr}"


@pytest.mark.parametrize("order", ["bank", "reverse"])
def test_best_combination_applies_in_any_order(repo: Path, order: str, apply_patches: Callable[..., list[str]],
                                               git_check: Git) -> None:  # fmt: skip
    ids = list(META["best_combination"])
    if order == "reverse":
        ids.reverse()
    assert apply_patches(repo, DIFFS, ids) == []
    for pid in ids:  # every patch is fully present: reversing it must now apply
        assert git_check(repo, "apply", "--check", "-R", "-", stdin=BANK[pid].diff).returncode == 0, pid


@pytest.mark.parametrize(
    "pair", [("calendar_tz_aware", "calendar_tz_hardcode"), ("loop_retry_backoff", "loop_retry_all")]
)
def test_conflicting_pairs_really_conflict(
    repo: Path, pair: tuple[str, str], apply_patches: Callable[..., list[str]]
) -> None:
    assert apply_patches(repo, DIFFS, [pair[0]]) == []
    assert apply_patches(repo, DIFFS, [pair[1]]) == [pair[1]]


def test_patched_harness_still_compiles(repo: Path, apply_patches: Callable[..., list[str]]) -> None:
    assert apply_patches(repo, DIFFS, list(META["best_combination"])) == []
    for path in repo.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
