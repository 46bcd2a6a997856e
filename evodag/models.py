"""Plain records returned by the EvoDAG store.

Every list/dict field is stored as JSON. Times are ISO-8601 strings produced by the injected clock.
Field names are the column names of the table of the same concept (see `evodag.schema`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evodag.decisions import NODE_STATUSES

__all__ = [
    "ATTRIBUTIONS", "DISPOSITIONS", "EDGE_KINDS", "LESSON_CATEGORIES", "NODE_STATUSES", "SPLITS", "Edge", "Event",
    "Iteration", "Lesson", "Node", "RolloutRow", "Run", "SessionRow",
]  # fmt: skip

EDGE_KINDS = ("patch", "rebase", "cherry_pick", "revert", "merge")
DISPOSITIONS = ("success", "task_failure", "infra_error", "timeout")
ATTRIBUTIONS = ("true_fix", "true_regression", "stochastic", "uncertain")
LESSON_CATEGORIES = ("fixed", "regressed", "still_failing", "still_passing", "general")
SPLITS = ("train", "dev", "test")


@dataclass
class Run:
    id: int
    config: dict[str, Any]
    seed: int
    started_at: str
    finished_at: str | None = None
    termination_reason: str | None = None
    best_node_id: int | None = None
    baseline_node_id: int | None = None
    status: str = "running"  # running | paused | finished | failed
    inputs: dict[str, Any] | None = None  # results-affecting inputs: dotted key -> value (see saddler.run.inputs)


@dataclass
class Node:
    """One candidate harness = one git commit."""

    id: int
    run_id: int
    commit: str
    parent_id: int | None
    iteration: int
    phase: str  # capability | steering | none | baseline
    patch_kind: str  # baseline | capability | steering | mixed | rebase | cherry_pick | revert | merge
    origin: str  # baseline | patch | rebase | cherry_pick | revert | merge | bank:<id> ...
    status: str  # one of NODE_STATUSES
    status_reason: str = ""
    batch_before: float | None = None
    batch_after: float | None = None
    dev_mean: float | None = None
    dev_std: float | None = None
    test_mean: float | None = None
    test_std: float | None = None
    hypothesis: dict[str, Any] | None = None
    lines_changed: int = 0  # total lines added+removed against the baseline (ranking tie-break)
    created_at: str = ""
    dev_tasks: int | None = None  # dev tasks `dev_mean` covers when a dev race stopped early (None: every one)


@dataclass
class Edge:
    id: int
    run_id: int
    parent_id: int
    child_id: int
    kind: str  # one of EDGE_KINDS
    diff_sha: str  # content-addressed in the blobs table
    files_changed: list[str] = field(default_factory=list)
    lines_added: int = 0
    lines_removed: int = 0
    fixed: list[str] = field(default_factory=list)
    regressed: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    still_passing: list[str] = field(default_factory=list)
    source_edge_id: int | None = None  # for cherry_pick / revert: the edge whose diff was reused
    created_at: str = ""


@dataclass
class RolloutRow:
    id: int
    run_id: int
    node_id: int
    task_id: str
    split: str
    seed: int
    repetition: int
    score: float
    passed: bool
    disposition: str  # one of DISPOSITIONS
    cost: float = 0.0
    llm_calls: int = 0
    duration_s: float = 0.0
    trace_path: str | None = None
    error_tail: str = ""
    rationale: str = ""  # grader rationale on failure (train-visible evidence)
    failure_file: str | None = None  # harness file where the trace's failure point lies, if known
    task_group: str = ""
    cache_key: str = ""
    created_at: str = ""


@dataclass
class Lesson:
    id: int
    run_id: int
    node_id: int | None
    edge_id: int | None
    iteration: int | None
    task_id: str | None
    category: str  # one of LESSON_CATEGORIES
    attribution: str  # one of ATTRIBUTIONS
    text: str
    created_at: str = ""


@dataclass
class SessionRow:
    id: int
    run_id: int
    iteration: int | None
    node_id: int | None
    role: str  # diagnosis_patch | reflection | evolution
    backend: str
    model: str = ""
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    transcript_path: str | None = None
    outcome: str = ""  # ok | no_patch | failed:<reason> ...
    error: str = ""
    created_at: str = ""
    attempt: int | None = None  # the session key is (run, iteration, role, attempt); None for unkeyed rows
    result: dict[str, Any] | None = None  # the validated answer (without stats), replayed on resume
    change_sha: str | None = None  # diagnosis: the worktree change it made, a binary-safe diff in `blobs`
    cli_attempts: int | None = None  # runs of its CLI / SDK query (1 + retries); None before schema V6


@dataclass
class Iteration:
    id: int
    run_id: int
    number: int
    epoch: int
    batch: list[str]
    parent_id: int | None = None
    candidate_id: int | None = None
    phase: str = ""
    # step: started | evolved | parent_evaluated | patched | validated | candidate_evaluated | dev | reflected | done
    step: str = "started"
    decision: str | None = None  # accepted | rejected | invalid | no_patch | neutral
    stall_count: int = 0
    exploration: bool = False
    started_at: str = ""
    finished_at: str | None = None
    evidence: dict[str, Any] | None = None  # the acceptance decision's evidence, rollouts and confidence
    last_rollout: int | None = None  # the newest rollout id when the iteration finished (what a fork copies)
    finish_order: int | None = None  # 1 for the first iteration to finish, 2 for the next (several run at once)
    started_after: int | None = None  # how many iterations had finished when it started


@dataclass
class Event:
    id: int
    run_id: int | None
    ts: str
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
