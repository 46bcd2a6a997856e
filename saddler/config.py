"""Run and harness configuration: `saddler.toml`, validated by pydantic with `extra="forbid"`.

A run folder's `saddler.toml` holds `[run]`; a harness repository's `saddler.toml` holds `[harness]`.
`load_run_config` / `load_harness_config` raise `ConfigError` listing every error by dotted path.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from saddler.errors import ConfigError


class _Strict(BaseModel):
    """Strict types (no "2" for 2, no true for 1), finite numbers, no unknown keys."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)


class LoopConfig(_Strict):
    """Budgets and loop sizes."""

    batch_size: int = Field(6, ge=1, le=10_000, description="at most the benchmark's train size (checked at run)")
    repetitions: int = Field(1, ge=1, le=10)
    noise_rule: Literal["fixed", "two_then_majority"] = "fixed"
    max_iterations: int = Field(30, ge=0, le=1_000_000)
    max_rollouts: int = Field(0, ge=0, description="0 = unlimited")
    cost_cap_usd: float = Field(0.0, ge=0, description="0 = unlimited")
    target_dev_score: float = Field(1.01, ge=0, description="> 1 disables")
    stall_limit: int = Field(0, ge=0, description="consecutive non-accepted iterations; 0 = off")
    plateau_threshold: int = Field(3, ge=0, description="discards in a row before exploration; 0 = off")
    test_runs: int = Field(3, ge=1, le=100)
    dev_runs: int = Field(1, ge=1, le=100)
    parallel_iterations: int = Field(
        3,
        ge=1,
        le=64,
        description="iterations in flight at once, each with its own worktree and sessions; their rollouts share "
        "the executor's workers (see saddler.run.flights)",
    )


REMOVED_VALUES: dict[tuple[str, str], str] = {
    ("ranking", "best_batch"): "batch scores of different mini-batches are not comparable, so no node can be ranked "
    "by them; use 'best_dev' (the default) or 'latest_kept'",
}


class CurriculumConfig(_Strict):
    """`[run.policies.curriculum]`: the curriculum sampler (see `saddler.policies.curriculum`)."""

    temperature: float = Field(0.15, gt=0, description="softmax temperature over arm values in [0, 1]")
    unseen_share: float = Field(
        0.34, ge=0, le=1, description="share of each batch drawn from unseen (then least recently shown) tasks"
    )


