"""Requests to and validated results from the three optimizer sessions.

Every backend receives these plain requests and must return these results (pydantic-validated);
an LLM backend parses its structured output into them. Cost and transcript go in `stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["diagnosis_patch", "reflection", "evolution"]
Attribution = Literal["true_fix", "true_regression", "stochastic", "uncertain"]
Category = Literal["fixed", "regressed", "still_failing", "still_passing", "general"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionStats(_Model):
    """What a session cost; stored in the `sessions` table."""

    backend: str
    model: str = ""
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    transcript_path: str | None = None
    outcome: str = "ok"  # ok | no_patch | failed:<reason>
    error: str = ""
    cli_attempts: int = 1  # how many times the CLI / SDK query ran: 1 + its retries of transient API errors


class TaskEvidence(_Model):
    """One train rollout as diagnosis may see it (dev/test rollouts never appear here)."""

    task_id: str
    group: str = ""
    family: str = ""
    repetition: int = 0
    seed: int = 0
    score: float
    passed: bool
    disposition: str
    rationale: str = ""
    trace_path: str | None = None
    failure_file: str | None = None
    error_tail: str = ""


class DiagnosisRequest(_Model):
    """Diagnose the batch's failures and edit the harness in `worktree` (one session does both)."""

    run_dir: str
    db_path: str  # the session view of the EvoDAG (`evodag.view`), never the run's own file
    readable: list[str] = Field(default_factory=list)  # the run folder's paths it may read (empty: none of it)
    worktree: str
    iteration: int
    parent_node_id: int
    phase: Literal["capability", "steering", "mixed", "none"]  # mixed: steering with capability allowed by evidence
    allowed_kinds: list[str]  # patch kinds the phase allows: capability / steering
    component_globs: dict[str, list[str]]  # capability / steering / protected
    evidence: list[TaskEvidence]  # the mini-batch on the parent: train only
    exploration: bool = False  # plateau reached: exploration variant (web search allowed where possible)
    lineage_origins: list[str] = Field(default_factory=list)  # origins already applied in the parent's lineage
    excluded: list[str] = Field(default_factory=list)  # patch ids/strategies not to try again here (no duplicates)
    excluded_plans: dict[str, str] = Field(default_factory=dict)  # excluded origin -> the plan its agent wrote
    refused: dict[str, str] = Field(default_factory=dict)  # origin -> why its change was refused (the idea stays open)
    no_effect: dict[str, str] = Field(default_factory=dict)  # origin -> the diff of its one change here: no task moved
    worse_on_lineage: dict[str, str] = Field(default_factory=dict)  # excluded origin -> the ancestor it made worse
    elsewhere: dict[str, str] = Field(default_factory=dict)  # excluded origin -> the iteration trying it, or the line
    attempt: int = 0  # > 0 when retrying (after a failed session or a failed validation)
    check_command: str = ""
    retry_reason: str = ""  # why the previous attempt failed (session failure or the validation check), if any
    trace_format: str = ""  # what the benchmark's trace files are (its `trace_format`); empty: not declared
    widens_on_no_patch: bool = False  # a no_patch here is asked again with both kinds allowed (policies.phase_widening)


class Hypothesis(_Model):
    target_tasks: list[str] = Field(default_factory=list)
    diagnosis: str
    plan: str
    patch_kind: str  # capability | steering
    subtype: str = ""  # tool | loop | infra | prompt | reminder | hook
    files: list[str] = Field(default_factory=list)
    origin: str = "patch"  # e.g. "bank:retry_transient" for offline, "llm" otherwise
    symptoms: list[str] = Field(default_factory=list)


class DiagnosisResult(_Model):
    status: Literal["patched", "no_patch", "failed"]
    hypothesis: Hypothesis | None = None
    reason: str = ""  # why no patch / why failed
    stats: SessionStats


class TaskTransition(_Model):
    """One batch task before and after a change, over all repetitions."""

    task_id: str
    before: list[bool]  # pass per repetition on the parent
    after: list[bool]  # pass per repetition on the candidate
    before_scores: list[float] = Field(default_factory=list)
    after_scores: list[float] = Field(default_factory=list)
    after_failure_files: list[str] = Field(default_factory=list)
    before_failure_files: list[str] = Field(default_factory=list)
    after_trace_paths: list[str] = Field(default_factory=list)
    before_trace_paths: list[str] = Field(default_factory=list)
    category: str = ""  # measured by the loop (majority over repetitions): fixed | regressed | still_failing | ...


