"""fleet.json in the 002 seed's schema (defaults from its table), and the fleet root's files.

    FLEET/fleet.json  program.md  logs/session-iter-N.jsonl  .orch-state.json  .paused  evodag.sqlite
    WORKDIR/results.tsv  (git-untracked; WORKDIR = problem.workdir, default the fleet root)

Additions beyond the seed (all optional): `config.command` (an agent command template with `{prompt}`,
`{prompt_file}`, `{model}`, `{fallback_model}`, `{budget}`, `{max_turns}`; overrides the provider preset),
`config.timeout_s` (per agent session), `problem.eval_timeout_s`, `seed`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from saddler.config import format_validation_error
from saddler.errors import ConfigError


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AgentConfig(_Part):
    model: str = "sonnet"
    fallback_model: str = "haiku"
    provider: Literal["claude", "codex", "pi"] = "claude"
    budget_per_iter: float = Field(1.00, ge=0)
    max_turns: int = Field(0, ge=0, description="0 = unlimited")
    command: str = ""
    timeout_s: float = Field(1800.0, gt=0)

    @model_validator(mode="after")
    def _fallback_differs(self) -> AgentConfig:
        if self.fallback_model and self.fallback_model == self.model:
            raise ValueError("fallback_model must differ from model")
        return self


class Problem(_Part):
    workdir: str = ""
    eval_command: str = ""
    metric_regex: str = ""
    metric_direction: Literal["minimize", "maximize"] = "minimize"
    results_file: str = "results.tsv"
    program_md: str = "program.md"
    eval_timeout_s: float = Field(600.0, gt=0)


class StopWhen(_Part):
    max_iterations: int = Field(50, ge=0)
    cost_cap_usd: float = Field(0.0, ge=0, description="0 = no cap")


class Search(_Part):
    enabled: bool = True
    plateau_threshold: int = Field(3, ge=1)


class FleetSpec(_Part):
    fleet_name: str = "fleet"
    type: str = "autoresearch"
    config: AgentConfig = Field(default_factory=lambda: AgentConfig())
    problem: Problem = Field(default_factory=lambda: Problem())
    stop_when: StopWhen = Field(default_factory=lambda: StopWhen())
    search: Search = Field(default_factory=lambda: Search())
    seed: int = 0


def parse_fleet(data: Any, source: str) -> FleetSpec:
    """Validate fleet.json content; every error is listed by dotted path in one `ConfigError`."""
    try:
        return FleetSpec.model_validate(data)
    except ValidationError as exc:
        lines = format_validation_error(exc)
        raise ConfigError(f"{source}: {len(lines)} error(s)\n" + "\n".join(f"  {line}" for line in lines)) from exc


def read_fleet_json(path: Path) -> tuple[FleetSpec, dict[str, Any]]:
    """(validated spec, raw dict) of a fleet.json file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file; write fleet.json in the schema of the fleet seed")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from exc
    return parse_fleet(raw, str(path)), raw


class FleetPaths:
    """Where a fleet's files live; `workdir` is resolved against the fleet root."""

    def __init__(self, root: Path, spec: FleetSpec) -> None:
        self.root = Path(root).resolve()
        self.spec = spec
        workdir = Path(spec.problem.workdir).expanduser() if spec.problem.workdir else self.root
        self.workdir = (workdir if workdir.is_absolute() else self.root / workdir).resolve()

    @classmethod
    def open(cls, root: Path) -> FleetPaths:
        spec, _ = read_fleet_json(Path(root) / "fleet.json")
        return cls(root, spec)

    @property
    def fleet_json(self) -> Path:
        return self.root / "fleet.json"

    @property
    def results(self) -> Path:
        return self.workdir / self.spec.problem.results_file

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def session_log(self, iteration: int) -> Path:
        return self.logs / f"session-iter-{iteration}.jsonl"

    @property
    def state(self) -> Path:
        return self.root / ".orch-state.json"

    @property
    def paused(self) -> Path:
        return self.root / ".paused"

    @property
    def pid(self) -> Path:
        return self.root / ".orch.pid"

    @property
    def agent_pid(self) -> Path:
        return self.root / ".agent.pid"

    @property
    def db(self) -> Path:
        return self.root / "evodag.sqlite"

    def program_md(self) -> Path | None:
        """program.md: the workdir first, then the fleet root (the seed's order)."""
        for base in (self.workdir, self.root):
            if (base / self.spec.problem.program_md).is_file():
                return base / self.spec.problem.program_md
        return None

    def read_state(self) -> dict[str, Any]:
        return json.loads(self.state.read_text(encoding="utf-8")) if self.state.is_file() else {}

    def write_state(self, **fields: Any) -> dict[str, Any]:
        state = {**self.read_state(), **fields}
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.state)
        return state
