"""Session prompt templates: markdown files shipped in `saddler/sessions/prompts/`, overridable per run.

Templates use `{name}` placeholders (`{{` / `}}` for literal braces). `render(role, request, overrides)`
fills them from a session request; an override template (`SessionConfig.prompts`: template name -> path)
may use any subset of the same placeholders. Template names: `diagnosis_patch`,
`diagnosis_patch_explore` (used when `request.exploration`), `reflection`, `evolution`, `system`.

Long lists are bounded so a prompt is as long at 10,000 nodes as at 100: evolution lists the nodes and edges that
matter (the current and best nodes with their nearest ancestors, the best kept nodes, the latest ones, edges with
attributed lessons), the latest lineage edges and tried actions, with a count of the rest, and names the `evo-dag`
commands that show it; every session is told to read the bounded history (`evo-dag history --recent`).
"""

from __future__ import annotations

import json
import shlex
from importlib import resources
from pathlib import Path
from typing import Any

from evodag.decisions import KEPT_STATUSES
from evodag.history import RECENT_ITERATIONS
from saddler.agentcli import fill
from saddler.errors import ConfigError
from saddler.sessions.schema import (
    DiagnosisRequest,
    EvolutionRequest,
    NodeInfo,
    ReflectionRequest,
    Role,
    TaskTransition,
    result_schema,
    transition_category,
)

TEMPLATES = ("system", "diagnosis_patch", "diagnosis_patch_explore", "reflection", "evolution")
_MAX_DIFF_CHARS = 30_000
_MAX_TAIL_CHARS = 400
_MAX_KEPT_NODES = 15
_MAX_RECENT_NODES = 10
_MAX_LINEAGE_NODES = 10
_MAX_LINEAGE_EDGES = 30
_MAX_SIGNAL_EDGES = 15
_MAX_TRIED_ACTIONS = 20

_TAXONOMY = {
    "capability": (
        "**Capability** patches change what the agent can do: a new or fixed **tool** (its implementation, "
        "arguments, error messages, pagination, validation), the **loop** (turn limits, retries, when to "
        "stop, verification before finishing), or **infra** (timeouts, environment handling, parsing of "
        "tool output)."
    ),
    "steering": (
        "**Steering** patches change what the agent is told: the system **prompt**, **reminders** injected "
        "during the loop, or **hooks** that check or redirect the agent's actions."
    ),
}


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
        values.update(_diagnosis_values(request, web_search))
    elif isinstance(request, ReflectionRequest):
        values.update(_reflection_values(request))
    else:
        values.update(_evolution_values(request))
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


def _diagnosis_values(req: DiagnosisRequest, web_search: bool) -> dict[str, str]:
    kinds = [k for k in req.allowed_kinds if k in _TAXONOMY]
    taxonomy = "\n\n".join(_TAXONOMY[k] for k in kinds) or "No patch kind is restricted by phase."
    globs = "\n".join(
        f"- {kind}: {', '.join(f'`{g}`' for g in globs) or '(none)'}" for kind, globs in req.component_globs.items()
    )
    lineage = (
        f"\nAlready applied in this lineage (do not apply again): {', '.join(dict.fromkeys(req.lineage_origins))}.\n"
        if req.lineage_origins
        else ""
    )
    attempt = (
        f"\nThis is retry {req.attempt}: the worktree is clean again; start from it and make a valid change.\n"
        if req.attempt > 0
        else ""
    )
    web = (
        "Use the WebSearch and WebFetch tools to look up how others solved this failure mechanism "
        "(agent-harness patterns, tool design, the APIs the failing tools wrap)."
        if web_search
        else "Web search is not available in this session: re-read the harness code end to end and the oldest "
        "lessons instead, looking for a mechanism no earlier candidate addressed."
    )
    return {
        "worktree": req.worktree,
        "parent_node_id": str(req.parent_node_id),
        "phase": req.phase,
        "allowed_kinds": ", ".join(req.allowed_kinds) or "(none)",
        "patch_taxonomy": taxonomy,
        "component_globs": globs or "- (no component map)",
        "evidence": format_evidence(req),
        "lineage_note": lineage,
        "excluded_note": excluded_note(req),
        "attempt_note": attempt,
        "check_note": (
            f"Run `{req.check_command}` (the harness's check command) and fix everything it reports."
            if req.check_command
            else "There is no check command: import each changed module where your tools allow "
            '(`python -c "import package.module"`), else re-read it for names used but never defined or imported.'
        ),
        "check_command": req.check_command,
        "web_search_note": web,
        "trace_format": trace_format_line(req.trace_format),
    }


