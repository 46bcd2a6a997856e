"""Helpers shared by the LLM backends (`claude`, `command`).

Structured-output parsing and validation into the schema's results, minimal failed results the loop
can fall back on, transcript files, retry with backoff, and the protected-path / Bash policy that the
claude backend's PreToolUse hook enforces (the post-hoc diff check stays the second line of defence).
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from saddler.sessions.schema import (
    DiagnosisRequest,
    DiagnosisResult,
    EvolutionRequest,
    EvolutionResult,
    ReflectionRequest,
    ReflectionResult,
    Role,
    SessionBackend,
    SessionStats,
)

T = TypeVar("T")
Request = DiagnosisRequest | ReflectionRequest | EvolutionRequest
Result = DiagnosisResult | ReflectionResult | EvolutionResult
_RESULT_MODELS: dict[str, type[Result]] = {
    "diagnosis_patch": DiagnosisResult,
    "reflection": ReflectionResult,
    "evolution": EvolutionResult,
}
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n```", re.DOTALL)
_SHELL_META = re.compile(r"[;&|<>`$()\n\\]")


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


def finish_diagnosis(result: DiagnosisResult, worktree: Path) -> DiagnosisResult:
    """Reconcile the agent's claim with the worktree: `patched` with no change becomes `no_patch`,
    changed files fill `hypothesis.files` when the agent left it empty, outcome follows status."""
    changed = changed_files(worktree)
    if result.status == "patched" and not changed:
        result = result.model_copy(
            update={"status": "no_patch", "reason": "the agent reported a patch but the worktree is unchanged"}
        )
    if result.status == "patched" and result.hypothesis is not None and not result.hypothesis.files:
        result = result.model_copy(update={"hypothesis": result.hypothesis.model_copy(update={"files": changed})})
    if result.status == "no_patch" and result.stats.outcome == "ok":
        result = result.model_copy(update={"stats": result.stats.model_copy(update={"outcome": "no_patch"})})
    return result


def head_commit(worktree: Path) -> str | None:
    """The worktree's HEAD commit, or None when it is not a git checkout."""
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=worktree, capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def undo_agent_commits(worktree: Path, start: str | None) -> bool:
    """If the agent committed (HEAD moved from `start`), move HEAD back keeping its changes in the working
    tree, so saddler's own commit and diff see them; returns whether anything was undone."""
    if start is None or head_commit(worktree) in (None, start):
        return False
    subprocess.run(["git", "reset", "-q", "--soft", start], cwd=worktree, capture_output=True, check=True)
    return True


def changed_files(worktree: Path) -> list[str]:
    """Paths (relative to `worktree`) that differ from HEAD, untracked files included, sorted."""
    proc = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "-z"],
        cwd=worktree,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return []
    paths = []
    entries = proc.stdout.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":
                i += 1  # rename/copy: the next entry is the source path
        i += 1
    return sorted(set(paths))