class PolicyConfig(_Strict):
    """Policies chosen by name (see `saddler.policies`)."""

    sampler: Literal["epoch", "full", "curriculum"] = Field(
        "curriculum",
        description="curriculum = batches drawn from what the latest kept node fails (no iteration on a "
        "batch it passes); epoch = epoch-wise without replacement (the paper's); full = the whole train split",
    )
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    acceptance: Literal["sequential", "strict_mean", "pass_count"] = Field(
        "sequential",
        description="sequential = a close call gathers evidence until P(better) is clear (see "
        "saddler.policies.acceptance); strict_mean = AutoSaddler's rule (the mean task score must rise); "
        "pass_count = the tasks passed must rise",
    )
    acceptance_confidence: float = Field(
        0.8, gt=0.5, lt=1.0, description="sequential: accept at P(better) >= this, reject at <= 1 - this"
    )
    evidence_max_rollouts: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="sequential: rollouts a close call may spend; 0 = 4 x batch_size x repetitions",
    )
    reject_task_regression: bool = False
    min_margin: float = Field(0.0, ge=0)
    accept_neutral: bool = Field(False, description="keep an equal-score, regression-free candidate (000 seed NEUTRAL)")
    score: Literal["auto", "pass_rate", "mean_score"] = Field(
        "auto",
        description="per-task score of batch acceptance, dev, ranking and test: pass_rate (share of repetitions "
        "passed: Pass@1) | mean_score (mean graded score: partial credit counts) | auto (the benchmark's score_kind)",
    )
    dev_eval: Literal["on_accept", "always", "never"] = "on_accept"
    dev_guard: bool = Field(
        True,
        description="a candidate accepted on train but clearly worse than its parent on dev (P(better) <= 1 - "
        "acceptance_confidence, paired over the dev tasks) is not kept",
    )
    dev_guard_unsure: float = Field(
        0.0,
        ge=0,
        le=1,
        description="with dev_guard: a candidate accepted on train without reaching acceptance_confidence (the "
        "evidence ran out) is not kept when its dev P(better) is below this; 0 = off",
    )
    dev_guard_evidence: bool = Field(
        True,
        description="with dev_guard: before a veto, both nodes run one more repetition of dev and the guard decides "
        "on both passes, unless the first pass is already clear (P(better) <= (1 - acceptance_confidence)^2)",
    )
    dev_race: bool = Field(
        True,
        description="a candidate's dev evaluation stops once the rest of dev cannot change what it decides: it can "
        "no longer become the best, or the dev guard has decided on it (see saddler.run.dev_race)",
    )
    exclude_worse_on_lineage: bool = Field(
        True,
        description="an idea whose change made an ancestor of the parent clearly worse (rejected at P(better) <= "
        "1 - acceptance_confidence) is excluded on the ancestor's descendants too, as on the parent it was tried on",
    )
    keep_stepping_stones: bool = Field(
        True,
        description="a candidate that ties its parent on every train task compared, and on whose targeted tasks the "
        "parent's failure now fails elsewhere, is kept as neutral (see saddler.run.stepping_stone)",
    )
    unseen_tie_on_dev: bool = Field(
        True,
        description="a candidate that ties its parent on every train task compared, where no task it targets failed "
        "in any compared rollout (train could not show it), goes to dev and is kept when it is better there "
        "(P(better) >= acceptance_confidence, paired over the dev tasks; see saddler.run.unseen_tie)",
    )
    ranking: Literal["best_dev", "latest_kept"] = Field("best_dev", description="which node is the answer")
    phases: Literal["capability_then_steering", "none"] = "capability_then_steering"
    capability_epochs: float = Field(1.0, ge=0, le=1000)
    phase_transition: Literal["epochs", "full_coverage"] = Field(
        "epochs", description="epochs = after capability_epochs of train; full_coverage = once every task was shown"
    )
    steering_allows_capability: bool = False
    phase_moves: Literal["evidence", "fixed"] = Field(
        "evidence",
        description="evidence = leave Capability early when its search stalls, and per iteration follow the files the "
        "batch's failures point at (see saddler.policies.phases); fixed = the paper's schedule only",
    )
    phase_patience: int = Field(
        3, ge=0, le=1000, description="evidence moves: discards in a row that end the Capability phase; 0 = never early"
    )
    phase_widening: Literal["never", "on_no_patch"] = Field(
        "never",
        description="on_no_patch = an iteration whose phase an evidence move narrowed (to capability or steering) and "
        "whose diagnosis finds no patch there is asked again with both kinds allowed (mixed), as a phase.moved event",
    )
    evolution: Literal["dag", "continue"] = Field("dag", description="continue = always build on the latest kept node")
    max_patch_attempts: int = Field(
        3, ge=1, le=100, description="diagnosis retries after a failed validation, plus one"
    )
    evolution_bases: Literal["kept", "any"] = Field(
        "kept", description="nodes evolution may start from: kept ones (baseline, accepted, neutral) or any valid one"
    )
    audit: Literal["refuse", "warn", "off"] = Field(
        "refuse",
        description="the cheat audit of every candidate (see saddler.policies.audit): refuse = a hit is an invalid "
        "candidate; warn = judged as usual, its reason marked suspect; off = no audit",
    )

    @field_validator("ranking", mode="before")
    @classmethod
    def _removed_values(cls, value: Any, info: ValidationInfo) -> Any:
        why = REMOVED_VALUES.get((str(info.field_name), value)) if isinstance(value, str) else None
        if why:
            raise ValueError(f"{value!r} was removed: {why}")
        return value


