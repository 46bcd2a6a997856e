"""What a diagnosis prompt shows of its `DiagnosisRequest`: `diagnosis_values` fills the `diagnosis_patch` and
`diagnosis_patch_explore` templates' own placeholders: the patch taxonomy of the allowed kinds, the component
globs, the evidence (`format_evidence`: one block per train rollout), the mutations already applied in the lineage,
excluded, refused or without effect (`excluded_note`), the retry and check notes, whether web search is available,
and the trace format (`trace_format_line`).
"""

from __future__ import annotations

from saddler.sessions.schema import DiagnosisRequest

_MAX_TAIL_CHARS = 400

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


def diagnosis_values(req: DiagnosisRequest, web_search: bool) -> dict[str, str]:
    """The placeholders of the diagnosis templates that come from the request (`render` adds the shared ones)."""
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
        "widen_note": (
            " If the fix these failures need is of a kind this phase does not allow, leave the worktree unchanged and "
            "answer `no_patch` naming that kind: this iteration is then asked again with both kinds allowed."
            if req.widens_on_no_patch
            else ""
        ),
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
    here = [o for o in dict.fromkeys(req.excluded) if o not in req.worse_on_lineage and o not in req.elsewhere]
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
    if req.elsewhere:
        lines = [f"- `{origin}`: {why}" for origin, why in req.elsewhere.items()]
        out += (
            "\nTaken elsewhere (another iteration running now is trying it, or the line already holds it; do not "
            "write it again):\n" + "\n".join(lines) + "\n"
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
