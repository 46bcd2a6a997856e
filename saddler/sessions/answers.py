"""What a session answers, as the loop reads it: the JSON in the agent's output validated into the role's result
(`parse_result`, raising `OutputError` naming each violation), and the minimal result of a failed session the loop
falls back on (`failed_result`). An answer is a claim: `saddler.sessions.agent_edits` checks a diagnosis against
its worktree.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from saddler.sessions.schema import (
    DiagnosisRequest,
    DiagnosisResult,
    EvolutionRequest,
    EvolutionResult,
    ReflectionRequest,
    ReflectionResult,
    Role,
    SessionStats,
)

Request = DiagnosisRequest | ReflectionRequest | EvolutionRequest
Result = DiagnosisResult | ReflectionResult | EvolutionResult
_RESULT_MODELS: dict[str, type[Result]] = {
    "diagnosis_patch": DiagnosisResult,
    "reflection": ReflectionResult,
    "evolution": EvolutionResult,
}
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n```", re.DOTALL)


class OutputError(ValueError):
    """The session's answer is missing, not JSON, or does not match the role's schema."""


def extract_json(payload: Any) -> dict[str, Any]:
    """The JSON object in `payload`: a dict as is, else the last fenced or bare `{...}` object in the text."""
    if isinstance(payload, dict):
        return payload
    if not isinstance(payload, str) or not payload.strip():
        raise OutputError("no answer: the session produced no structured output")
    text = payload.strip()
    candidates = [text, *reversed(_FENCE.findall(text))]
    start = text.rfind("\n{")
    candidates.append(text[start + 1 :] if start >= 0 else text[text.find("{") :])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    raise OutputError(f"answer is not a JSON object: {text[:200]!r}")


def parse_result(role: Role, payload: Any, stats: SessionStats) -> Result:
    """Validate the session's JSON answer (without stats) into the role's result, attaching `stats`.

    Raises `OutputError` naming every schema violation.
    """
    data = dict(extract_json(payload))
    data.pop("stats", None)
    if role == "diagnosis_patch" and isinstance(data.get("hypothesis"), dict):
        hypothesis = dict(data["hypothesis"])
        if str(hypothesis.get("origin", "")).strip() in ("", "patch", "llm"):
            hypothesis["origin"] = llm_origin(str(hypothesis.get("plan", "")))
        data["hypothesis"] = hypothesis
    try:
        return _RESULT_MODELS[role].model_validate({**data, "stats": stats.model_dump()})
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise OutputError(f"answer does not match the {role} schema: {errors}") from exc


def llm_origin(plan: str) -> str:
    """The origin of an LLM patch: `llm:<slug of its plan>`, so the loop can tell mutations apart
    (a repeated plan is the same mutation; `llm:` alone would make every LLM patch look identical)."""
    slug = re.sub(r"[^a-z0-9]+", "-", plan.lower()).strip("-")[:60].rstrip("-")
    return f"llm:{slug or 'patch'}"


def failed_result(role: Role, request: Request, stats: SessionStats, reason: str) -> Result:
    """A valid minimal result for a failed session; the loop falls back on it.

    Diagnosis: status failed. Reflection: no lessons. Evolution: continue from the current node.
    """
    stats = stats.model_copy(update={"outcome": f"failed:{reason}"})
    if role == "diagnosis_patch":
        return DiagnosisResult(status="failed", reason=reason, stats=stats)
    if role == "reflection":
        return ReflectionResult(lessons=[], summary=f"reflection failed: {reason}", stats=stats)
    assert isinstance(request, EvolutionRequest)
    return EvolutionResult(
        action="continue", parent_node_id=request.current_node_id, rationale=f"evolution failed: {reason}", stats=stats
    )