class ExecutorConfig(_Strict):
    kind: Literal["local", "ray"] = "local"
    workers: int = Field(2, ge=1, le=1024)
    timeout_s: float = Field(60.0, gt=0, le=7 * 86400)
    memory_mb: int = Field(2048, ge=64, le=16 * 1024 * 1024)
    sandbox: Literal["auto", "bwrap", "landlock", "none"] = Field(
        "auto", description="auto = the strongest available: bwrap, else landlock, else none (see saddler.executor)"
    )
    network: bool = Field(False, description="let rollouts use the network (an API-calling task agent needs it)")
    env_allow: list[str] = Field(default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH"])
    ray_address: str = "auto"
    cache: str = Field("", description="path of a rollout cache shared across runs; empty = the run's own DB")


Effort = Literal["minimal", "low", "medium", "high", "xhigh", "max"]
ROLE_DEFAULTS: dict[str, dict[str, Any]] = {
    # diagnosis reads traces and code, edits and checks: it may need hours on a large harness
    "diagnosis_patch": {"max_turns": 100, "max_budget_usd": 5.0, "timeout_s": 7200.0},
    "reflection": {"max_turns": 40, "max_budget_usd": 2.0, "timeout_s": 1800.0},
    "evolution": {"max_turns": 20, "max_budget_usd": 1.0, "timeout_s": 900.0},
}
_ROLE_FIELDS = ("model", "max_turns", "max_budget_usd", "timeout_s", "effort")


class RoleSettings(_Strict):
    """Per-role overrides of the session limits (`[run.sessions.roles.<role>]`); unset fields fall through."""

    model: str | None = None
    max_turns: int | None = Field(None, ge=1, le=100_000)
    max_budget_usd: float | None = Field(None, ge=0, description="0 = no budget cap")
    timeout_s: float | None = Field(None, gt=0, le=7 * 86400)
    effort: Effort | None = None


class SessionRoles(_Strict):
    diagnosis_patch: RoleSettings = Field(default_factory=RoleSettings)
    reflection: RoleSettings = Field(default_factory=RoleSettings)
    evolution: RoleSettings = Field(default_factory=RoleSettings)


class SessionConfig(_Strict):
    """Optimizer-session settings; `backend` picks who runs the three sessions.

    `model`, `max_turns`, `max_budget_usd`, `timeout_s` and `effort` apply to every role when set here;
    `roles.<role>` overrides one role; a limit set nowhere takes the role's default (`ROLE_DEFAULTS`).
    `for_role(role)` gives the effective settings of one role.
    """

    backend: str = "offline"
    model: str = "claude-opus-4-6"
    fallback_model: str | None = None
    max_turns: int = Field(40, ge=1, le=100_000)
    max_budget_usd: float = Field(2.0, ge=0, description="0 = no budget cap")
    retries: int = Field(2, ge=0, le=100)
    timeout_s: float = Field(1800.0, gt=0, le=7 * 86400)
    effort: Effort | None = Field(None, description="reasoning effort where the backend has one; unset = its default")
    roles: SessionRoles = Field(default_factory=SessionRoles)
    command: str = Field(
        "", description="command backend: a preset name (claude, codex, pi) or a template", validate_default=True
    )
    sandbox: Literal["auto", "bwrap", "none"] = Field(
        "auto", description="command backend: auto = bubblewrap around pi and codex (it hides held-out files)"
    )
    proposer: Literal["neutral", "calibrated"] = Field(
        "neutral",
        description="offline backend: neutral = writes the best-matching bank patch as meant; calibrated = behaves as "
        "the AutoSaddler paper measured LLM authors (see saddler.sessions.proposer)",
    )
    prompts: dict[str, str] = Field(default_factory=dict, description="role -> path of a prompt template")
    check_command: str = ""
    allow_web_search_on_plateau: bool = True
    on_usage_limit: Literal["wait", "fallback_model", "stop"] = Field(
        "wait", description="a plan's usage window used up: wait for its reset, move to fallback_model, or stop"
    )
    max_usage_wait_h: float = Field(24.0, ge=0, le=24 * 7, description="the longest wait for a usage window")
    usage_retry_s: float = Field(
        3600.0, gt=0, le=86400, description="the wait when a usage-limit message names no reset time"
    )

    @field_validator("command")
    @classmethod
    def _command_given(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("backend") == "command" and not value.strip():
            raise ValueError('backend = "command" needs a command: a preset (claude, codex, pi) or a template')
        return value

    def for_role(self, role: str) -> SessionConfig:
        """These settings with `role`'s limits resolved: `roles.<role>`, else this table's value when set
        explicitly, else the role's default, else this table's default."""
        override = getattr(self.roles, role)
        update: dict[str, Any] = {}
        for name in _ROLE_FIELDS:
            value = getattr(override, name)
            if value is None and name not in self.model_fields_set:
                value = ROLE_DEFAULTS.get(role, {}).get(name)
            if value is not None:
                update[name] = value
        return self.model_copy(update=update)


class MinimizeConfig(_Strict):
    """The measured minimization at the end of a run (`saddler.run.minimize`)."""

    enabled: bool = Field(True, description="minimize the best harness on dev at the end of the run")
    max_rollouts: int = Field(0, ge=0, description="0 = one leave-one-out pass over the changes; within loop budgets")
    rule: Literal["not_lower", "not_clearly_worse"] = Field(
        "not_lower", description="a change is removed when dev without it is not lower, or not clearly worse"
    )
    train_check: Literal["all", "fixed", "off"] = Field(
        "all",
        description="a cut dev allows must not be lower on every train task (all), on those its edge fixed (fixed); "
        "not clearly worse, when dev found it clearly better",
    )


class RunConfig(_Strict):
    """`[run]` of a run folder's saddler.toml."""

    name: str = "run"
    seed: int = 0
    benchmark: str = "opsdesk"
    benchmark_options: dict[str, Any] = Field(default_factory=dict)
    harness: str = Field("harness", description="the run's own harness clone, relative to the run folder")
    loop: LoopConfig = Field(default_factory=LoopConfig)
    policies: PolicyConfig = Field(default_factory=PolicyConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    sessions: SessionConfig = Field(default_factory=SessionConfig)
    minimize: MinimizeConfig = Field(default_factory=MinimizeConfig)


class ComponentMap(_Strict):
    """Glob lists (relative to the harness root, `**` allowed) classifying every path."""

    capability: list[str] = Field(default_factory=list)
    steering: list[str] = Field(default_factory=list)
    protected: list[str] = Field(default_factory=lambda: ["saddler.toml"])

    @model_validator(mode="after")
    def _saddler_toml_protected(self) -> ComponentMap:
        if "saddler.toml" not in self.protected:
            self.protected = [*self.protected, "saddler.toml"]
        return self


class StructureRules(_Strict):
    """Checks every candidate must pass before it is evaluated."""

    python_compiles: bool = True
    skill_files: list[str] = Field(default_factory=list, description="SKILL.md-like files: frontmatter, H2, ${VAR}")
    required_files: list[str] = Field(default_factory=list)


class HarnessConfig(_Strict):
    """`[harness]` of a harness repository's saddler.toml."""

    name: str = "harness"
    description: str = ""
    check_command: str = ""
    components: ComponentMap = Field(default_factory=ComponentMap)
    structure: StructureRules = Field(default_factory=StructureRules)


class SaddlerFile(_Strict):
    run: RunConfig | None = None
    harness: HarnessConfig | None = None


def format_validation_error(err: ValidationError, prefix: str = "") -> list[str]:
    """One `dotted.path: message` line per error."""
    lines = []
    for e in err.errors():
        path = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        message = e["msg"].removeprefix("Value error, ")
        lines.append(f"{path or '<root>'}: {message}")
    return lines


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; a missing file or a syntax error is a `ConfigError`."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (run `saddler init` first, or pass the right folder)")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


def parse_saddler_file(data: dict[str, Any], source: str = "saddler.toml") -> SaddlerFile:
    try:
        return SaddlerFile.model_validate(data)
    except ValidationError as exc:
        lines = format_validation_error(exc)
        raise ConfigError(f"{source}: {len(lines)} error(s)\n" + "\n".join(f"  {line}" for line in lines)) from exc


def load_run_config(run_dir: Path) -> RunConfig:
    """Read and validate `[run]` from `run_dir/saddler.toml`."""
    path = Path(run_dir) / "saddler.toml"
    parsed = parse_saddler_file(read_toml(path), str(path))
    if parsed.run is None:
        raise ConfigError(f"{path}: missing [run] table")
    return parsed.run


def load_harness_config(harness_dir: Path) -> HarnessConfig:
    """Read and validate `[harness]` from the harness's saddler.toml (defaults when absent)."""
    path = Path(harness_dir) / "saddler.toml"
    if not path.is_file():
        return HarnessConfig()
    parsed = parse_saddler_file(read_toml(path), str(path))
    return parsed.harness or HarnessConfig()