def trace_format_line(described: str) -> str:
    """The sentence telling diagnosis what the traces are, from the benchmark's `trace_format`."""
    if not described.strip():
        return "Trace format: not declared by the benchmark; each rollout's trace path is a file or its own folder."
    return f"Trace format (as the benchmark describes it): {described.strip()}"


def excluded_note(req: DiagnosisRequest) -> str:
    """The mutations not to try again, once each, as their agent wrote them (its plan) with their origin; then the
    changes refused by validation, each with why (their ideas stay open); then the ideas whose one change here
    moved no task, each with its diff (open for one more evaluated change). Ideas that made an ancestor clearly
    worse are listed apart, each with where."""
    out = ""
    here = [o for o in dict.fromkeys(req.excluded) if o not in req.worse_on_lineage]
    if here:
        lines = []
        for origin in here:
            plan = req.excluded_plans.get(origin, "").strip()
            lines.append(f"- {plan} (`{origin}`)" if plan else f"- `{origin}`")
        out += "\nExcluded here (already tried on this parent; do not try again):\n" + "\n".join(lines) + "\n"
    if req.worse_on_lineage:
        lines = [f"- `{origin}`: {why}" for origin, why in req.worse_on_lineage.items()]
        out += (
            "\nExcluded on this lineage (the idea made an ancestor clearly worse; do not try it again):\n"
            + "\n".join(lines)
            + "\n"
        )
    if req.refused:
        lines = [f"- `{origin}`: {why}" for origin, why in req.refused.items()]
        out += (
            "\nRefused here (the change failed a check; the idea is not excluded: a version that passes the checks "
            "is welcome):\n" + "\n".join(lines) + "\n"
        )
    if req.no_effect:
        blocks = [f"- `{origin}`:\n```diff\n{diff.rstrip()}\n```" for origin, diff in req.no_effect.items()]
        out += (
            "\nTried here once and no task of its batch moved (evidence against that change, not yet against its "
            "idea): if the diff does not do what the idea needs, one version that does is welcome; the same "
            "change is refused:\n" + "\n".join(blocks) + "\n"
        )
    return out


def format_evidence(req: DiagnosisRequest) -> str:
    """One block per train rollout: outcome, grader rationale, trace and implicated file."""
    if not req.evidence:
        return "(no rollouts)"
    failed = sum(1 for e in req.evidence if not e.passed)
    lines = [f"{len(req.evidence)} rollouts, {failed} failed."]
    for e in req.evidence:
        head = f"- `{e.task_id}` (group {e.group or '-'}, family {e.family or '-'}, rep {e.repetition}, seed {e.seed}):"
        lines.append(f"{head} score {e.score:.2f}, {'PASS' if e.passed else 'FAIL'}, {e.disposition}")
        if e.rationale:
            lines.append(f"  - grader: {e.rationale}")
        if e.trace_path:
            lines.append(f"  - trace: `{e.trace_path}`")
        if e.failure_file:
            lines.append(f"  - failure point in: `{e.failure_file}`")
        if e.error_tail:
            lines.append(f"  - error: {e.error_tail[-_MAX_TAIL_CHARS:]}")
    return "\n".join(lines)


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


def _listed_nodes(req: EvolutionRequest) -> list[NodeInfo]:
    """The nodes worth showing, as many at any size of the DAG: the current and best nodes with their nearest
    ancestors (`_MAX_LINEAGE_NODES` each, and the root), the best kept nodes by dev, the latest others (the
    frontier); in id order."""
    by_id = {n.node_id: n for n in req.nodes}
    pinned = {req.current_node_id, req.best_node_id}
    for node_id in (req.current_node_id, req.best_node_id):
        for _ in range(_MAX_LINEAGE_NODES):
            if node_id not in by_id or by_id[node_id].parent_id is None:
                break
            node_id = by_id[node_id].parent_id  # type: ignore[assignment]
            pinned.add(node_id)
    pinned |= {n.node_id for n in req.nodes if n.parent_id is None}
    kept = sorted((n for n in req.nodes if n.status in KEPT_STATUSES), key=lambda n: (-(n.dev_mean or -1.0), n.node_id))
    pinned |= {n.node_id for n in kept[:_MAX_KEPT_NODES]}
    others = sorted((n for n in req.nodes if n.status not in KEPT_STATUSES), key=lambda n: -n.node_id)
    pinned |= {n.node_id for n in others[:_MAX_RECENT_NODES]}
    return [n for n in req.nodes if n.node_id in pinned]


