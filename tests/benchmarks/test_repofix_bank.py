"""The repofix patch bank: metadata consistency, clean application, order independence, real conflicts, placebos."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.repofix import TEMPLATE_DIR, RepofixBenchmark
from benchmarks.repofix.runner import rollout_dict
from benchmarks.repofix.tasks import all_specs

BANK = {p.id: p for p in RepofixBenchmark().patch_bank()}
META = RepofixBenchmark().bank_metadata()
EFFECT = {p["id"]: p["effect"] for p in META["patches"]}


DIFFS = {pid: p.diff for pid, p in BANK.items()}
Git = Callable[..., subprocess.CompletedProcess[str]]
Apply = Callable[[Path, dict[str, str], list[str]], list[str]]


@pytest.fixture()
def repo(tmp_path: Path, template_repo: Callable[[Path, Path], Path]) -> Path:
    return template_repo(TEMPLATE_DIR, tmp_path / "harness")


def test_metadata_is_consistent_with_the_component_map() -> None:
    components = tomllib.loads((TEMPLATE_DIR / "saddler.toml").read_text())["harness"]["components"]
    ids = [p["id"] for p in META["patches"]]
    assert len(ids) == len(set(ids)) >= 24 and set(ids) == set(BANK)
    effects = list(EFFECT.values())
    assert effects.count("harmful") >= 3 and effects.count("placebo") >= 3
    assert {p["kind"] for p in META["patches"] if p["effect"] == "harmful"} == {"capability", "steering"}
    pairs = {tuple(sorted((p["id"], other))) for p in META["patches"] for other in p["conflicts_with"]}
    assert len(pairs) >= 2
    for p in META["patches"]:
        patch = BANK[p["id"]]
        assert p["kind"] in ("capability", "steering")
        assert p["subtype"] in ("tool", "loop", "infra", "prompt", "reminder", "hook")
        assert p["symptoms"] and p["description"] and patch.files, p["id"]
        for other in p["conflicts_with"]:
            assert p["id"] in next(q for q in META["patches"] if q["id"] == other)["conflicts_with"]
        for path in patch.files:
            assert not any(fnmatch.fnmatch(path, g) for g in components["protected"]), (p["id"], path)
            assert any(fnmatch.fnmatch(path, g) for g in components[p["kind"]]), (p["id"], path, p["kind"])
    best = META["best_combination"]
    assert set(best) <= set(BANK) and not {"harmful", "placebo"} & {EFFECT[i] for i in best}
    assert {BANK[i].kind for i in best} == {"capability", "steering"}


def test_every_symptom_a_patch_claims_is_one_the_extractor_can_report() -> None:
    from benchmarks.repofix import symptoms

    vocabulary = set(symptoms.__doc__.split("Vocabulary (see the README):")[1].replace("\n", " ").split(", "))
    vocabulary = {v.strip().rstrip(".") for v in vocabulary}
    for p in META["patches"]:
        for code in p["symptoms"]:
            assert code in vocabulary or code.startswith("missing_tool:"), (p["id"], code)


def test_every_patch_applies_cleanly_to_the_baseline(repo: Path, git_check: Git) -> None:
    for pid, patch in BANK.items():
        proc = git_check(repo, "apply", "--check", "-", stdin=patch.diff)
        assert proc.returncode == 0, f"{pid}: {proc.stderr}"


@pytest.mark.parametrize("order", ["bank", "reverse"])
def test_best_combination_applies_in_any_order(repo: Path, order: str, apply_patches: Apply, git_check: Git) -> None:
    ids = list(META["best_combination"])
    if order == "reverse":
        ids.reverse()
    assert apply_patches(repo, DIFFS, ids) == []
    for pid in ids:  # every patch is fully present: reversing it must now apply
        assert git_check(repo, "apply", "--check", "-R", "-", stdin=BANK[pid].diff).returncode == 0, pid
    for path in repo.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")


@pytest.mark.parametrize(
    "pair",
    [("middleware_head_tail", "middleware_limit_raise"), ("middleware_format_repo_style", "middleware_autoformat")],
)
def test_conflicting_pairs_really_conflict(repo: Path, pair: tuple[str, str], apply_patches: Apply) -> None:
    assert apply_patches(repo, DIFFS, [pair[0]]) == []
    assert apply_patches(repo, DIFFS, [pair[1]]) == [pair[1]]


def test_placebos_score_exactly_like_the_baseline(
    tmp_path: Path, template_repo: Callable[[Path, Path], Path], apply_patches: Apply
) -> None:
    """A patch the model never sees changes no decision: same results, same traces, on every third task."""
    placebos = [pid for pid, effect in EFFECT.items() if effect == "placebo"]
    specs = all_specs()[::3]

    def outcomes(harness: Path) -> list[tuple[object, ...]]:
        out = []
        for spec in specs:
            r = rollout_dict(harness, spec, 0, tmp_path / "traces" / harness.name)
            out.append((r["task_id"], r["score"], r["passed"], r["rationale"], r["llm_calls"], r["failure_file"]))
        return out

    baseline = outcomes(template_repo(TEMPLATE_DIR, tmp_path / "baseline"))
    assert 0 < sum(o[2] for o in baseline) < len(baseline)
    for pid in placebos:
        harness = template_repo(TEMPLATE_DIR, tmp_path / pid)
        assert apply_patches(harness, DIFFS, [pid]) == []
        assert outcomes(harness) == baseline, pid
