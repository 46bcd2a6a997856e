"""The offline backend's rules: diagnosis from symptoms, reflection attribution, evolution heuristics."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gitrepo import git, git_run, init_commit

from saddler.benchmark import BankPatch, RolloutResult, Symptom, Task
from saddler.config import SessionConfig
from saddler.sessions.offline import OfflineBackend
from saddler.sessions.schema import (
    DiagnosisRequest,
    EdgeInfo,
    EvolutionRequest,
    NodeInfo,
    ReflectionRequest,
    TaskEvidence,
    TaskTransition,
)

PATCH_A = """diff --git a/tools.py b/tools.py
--- a/tools.py
+++ b/tools.py
@@ -1 +1 @@
-PAGES = 1
+PAGES = 10
"""
PATCH_B = """diff --git a/prompt.md b/prompt.md
--- a/prompt.md
+++ b/prompt.md
@@ -1 +1,2 @@
 You are an assistant.
+Verify before finishing.
"""


class BankBenchmark:
    """A tiny benchmark whose traces are JSON files listing symptom codes."""

    name = "bank"

    def tasks(self, split: str) -> list[Task]:
        return []

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        raise NotImplementedError

    def fingerprint(self) -> str:
        return "fp"

    def model_fingerprint(self) -> str:
        return "mfp"

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        codes = json.loads(Path(result.trace_path or "").read_text())
        return [Symptom(code=c, task_id=result.task_id, file="tools.py") for c in codes]

    def patch_bank(self) -> list[BankPatch]:
        return [
            BankPatch(
                "pages", "capability", "tool", ("pagination_truncated",), "follow pagination", PATCH_A, ("tools.py",)
            ),
            BankPatch(
                "verify", "steering", "reminder", ("finished_unverified",), "remind to verify", PATCH_B, ("prompt.md",)
            ),
        ]


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "wt"
    repo.mkdir()
    (repo / "tools.py").write_text("PAGES = 1\n")
    (repo / "prompt.md").write_text("You are an assistant.\n")
    init_commit(repo, "b")
    return repo


def _evidence(tmp_path: Path, task: str, codes: list[str], passed: bool = False) -> TaskEvidence:
    trace = tmp_path / f"{task}.json"
    trace.write_text(json.dumps(codes))
    return TaskEvidence(
        task_id=task, score=float(passed), passed=passed, disposition="task_failure", trace_path=str(trace)
    )


def _request(tmp_path: Path, repo: Path, evidence: list[TaskEvidence], **kw: object) -> DiagnosisRequest:
    base = dict(
        run_dir=str(tmp_path),
        db_path="x",
        worktree=str(repo),
        iteration=1,
        parent_node_id=1,
        phase="capability",
        allowed_kinds=["capability"],
        component_globs={},
        evidence=evidence,
    )
    base.update(kw)
    return DiagnosisRequest(**base)  # type: ignore[arg-type]


def _backend(tmp_path: Path) -> OfflineBackend:
    return OfflineBackend(SessionConfig(), benchmark=BankBenchmark(), run_dir=tmp_path, seed=0)  # type: ignore[arg-type]


def test_diagnosis_applies_the_matching_patch_allowed_by_the_phase(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ev = [
        _evidence(tmp_path, "t1", ["pagination_truncated", "finished_unverified"]),
        _evidence(tmp_path, "t2", ["finished_unverified"]),
    ]
    result = _backend(tmp_path).diagnose_patch(_request(tmp_path, repo, ev))
    assert result.status == "patched" and result.hypothesis is not None
    assert result.hypothesis.origin == "bank:pages" and result.hypothesis.target_tasks == ["t1"]
    assert (repo / "tools.py").read_text() == "PAGES = 10\n"


def test_diagnosis_without_a_matching_patch_is_a_stall_not_an_invention(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ev = [_evidence(tmp_path, "t1", ["finished_unverified"])]
    result = _backend(tmp_path).diagnose_patch(_request(tmp_path, repo, ev))
    assert result.status == "no_patch" and "finished_unverified×1" in result.reason
    assert git_run(repo, "status", "--porcelain").stdout == ""
    lineage = _backend(tmp_path).diagnose_patch(
        _request(tmp_path, repo, [_evidence(tmp_path, "t1", ["pagination_truncated"])], lineage_origins=["bank:pages"])
    )
    assert lineage.status == "no_patch"


def test_exploration_tries_untried_patches_without_symptoms(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    result = _backend(tmp_path).diagnose_patch(
        _request(
            tmp_path,
            repo,
            [_evidence(tmp_path, "t1", [])],
            phase="steering",
            allowed_kinds=["steering"],
            exploration=True,
        )
    )
    assert result.status == "patched" and result.hypothesis and result.hypothesis.origin == "bank:verify"


def _reflect(transitions: list[TaskTransition], files: list[str]) -> dict[str, tuple[str, str]]:
    req = ReflectionRequest(
        run_dir="r",
        db_path="d",
        iteration=2,
        parent_node_id=1,
        candidate_node_id=2,
        decision="accepted",
        hypothesis=None,
        diff="",
        files_changed=files,
        transitions=transitions,
        parent_dev_mean=0.4,
        candidate_dev_mean=0.5,
        best_dev_mean=0.5,
    )
    out = OfflineBackend.reflect(_backend(Path(".")), req)
    return {(lesson.task_id or "general"): (lesson.category, lesson.attribution) for lesson in out.lessons}


def test_reflection_attributes_by_failure_point_and_repetitions() -> None:
    lessons = _reflect(
        [
            TaskTransition(task_id="fix", before=[False, False], after=[True, True], before_failure_files=["tools.py"]),
            TaskTransition(task_id="luck", before=[False, False], after=[True, True], before_failure_files=["loop.py"]),
            TaskTransition(
                task_id="mixed", before=[False, False], after=[True, False], before_failure_files=["tools.py"]
            ),
            TaskTransition(task_id="reg", before=[True], after=[False], after_failure_files=["tools.py"]),
            TaskTransition(task_id="same", before=[True], after=[True]),
        ],
        ["tools.py"],
    )
    assert lessons["fix"] == ("fixed", "true_fix")
    assert lessons["luck"] == ("fixed", "stochastic")
    assert lessons["mixed"] == ("still_failing", "uncertain")
    assert lessons["reg"] == ("regressed", "true_regression")
    assert lessons["same"] == ("still_passing", "uncertain")
    assert lessons["general"][0] == "general"


def _evolve(
    nodes: list[NodeInfo],
    edges: list[EdgeInfo],
    current: int,
    best: int,
    lineage: dict[int, list[int]],
    failing: dict[int, list[str]],
    tried: list[str] | None = None,
):
    req = EvolutionRequest(
        run_dir="r",
        db_path="d",
        iteration=5,
        current_node_id=current,
        best_node_id=best,
        nodes=nodes,
        edges=edges,
        lineage_edge_ids=lineage,
        failing_train_tasks=failing,
        tried_actions=tried or [],
    )
    return _backend(Path(".")).evolve(req)


NODES = [
    NodeInfo(node_id=1, parent_id=None, status="baseline", dev_mean=0.4),
    NodeInfo(node_id=2, parent_id=1, status="accepted", dev_mean=0.6, origin="bank:a"),
    NodeInfo(node_id=3, parent_id=2, status="accepted", dev_mean=0.5, origin="bank:b"),
    NodeInfo(node_id=4, parent_id=1, status="accepted", dev_mean=0.45, origin="bank:c"),
]
EDGES = [
    EdgeInfo(
        edge_id=10, parent_id=1, child_id=2, kind="patch", origin="bank:a", child_status="accepted", true_fixes=["x"]
    ),
    EdgeInfo(
        edge_id=11, parent_id=2, child_id=3, kind="patch", origin="bank:b", child_status="accepted", true_fixes=["y"]
    ),
    EdgeInfo(
        edge_id=12, parent_id=1, child_id=4, kind="patch", origin="bank:c", child_status="accepted", true_fixes=["z"]
    ),
]


def test_evolution_rebases_to_best_then_cherry_picks_a_true_fix_it_lacks() -> None:
    lineage = {3: [10, 11], 2: [10]}
    result = _evolve(NODES, EDGES, current=3, best=2, lineage=lineage, failing={2: ["z"], 3: []})
    assert result.action == "cherry_pick" and result.parent_node_id == 2 and result.edge_ids == [12]
    again = _evolve(NODES, EDGES, 3, 2, lineage, {2: ["z"], 3: []}, tried=["cherry_pick:12@2"])
    assert again.action == "rebase" and again.parent_node_id == 2


def test_evolution_reverts_a_net_harmful_edge_and_continues_otherwise() -> None:
    edges = [*EDGES[:1], EDGES[1].model_copy(update={"true_fixes": [], "true_regressions": ["q"]}), EDGES[2]]
    nodes = [n.model_copy(update={"dev_mean": 0.7}) if n.node_id == 3 else n for n in NODES]
    result = _evolve(nodes, edges, current=3, best=3, lineage={3: [10, 11]}, failing={3: []})
    assert result.action == "revert" and result.edge_ids == [11]
    plain = _evolve(nodes, EDGES, current=3, best=3, lineage={3: [10, 11]}, failing={3: []})
    assert plain.action == "continue" and plain.parent_node_id == 3


def test_a_patch_that_applies_costs_one_git_process(tmp_path: Path, git_calls: list[list[str]]) -> None:
    repo = _repo(tmp_path)
    git_calls.clear()  # count from here: the set-up's own git processes are not the patch's
    calls = git_calls
    result = _backend(tmp_path).diagnose_patch(
        _request(tmp_path, repo, [_evidence(tmp_path, "t1", ["pagination_truncated"])])
    )
    assert result.status == "patched"
    assert [c[0] for c in calls] == ["apply"]  # `apply --3way` exits non-zero on a conflict: nothing to re-check


def test_a_conflicting_patch_leaves_the_worktree_clean_and_the_next_is_tried(
    tmp_path: Path, git_calls: list[list[str]]
) -> None:
    repo = _repo(tmp_path)
    (repo / "tools.py").write_text("PAGES = 1\nLIMIT = 5\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c")
    conflicting = subprocess.run(
        ["git", "diff", "--full-index", "HEAD~1", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.replace("+LIMIT = 5", "+LIMIT = 7")  # a 3-way merge of this onto HEAD conflicts
    (repo / "tools.py").write_text("PAGES = 1\n")
    git(repo, "commit", "-qam", "d")
    (repo / "tools.py").write_text("PAGES = 1\nLIMIT = 6\n")
    git(repo, "commit", "-qam", "e")
    backend = _backend(tmp_path)
    backend._bank = [
        BankPatch("clash", "capability", "tool", ("pagination_truncated", "x"), "clash", conflicting, ("tools.py",)),
        BankPatch("fine", "capability", "tool", ("pagination_truncated",), "fine", PATCH_B, ("prompt.md",)),
    ]
    git_calls.clear()  # count from here: the set-up's own git processes are not the patch's
    calls = git_calls
    evidence = [_evidence(tmp_path, "t1", ["pagination_truncated", "x"])]  # "clash" matches more: it is tried first
    result = backend.diagnose_patch(_request(tmp_path, repo, evidence))
    spent = [c[0] for c in calls]
    assert result.status == "patched" and result.hypothesis is not None
    assert result.hypothesis.origin == "bank:fine" and "bank:clash" in result.reason
    assert (repo / "tools.py").read_text() == "PAGES = 1\nLIMIT = 6\n"  # no conflict markers left behind
    status = git_run(repo, "status", "--porcelain").stdout
    assert status == "M  prompt.md\n"  # `apply --3way` stages what it applied
    assert spent == ["apply", "reset", "clean", "apply"]


def test_evolution_states_a_dev_score_as_every_other_output_does() -> None:
    dev = {2: 5 / 12, 3: 0.25}
    nodes = [n.model_copy(update={"dev_mean": dev[n.node_id]}) if n.node_id in dev else n for n in NODES]
    result = _evolve(nodes, EDGES, current=3, best=2, lineage={3: [10, 11], 2: [10]}, failing={2: [], 3: []})
    assert result.action == "rebase" and "(dev 0.4167)" in result.rationale


def _diff_of(repo: Path, path: str, text: str) -> str:
    """The bank-style diff (full index) that turns `path` of HEAD into `text`, the worktree left as it was."""
    before = (repo / path).read_text()
    (repo / path).write_text(text)
    diff = git_run(repo, "diff", "--full-index").stdout
    (repo / path).write_text(before)
    return diff


def test_a_fix_that_conflicts_with_an_edit_the_lineage_holds_is_written_in_its_place(tmp_path: Path) -> None:
    # an LLM asked for the better retry rewrites the retry code the lineage already holds; a bank diff against the
    # baseline conflicts with it, so the offline author takes back that one edit and writes its own in its place
    repo = _repo(tmp_path)
    lines = ["RETRY = 0", "a", "b", "c", "d", "e", "LIMIT = 5"]
    (repo / "tools.py").write_text("\n".join(lines) + "\n")
    git(repo, "commit", "-qam", "baseline")
    retry_all = _diff_of(repo, "tools.py", "\n".join(["RETRY = 'all'", *lines[1:]]) + "\n")
    backoff = _diff_of(repo, "tools.py", "\n".join(["RETRY = 'backoff'", *lines[1:]]) + "\n")
    (repo / "tools.py").write_text("\n".join(["RETRY = 'all'", *lines[1:-1], "LIMIT = 9"]) + "\n")
    git(repo, "commit", "-qam", "retry_all, then an edit of another line")
    backend = _backend(tmp_path)
    backend._bank = [
        BankPatch("retry_all", "capability", "loop", ("other",), "retry all", retry_all, ("tools.py",)),
        BankPatch("backoff", "capability", "loop", ("pagination_truncated",), "back off", backoff, ("tools.py",)),
    ]
    request = _request(tmp_path, repo, [_evidence(tmp_path, "t1", ["pagination_truncated"])],
                       lineage_origins=["baseline", "bank:retry_all"])  # fmt: skip
    result = backend.diagnose_patch(request)
    assert result.status == "patched" and result.hypothesis is not None
    assert result.hypothesis.origin == "bank:backoff"
    assert (repo / "tools.py").read_text() == "\n".join(["RETRY = 'backoff'", *lines[1:-1], "LIMIT = 9"]) + "\n"
    assert "replaces bank:retry_all" in result.hypothesis.diagnosis


def test_a_conflict_with_no_edit_of_the_lineage_is_still_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "tools.py").write_text("PAGES = 3\n")
    git(repo, "commit", "-qam", "an edit that is no bank patch")
    backend = _backend(tmp_path)
    request = _request(tmp_path, repo, [_evidence(tmp_path, "t1", ["pagination_truncated"])],
                       lineage_origins=["baseline", "session:1"])  # fmt: skip
    result = backend.diagnose_patch(request)
    assert result.status == "no_patch" and "bank:pages" in result.reason
    assert (repo / "tools.py").read_text() == "PAGES = 3\n"
