"""Session prompt templates: markdown files shipped in `saddler/sessions/prompts/`, overridable per run.

Templates use `{name}` placeholders (`{{` / `}}` for literal braces). `render(role, request, overrides)`
fills them from a session request; an override template (`SessionConfig.prompts`: template name -> path)
may use any subset of the same placeholders. Template names: `diagnosis_patch`,
`diagnosis_patch_explore` (used when `request.exploration`), `reflection`, `evolution`, `system`.

The values shared by every role and the reflection's are made here; a diagnosis's in
`saddler.sessions.diagnosis_prompt`, an evolution's (the bounded listing of the DAG) in
`saddler.sessions.evolution_prompt`. Every session is told to read the bounded history (`evo-dag history --recent`).
"""

from __future__ import annotations

import json
import shlex
from importlib import resources
from pathlib import Path
from typing import Any

from evodag.history import RECENT_ITERATIONS
from saddler.agentcli import fill
from saddler.errors import ConfigError
from saddler.sessions.diagnosis_prompt import diagnosis_values
from saddler.sessions.evolution_prompt import evolution_values
from saddler.sessions.schema import (
    DiagnosisRequest,
    EvolutionRequest,
    ReflectionRequest,
    Role,
    TaskTransition,
    result_schema,
    transition_category,
)

TEMPLATES = ("system", "diagnosis_patch", "diagnosis_patch_explore", "reflection", "evolution")
_MAX_DIFF_CHARS = 30_000


def template_name(role: Role, request: Any) -> str:
    """The template a request uses: the exploration variant of diagnosis after a plateau."""
    if role == "diagnosis_patch" and getattr(request, "exploration", False):
        return "diagnosis_patch_explore"
    return role


def load_template(name: str, overrides: dict[str, str] | None = None, base_dir: Path | None = None) -> str:
    """The text of template `name`: the override's file when configured, else the bundled one.

    A relative override path is resolved against `base_dir` (the run folder). A missing override file
    or an unknown template name is a `ConfigError`.
    """
    if name not in TEMPLATES:
        raise ConfigError(f"unknown prompt template {name!r}; known: {', '.join(TEMPLATES)}")
    if overrides and name in overrides:
        path = Path(overrides[name]).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise ConfigError(f"sessions.prompts.{name}: no such file {path} (fix the path or remove the entry)")
        return path.read_text(encoding="utf-8")
    return resources.files("saddler.sessions").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def output_instructions(result_file: str | None) -> str:
    """How the session must hand back its structured answer."""
    if result_file is None:
        return (
            "End the session with your answer: one JSON object matching the schema below, as your final message "
            "(or structured output), with nothing before or after it."
        )
    return (
        f"Write your answer as one JSON object matching the schema below to the file `{result_file}` "
        "(create it with your file-writing tool; it is read after you exit, and the session counts as failed "
        "without it). Write that file last, once your work is done."
    )


def default_tool_limits(role: Role) -> str:
    """What a session may touch when its backend states nothing more precise."""
    if role == "diagnosis_patch":
        return "Edit files inside the worktree only; never a protected path, a file outside it, or git metadata."
    return "This session reads only: do not create, edit or delete any file."


def render(
    role: Role,
    request: DiagnosisRequest | ReflectionRequest | EvolutionRequest,
    overrides: dict[str, str] | None = None,
    *,
    result_file: str | None = None,
    web_search: bool = False,
    base_dir: Path | None = None,
    tool_limits: str | None = None,
) -> str:
    """The user prompt of one session, rendered from its template and request.

    `result_file` set: the agent is told to write its JSON answer there (command backend); unset: it is
    told to end with its JSON answer (structured output or final message). `web_search` says whether the
    exploration variant may point the agent at web search tools. `tool_limits`: what the backend lets the
    agent touch, stated up front (`{tool_limits}`).
    """
    name = template_name(role, request)
    values = _common_values(role, request, result_file)
    values["tool_limits"] = tool_limits or default_tool_limits(role)
    if isinstance(request, DiagnosisRequest):
        values.update(diagnosis_values(request, web_search))
    elif isinstance(request, ReflectionRequest):
        values.update(_reflection_values(request))
    else:
        values.update(evolution_values(request))
    return fill(load_template(name, overrides, base_dir), values, source=f"prompt template {name!r}")


