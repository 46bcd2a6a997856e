"""fleet.json in the 002 seed's schema (defaults from its table), and the fleet root's files.

    FLEET/fleet.json  program.md  logs/session-iter-N.jsonl  .orch-state.json  .paused  evodag.sqlite
    FLEET/.fleet-init.json   what `fleet init` found (see `Resolved`); the user's fleet.json is never rewritten
    WORKDIR/results.tsv  (git-excluded and never reset, whatever its name; WORKDIR = problem.workdir)

Every key is checked: an unknown or misspelt one is an error with its dotted path (and the key meant);
`problem.metric_regex` must compile and have exactly one capture group (the metric). A relative
`problem.workdir` is relative to the folder of the fleet.json init read.

Additions beyond the seed (all optional): `config.command` (an agent command template with `{prompt}`,
`{prompt_file}`, `{model}`, `{fallback_model}`, `{budget}`, `{max_turns}`: `presets.FLEET_PLACEHOLDERS`; overrides
the provider preset),
`config.timeout_s` (per agent session), `problem.eval_timeout_s`, `problem.protected` (paths and globs in the
workdir the agent must not change; default: the eval command's files), `seed`.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from saddler.config import format_validation_error
from saddler.errors import ConfigError, RunStateError

RESOLVED = ".fleet-init.json"


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


def check_metric_regex(value: str) -> str:
    """The seed's rule: a regular expression with exactly one capture group, the metric ('' = none)."""
    if not value:
        return value
    try:
        groups = re.compile(value, re.MULTILINE).groups
    except re.error as exc:
        raise ValueError(f"invalid regular expression ({exc})") from exc
    if groups != 1:
        raise ValueError(f"needs exactly one capture group (the metric), found {groups}")
    return value


class Problem(_Part):
    workdir: str = ""
    eval_command: str = ""
    metric_regex: str = ""
    metric_direction: Literal["minimize", "maximize"] = "minimize"
    results_file: str = "results.tsv"
    program_md: str = "program.md"
    eval_timeout_s: float = Field(600.0, gt=0)
    protected: list[str] | None = None

    @field_validator("metric_regex")
    @classmethod
    def _metric_regex(cls, value: str) -> str:
        return check_metric_regex(value)

    @field_validator("results_file")
    @classmethod
    def _results_inside(cls, value: str) -> str:
        path = Path(value)
        if not value or path.is_absolute() or ".." in path.parts:
            raise ValueError("must be a file name or a relative path inside the workdir")
        return value


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


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = FleetSpec
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if model else None
        annotation = field.annotation if field else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return model


def _error_lines(exc: ValidationError) -> list[str]:
    """`dotted.path: message` per error; an unknown key names the key probably meant."""
    lines = []
    for err, line in zip(exc.errors(), format_validation_error(exc), strict=True):
        if err["type"] != "extra_forbidden":
            lines.append(line.replace("Value error, ", ""))
            continue
        path = ".".join(str(p) for p in err["loc"])
        model = _model_at(err["loc"])
        close = difflib.get_close_matches(str(err["loc"][-1]), list(model.model_fields) if model else [], 1, 0.6)
        lines.append(f"{path}: unknown key" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return lines


def parse_fleet(data: Any, source: str) -> FleetSpec:
    """Validate fleet.json content; every error is listed by dotted path in one `ConfigError`."""
    try:
        return FleetSpec.model_validate(data)
    except ValidationError as exc:
        lines = _error_lines(exc)
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
    if isinstance(raw, dict) and isinstance(raw.get("problem"), dict):  # written by saddler before 0.2, not a typo
        raw["problem"].pop("eval_command_source", None)
    return parse_fleet(raw, str(path)), raw


def effective_spec(spec: FleetSpec, found: dict[str, Any]) -> FleetSpec:
    """`spec` with what init found filled in where fleet.json leaves it empty (fleet.json always wins)."""
    update = {k: found[k] for k in ("eval_command", "metric_regex") if found.get(k) and not getattr(spec.problem, k)}
    return spec.model_copy(update={"problem": spec.problem.model_copy(update=update)}) if update else spec


class FleetPaths:
    """Where a fleet's files live; `workdir` is resolved against `base` (the folder of the fleet.json init read,
    default the fleet root). `found` is what init recorded in FLEET/.fleet-init.json."""

    def __init__(
        self, root: Path, spec: FleetSpec, *, base: Path | None = None, found: dict[str, Any] | None = None
    ) -> None:
        self.root = Path(root).resolve()
        self.found = found or {}
        self.spec = effective_spec(spec, self.found)
        base = Path(base).resolve() if base is not None else self.root
        workdir = Path(spec.problem.workdir).expanduser() if spec.problem.workdir else self.root
        self.workdir = (workdir if workdir.is_absolute() else base / workdir).resolve()

    @classmethod
    def open(cls, root: Path) -> FleetPaths:
        """An initialised fleet root (RunStateError saying to run `fleet init` otherwise)."""
        root = Path(root).resolve()
        resolved = root / RESOLVED
        if not resolved.is_file() or not (root / "fleet.json").is_file() or not (root / "evodag.sqlite").is_file():
            why = "has no fleet.json" if not (root / "fleet.json").is_file() else "is not initialised"
            raise RunStateError(
                f"{root} {why}: run `saddler fleet init {root} --from-fleet fleet.json` first (it prepares the "
                "workdir's git repository, results.tsv, logs/ and the EvoDAG)"
            )
        spec, _ = read_fleet_json(root / "fleet.json")
        found = json.loads(resolved.read_text(encoding="utf-8"))
        return cls(root, spec, base=Path(found.get("base") or root), found=found)

    @property
    def protected(self) -> list[str]:
        """Workdir paths / globs the agent must not change: fleet.json's, else the eval command's files."""
        if self.spec.problem.protected is not None:
            return list(self.spec.problem.protected)
        return list(self.found.get("protected") or [])

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