_BY_PASSES: dict[tuple[bool, bool], Category] = {
    (False, True): "fixed",
    (True, False): "regressed",
    (False, False): "still_failing",
    (True, True): "still_passing",
}


def transition_category(before: Sequence[bool], after: Sequence[bool]) -> Category:
    """A task's category from its passes per repetition before and after a change: it passes by majority of its
    repetitions (ties, and no repetitions, count as failed)."""
    return _BY_PASSES[(sum(before) * 2 > len(before), sum(after) * 2 > len(after))]


class ReflectionRequest(_Model):
    """Compare parent and candidate on the same batch; dev only as aggregates."""

    run_dir: str
    db_path: str  # the session view of the EvoDAG (`evodag.view`), never the run's own file
    readable: list[str] = Field(default_factory=list)  # the run folder's paths it may read (empty: none of it)
    iteration: int
    parent_node_id: int
    candidate_node_id: int
    decision: str  # accepted | rejected | neutral | invalid
    hypothesis: Hypothesis | None
    diff: str
    files_changed: list[str]
    transitions: list[TaskTransition]
    parent_dev_mean: float | None = None
    candidate_dev_mean: float | None = None
    best_dev_mean: float | None = None
    attempt: int = 0  # > 0 when retrying this session
    retry_reason: str = ""  # why the previous attempt of this session failed, if any


class LessonOut(_Model):
    task_id: str | None = None
    category: Category
    attribution: Attribution
    text: str


class ReflectionResult(_Model):
    lessons: list[LessonOut]
    summary: str = ""
    stats: SessionStats


class EdgeInfo(_Model):
    """An edge as evolution sees it."""

    edge_id: int
    parent_id: int
    child_id: int
    kind: str
    origin: str = ""
    child_status: str = ""
    files: list[str] = Field(default_factory=list)
    fixed: list[str] = Field(default_factory=list)
    regressed: list[str] = Field(default_factory=list)
    true_fixes: list[str] = Field(default_factory=list)
    true_regressions: list[str] = Field(default_factory=list)


class NodeInfo(_Model):
    node_id: int
    parent_id: int | None
    status: str
    origin: str = ""
    dev_mean: float | None = None
    batch_after: float | None = None
    lines_changed: int = 0
    iteration: int = 0


class EvolutionRequest(_Model):
    """Choose where the next iteration starts."""

    run_dir: str
    db_path: str  # the session view of the EvoDAG (`evodag.view`), never the run's own file
    readable: list[str] = Field(default_factory=list)  # the run folder's paths it may read (empty: none of it)
    iteration: int
    current_node_id: int
    best_node_id: int
    nodes: list[NodeInfo]
    edges: list[EdgeInfo]
    lineage_edge_ids: dict[int, list[int]] = Field(default_factory=dict)  # node -> edge ids on its lineage
    failing_train_tasks: dict[int, list[str]] = Field(default_factory=dict)  # node -> train tasks it fails
    tried_actions: list[str] = Field(default_factory=list)  # "cherry_pick:12@7" etc. already done
    allowed_base_ids: list[int] = Field(default_factory=list)  # nodes `parent_node_id` may name (kept nodes)
    attempt: int = 0  # > 0 when retrying this session
    retry_reason: str = ""  # why the previous answer was refused (e.g. it named an unknown node), if any


class EvolutionResult(_Model):
    action: Literal["continue", "rebase", "cherry_pick", "revert"]
    parent_node_id: int  # the node the action starts from (rebase target / base of pick / revert)
    edge_ids: list[int] = Field(default_factory=list)  # edges to cherry-pick or revert, in order
    rationale: str
    stats: SessionStats


def result_schema(role: Role) -> dict[str, Any]:
    """JSON schema of the structured output an LLM session must produce for `role` (without stats)."""
    models: dict[str, type[BaseModel]] = {
        "diagnosis_patch": DiagnosisResult,
        "reflection": ReflectionResult,
        "evolution": EvolutionResult,
    }
    model = models[role]
    schema = model.model_json_schema()
    schema.get("properties", {}).pop("stats", None)
    if "required" in schema:
        schema["required"] = [r for r in schema["required"] if r != "stats"]
    return schema