def _evolution_values(req: EvolutionRequest) -> dict[str, str]:
    listed = _listed_nodes(req)
    shown = {n.node_id for n in listed}
    nodes = [
        f"- node {n.node_id} (parent {n.parent_id}, iteration {n.iteration}): {n.status}, origin {_cut(n.origin)}, "
        f"dev {_num(n.dev_mean)}, batch {_num(n.batch_after)}, {n.lines_changed} lines changed"
        for n in listed
    ]
    if len(listed) < len(req.nodes):
        statuses: dict[str, int] = {}
        for n in req.nodes:
            if n.node_id not in shown:
                statuses[n.status] = statuses.get(n.status, 0) + 1
        rest = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
        nodes.insert(
            0,
            f"(showing {len(listed)} of {len(req.nodes)} nodes: the current and best nodes with their nearest "
            f"ancestors, the best kept nodes by dev and the latest; not shown: {rest}; `evo-dag node ID` and "
            "`evo-dag lineage ID` show any node)",
        )
    signal = [e for e in req.edges if e.true_fixes or e.true_regressions][-_MAX_SIGNAL_EDGES:]
    keep = {e.edge_id for e in signal} | {e.edge_id for e in req.edges if e.child_id in shown}
    listed_edges = [e for e in req.edges if e.edge_id in keep]
    edges = [
        f"- edge {e.edge_id}: {e.parent_id} -> {e.child_id} ({e.kind}, {_cut(e.origin)}, "
        f"child {e.child_status or '-'}), "
        f"files {', '.join(e.files) or '-'}; fixed {_ids(e.fixed)}; regressed {_ids(e.regressed)}; "
        f"true fixes {_ids(e.true_fixes)}; true regressions {_ids(e.true_regressions)}"
        for e in listed_edges
    ]
    if len(listed_edges) < len(req.edges):
        edges.insert(
            0,
            f"(showing {len(listed_edges)} of {len(req.edges)} edges: those into the nodes above and the latest with "
            "attributed lessons; `evo-dag edge A B` shows any edge)",
        )
    lineage = {
        str(k): v
        if len(v) <= _MAX_LINEAGE_EDGES
        else [f"{len(v) - _MAX_LINEAGE_EDGES} earlier", *v[-_MAX_LINEAGE_EDGES:]]
        for k, v in req.lineage_edge_ids.items()
    }
    bases = [i for i in req.allowed_base_ids if i in shown]
    hidden = len(req.allowed_base_ids) - len(bases)
    allowed = ", ".join(str(i) for i in bases) + (
        f" (and {hidden} more not listed above: any kept node)" if hidden else ""
    )
    tried = req.tried_actions[-_MAX_TRIED_ACTIONS:]
    tried_text = ", ".join(tried) + (
        f" (and {len(req.tried_actions) - len(tried)} earlier ones)" if len(tried) < len(req.tried_actions) else ""
    )
    return {
        "current_node_id": str(req.current_node_id),
        "best_node_id": str(req.best_node_id),
        "nodes": "\n".join(nodes) or "(none)",
        "edges": "\n".join(edges) or "(none)",
        "lineage": json.dumps(lineage, sort_keys=True),
        "failing": json.dumps({str(k): v for k, v in req.failing_train_tasks.items()}, sort_keys=True),
        "tried_actions": tried_text or "(none)",
        "allowed_bases": allowed if req.allowed_base_ids else "(any node listed above)",
    }


def _cut(origin: str, limit: int = 60) -> str:
    return "-" if not origin else (origin if len(origin) <= limit else origin[: limit - 1] + "…")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ids(values: list[str]) -> str:
    return ", ".join(values) or "-"