def transcript_path(run_dir: Path, iteration: int, role: str) -> Path:
    """`run_dir/sessions/<iteration>-<role>.jsonl`, its folder created."""
    path = Path(run_dir) / "sessions" / f"{iteration}-{role}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class Transcript:
    """Append-only JSONL transcript of one session (every attempt, every message)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.write_text("", encoding="utf-8")

    def write(self, kind: str, **data: Any) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"kind": kind, **data}, default=str, sort_keys=True) + "\n")


class TransientError(Exception):
    """A failure worth retrying (rate limit, overload, dropped connection)."""


def with_retries(
    fn: Callable[[int], T],
    retries: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    base_delay: float = 2.0,
    max_delay: float = 60.0,
    on_retry: Callable[[int, Exception, float], None] | None = None,
) -> T:
    """Call `fn(attempt)`; on `TransientError` wait `base * 2**attempt` (plus seeded jitter) and retry,
    at most `retries` times; the last `TransientError` propagates."""
    rng = rng or random.Random(0)
    attempt = 0
    while True:
        try:
            return fn(attempt)
        except TransientError as exc:
            if attempt >= retries:
                raise
            delay = min(max_delay, base_delay * 2**attempt) * (1 + 0.25 * rng.random())
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            sleep(delay)
            attempt += 1


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a component-map glob: `**` spans folders, `*` and `?` stay within one path segment;
    a trailing `/` or `/**` matches everything below."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if pattern.endswith("/"):
        pattern += "**"
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches_any(rel_path: str, patterns: list[str]) -> bool:
    """Whether `rel_path` (posix, relative) matches one of the globs, or lies under a matching folder."""
    parts = rel_path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(glob_to_regex(p).match(candidate) for p in patterns for candidate in prefixes)


def edit_denial(file_path: str, worktree: Path, protected: list[str]) -> str | None:
    """Why an edit of `file_path` must be refused (outside the worktree, in `.git`, protected), or None."""
    root = Path(os.path.realpath(worktree))
    target = Path(file_path)
    if not target.is_absolute():
        target = root / target
    resolved = Path(os.path.realpath(target))
    try:
        rel = resolved.relative_to(root).as_posix()
    except ValueError:
        return f"{file_path} is outside the harness worktree {root}; edit files inside it only"
    if rel == ".git" or rel.startswith(".git/"):
        return f"{file_path} is git metadata; edit harness files only"
    if matches_any(rel, protected):
        return f"{rel} is a protected path (evaluation code, data or saddler.toml) and must not be edited"
    return None


def bash_denial(command: str, allowed_prefixes: list[str]) -> str | None:
    """Why a Bash command must be refused, or None: only single commands (no pipes, chaining,
    redirection or substitution) starting with an allowed prefix may run; an allowed entry given
    verbatim (e.g. the harness's check command) may run as written."""
    if command.strip() in (p.strip() for p in allowed_prefixes):
        return None
    if _SHELL_META.search(command):
        return "only single commands are allowed here: no pipes, chaining, redirection or substitution"
    try:
        words = shlex.split(command)
    except ValueError:
        return "the command could not be parsed"
    for prefix in allowed_prefixes:
        pwords = shlex.split(prefix)
        if pwords and words[: len(pwords)] == pwords:
            return None
    return f"Bash is limited to: {', '.join(allowed_prefixes)}"


def guard_decision(
    hook_input: dict[str, Any],
    worktree: Path | None,
    protected: list[str],
    bash_prefixes: list[str],
    writable_files: list[str] | None = None,
) -> dict[str, Any]:
    """PreToolUse hook output for one tool call: a deny decision with its reason, or `{}` (no opinion).

    Edits are allowed inside `worktree` except protected paths (none when `worktree` is None), plus the
    exact `writable_files` (e.g. the command backend's result file); Bash must pass `bash_denial`.
    """
    tool = str(hook_input.get("tool_name", ""))
    args = hook_input.get("tool_input") or {}
    reason: str | None = None
    if tool in EDIT_TOOLS:
        path = str(args.get("file_path") or args.get("notebook_path") or "")
        writable = {os.path.realpath(f) for f in writable_files or []}
        if os.path.realpath(path) in writable:
            reason = None
        elif worktree is None:
            reason = "this session does not edit files"
        else:
            reason = edit_denial(path, worktree, protected)
    elif tool == "Bash":
        reason = bash_denial(str(args.get("command", "")), bash_prefixes)
    if reason is None:
        return {}
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def allowed_bash_prefixes(check_command: str = "") -> list[str]:
    """The commands a session may run: the EvoDAG CLI, read-only git, and the harness's check command."""
    prefixes = ["evo-dag", "git diff", "git status"]
    if check_command.strip():
        prefixes.append(check_command.strip())
    return prefixes


def guard_main(argv: list[str]) -> int:
    """Command-hook entry point: `python -m saddler.sessions.common GUARD_JSON` reads the hook input
    from stdin and prints `guard_decision` (GUARD_JSON: worktree, protected, bash, writable)."""
    import sys

    spec = json.loads(argv[0])
    hook_input = json.loads(sys.stdin.read() or "{}")
    worktree = Path(spec["worktree"]) if spec.get("worktree") else None
    decision = guard_decision(
        hook_input, worktree, spec.get("protected", []), spec.get("bash", []), spec.get("writable")
    )
    print(json.dumps(decision))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(guard_main(sys.argv[1:]))


class LLMSessionBackend(SessionBackend):
    """Shared shape of the LLM backends: each session kind is one `_session(role, request)` call.

    Diagnosis additionally undoes any commit the agent made itself (keeping its edits), so the loop
    commits and diffs the change, and checks the edit against the worktree (`finish_diagnosis`).
    """

    config: Any
    sleep: Callable[[float], None]
    rng: random.Random

    def _session(self, role: Role, request: Request) -> Result:
        raise NotImplementedError

    def _with_retries(self, role: Role, request: Request, stats: SessionStats, transcript: Transcript,
                      attempt: Callable[[int], Result]) -> Result:
        """Run `attempt` with backoff on transient errors; exhausted retries make a failed result."""

        def on_retry(n: int, exc: Exception, delay: float) -> None:
            transcript.write("retry", attempt=n, error=str(exc), delay_s=round(delay, 3))

        try:
            return with_retries(attempt, self.config.retries, sleep=self.sleep, rng=self.rng, on_retry=on_retry)
        except TransientError as exc:
            stats.error = str(exc)
            return failed_result(role, request, stats, "transient")

    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        start = head_commit(Path(request.worktree))
        result = self._session("diagnosis_patch", request)
        assert isinstance(result, DiagnosisResult)
        undo_agent_commits(Path(request.worktree), start)
        return finish_diagnosis(result, Path(request.worktree))

    def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        result = self._session("reflection", request)
        assert isinstance(result, ReflectionResult)
        return result

    def evolve(self, request: EvolutionRequest) -> EvolutionResult:
        result = self._session("evolution", request)
        assert isinstance(result, EvolutionResult)
        return result