def render_system(role: Role, overrides: dict[str, str] | None = None, base_dir: Path | None = None) -> str:
    """The system prompt shared by all sessions, naming the role."""
    return fill(load_template("system", overrides, base_dir), {"role": role}, source="prompt template 'system'")


def _common_values(role: Role, request: Any, result_file: str | None) -> dict[str, str]:
    return {
        "role": role,
        "iteration": str(request.iteration),
        "db_path": request.db_path,
        "run_dir": request.run_dir,
        "evo_dag": "evo-dag",
        "output_instructions": output_instructions(result_file),
        "output_schema": json.dumps(result_schema(role), indent=2, sort_keys=True),
        "result_file": result_file or "",
        "retry_note": retry_note(getattr(request, "retry_reason", "")),
        "history_command": history_command(request),
    }


def history_command(request: Any) -> str:
    """The bounded history a session is told to read (`evo-dag history --recent`): the same size at any length of
    the run; a diagnosis also gets the registries of the tasks failing in its evidence."""
    failing = [e.task_id for e in getattr(request, "evidence", []) if not e.passed]
    tasks = "".join(f" --task {shlex.quote(t)}" for t in dict.fromkeys(failing))
    return f"evo-dag history --recent {RECENT_ITERATIONS}{tasks}"


def retry_note(reason: str) -> str:
    """The retry paragraph: what went wrong with the previous attempt of this session (empty on a first try)."""
    if not reason:
        return ""
    return f"\n**Your previous attempt of this session failed:** {reason}\nDo not repeat that mistake.\n"


def measured_category(t: TaskTransition) -> str:
    """The category the loop measured and recorded on the edge (`TaskTransition.category`); for a request built
    without one, the same rule: a task passes by majority of its repetitions (ties fail)."""
    return t.category or transition_category(t.before, t.after)


def _transition_rows(req: ReflectionRequest) -> list[str]:
    rows = []
    for t in req.transitions:
        before = "".join("P" if p else "F" for p in t.before) or "-"
        after = "".join("P" if p else "F" for p in t.after) or "-"
        unstable = [label for label, runs in (("before", t.before), ("after", t.after)) if len(set(runs)) > 1]
        note = f"; repetitions disagree {' and '.join(unstable)}" if unstable else ""
        rows.append(f"- `{t.task_id}`: {before} -> {after} ({measured_category(t)}{note})")
        for label, paths in (("before traces", t.before_trace_paths), ("after traces", t.after_trace_paths)):
            if paths:
                rows.append(f"  - {label}: {', '.join(f'`{p}`' for p in paths)}")
    return rows


def _reflection_values(req: ReflectionRequest) -> dict[str, str]:
    hyp = req.hypothesis.model_dump_json(indent=2) if req.hypothesis else "(none recorded)"
    diff = req.diff if len(req.diff) <= _MAX_DIFF_CHARS else req.diff[:_MAX_DIFF_CHARS] + "\n[... diff truncated]"
    dev = ", ".join(
        f"{label} {value:.3f}"
        for label, value in (
            ("parent", req.parent_dev_mean),
            ("candidate", req.candidate_dev_mean),
            ("best so far", req.best_dev_mean),
        )
        if value is not None
    )
    return {
        "parent_node_id": str(req.parent_node_id),
        "candidate_node_id": str(req.candidate_node_id),
        "decision": req.decision,
        "hypothesis": f"```json\n{hyp}\n```",
        "files_changed": ", ".join(f"`{f}`" for f in req.files_changed) or "(none)",
        "diff": diff or "(empty)",
        "transitions": "\n".join(_transition_rows(req)) or "(no tasks)",
        "dev_aggregates": dev or "not evaluated on dev",
    }
