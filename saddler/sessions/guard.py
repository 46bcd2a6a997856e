"""The tool guard of LLM sessions: which edits and Bash commands an optimizer agent may make.

Used as the claude-agent-sdk PreToolUse hook and, for CLI agents, as a command hook
(`python -m saddler.sessions.guard GUARD_JSON || exit 2`). Globs are the component map's
(`saddler.harness.components`), so the hook and the loop's post-hoc diff check agree on what is protected.

The guard fails closed: a guard that cannot decide (bad input, a bug) denies the call, and the command hook
exits 2 (Claude Code's "block this call") when Python itself fails.

Bash is a small allowlist of read-only commands, each checked argument by argument, because a prefix is not a
policy: `evo-dag export --out FILE` and `git diff --output=FILE` start with allowed prefixes and write anywhere.

Held-out data stays sealed (`ReadPolicy`): inside the run folder only the parts sessions may see can be read
(the train traces, the transcripts with the session view of the EvoDAG, the harness and its worktrees); the full
EvoDAG, the dev and test traces, the report and the export cannot, whether through Read, Glob, Grep, `git diff`
on a path, or `evo-dag --db`. `evo-dag` reads only the session view (`evodag.view`), preset in `$EVODAG_DB`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saddler.harness.components import matches
from saddler.sessions.reads import READ_TOOLS, SEARCH_TOOLS, ReadPolicy

EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_SHELL_META = re.compile(r"[;&|<>`$()\n\r\\]")
EVO_DAG_READS = (
    "summary",
    "history",
    "node",
    "edge",
    "scenario",
    "lessons",
    "lineage",
    "best",
    "batch",
    "diff",
    "export",
)  # not `query`: raw SQL would show sessions the per-task dev rollouts their prompts keep to aggregates
HOOK_EXIT_BLOCK = 2  # a Claude Code command hook that exits 2 blocks the tool call


@dataclass(frozen=True)
class Command:
    """One allowed Bash command: its leading words and the check its remaining arguments must pass."""

    words: tuple[str, ...]
    describe: str
    refuse: Callable[[list[str], BashPolicy, str], str | None]  # (arguments, the policy, working directory)


def _no_args(args: list[str]) -> str | None:
    return None


_EVO_DAG_VALUED = {"--db", "--run", "--run-id", "--format", "--out", "--node", "--category", "--attribution", "--task",
                   "--edge"}  # fmt: skip


def _long_option(arg: str) -> str:
    return arg.split("=", 1)[0] if arg.startswith("--") else ""


def _option_value(args: list[str], i: int) -> str | None:
    """The value of the long option at `args[i]` (`--db=X` or `--db X`)."""
    if "=" in args[i]:
        return args[i].split("=", 1)[1]
    return args[i + 1] if i + 1 < len(args) else None


def _evo_dag_refusal(args: list[str], policy: BashPolicy, cwd: str) -> str | None:
    """`evo-dag` runs its read-only subcommands only, on the session view only (`--db` names the view or is left
    out, `--run` is refused), and never with `--out` (the one option that writes)."""
    positional = [
        a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in _EVO_DAG_VALUED)
    ]
    sub = positional[0] if positional else None
    if sub is not None and sub not in EVO_DAG_READS:
        return f"evo-dag {sub} is not one of the read-only subcommands ({', '.join(EVO_DAG_READS)})"
    if any(_long_option(a) == "--out" for a in args):
        return "evo-dag --out writes a file; print to stdout instead (omit --out)"
    for i, arg in enumerate(args):
        name = _long_option(arg)
        if name == "--run":
            return "evo-dag --run is not allowed here: the session's history is preset in $EVODAG_DB (omit --run)"
        if name == "--db":
            value = _option_value(args, i) or ""
            named = os.path.realpath(os.path.join(cwd, value))
            if not policy.db or named != os.path.realpath(policy.db):
                return f"evo-dag --db may name only this session's history, {policy.db or '$EVODAG_DB'} (or omit it)"
    return None


def _git_diff_refusal(args: list[str], policy: BashPolicy, cwd: str) -> str | None:
    """`git diff` without the options that write a file or run external programs, and without `--no-index` or a
    path the session may not read (outside a repository, or with a path outside it, git compares any two files).
    Git accepts any unambiguous prefix of a long option (`--outp=FILE`), so every option starting with `--o` is
    refused, not just `--output`; `--no-index` is refused under its prefixes too."""
    options = True
    for arg in args:
        if arg == "--":
            options = False
            continue
        name = _long_option(arg) if options else ""
        if name.startswith("--o") or name in ("--ext-diff", "--textconv"):
            return f"git diff {name} is not allowed here (it writes a file or runs a configured program)"
        if len(name) > 4 and "--no-index".startswith(name):
            return "git diff --no-index is not allowed here (it compares any two files); diff the worktree instead"
        if not (options and arg.startswith("-")) and os.path.lexists(os.path.join(cwd, arg)):
            why = policy.reads.refusal(arg, cwd)
            if why:
                return f"git diff {arg}: {why}"
    return None


def _plain_refusal(refuse: Callable[[list[str]], str | None]) -> Callable[[list[str], BashPolicy, str], str | None]:
    return lambda args, _policy, _cwd: refuse(args)


@dataclass(frozen=True)
class BashPolicy:
    """The Bash commands a session may run: `evo-dag` (read-only, on the session view `db`), `git diff`, `git
    status`, and the harness's check command exactly as configured (no extra arguments: they could redirect its
    output anywhere). `reads` is what the session may read (the read tools and `git diff`'s paths)."""

    check_command: str = ""
    db: str = ""
    reads: ReadPolicy = field(default_factory=ReadPolicy)

    @property
    def commands(self) -> list[Command]:
        return [
            Command(("evo-dag",), "`evo-dag` read-only subcommands (no `--out`, `--run`)", _evo_dag_refusal),
            Command(("git", "diff"), "`git diff` (no `--output`, `--no-index`)", _git_diff_refusal),
            Command(("git", "status"), "`git status`", _plain_refusal(_no_args)),
        ]

    def prefixes(self) -> list[str]:
        """Permission-rule prefixes for the CLI (`Bash(<prefix>:*)`), the check command excluded."""
        return [" ".join(c.words) for c in self.commands]

    def describe(self) -> str:
        """One sentence for the prompts: what Bash may run."""
        allowed = [c.describe for c in self.commands]
        if self.check_command.strip():
            allowed.append(f"exactly `{self.check_command.strip()}` (the harness's check command, no extra arguments)")
        return (
            "Bash runs single commands only (no pipes, chaining, redirection or substitution), and only: "
            + "; ".join(allowed)
            + ". Any other command is refused before it runs, so do not spend turns probing."
        )

    def refusal(self, command: str, cwd: str = "") -> str | None:
        """Why `command` (run in `cwd`, default: the current directory) must be refused, or None."""
        check = self.check_command.strip()
        if check and command.strip() == check:
            return None
        if _SHELL_META.search(command):
            return "only single commands are allowed here: no pipes, chaining, redirection or substitution"
        try:
            words = shlex.split(command)
        except ValueError:
            return "the command could not be parsed"
        for allowed in self.commands:
            if tuple(words[: len(allowed.words)]) == allowed.words:
                return allowed.refuse(words[len(allowed.words) :], self, cwd or os.getcwd())
        return self.describe()


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
    if matches(rel, protected):
        return f"{rel} is a protected path (evaluation code, data or saddler.toml) and must not be edited"
    return None


def describe_limits(editing: bool, policy: BashPolicy, *, web: bool = False) -> str:
    """The tool limits of a guarded session, for its prompt."""
    files = (
        "Read, Glob and Grep; Edit and Write only inside the worktree (your working directory), never a "
        "protected path or `.git`"
        if editing
        else "Read, Glob and Grep; this session edits no file"
    )
    reads = f" Held-out results are sealed: {policy.reads.where()}." if policy.reads.run_dir else ""
    return f"Your tools: {files}{'; WebSearch and WebFetch' if web else ''}.{reads} {policy.describe()}"


def claude_tools(writes: bool, web: bool, policy: BashPolicy) -> tuple[list[str], list[str]]:
    """Claude's built-in tools for a session (`tools`: Read, Glob, Grep, Bash, plus Edit and Write when it `writes`,
    WebSearch and WebFetch with `web`) and its permission rules (`allowed_tools`: those tools, Bash only under
    `policy`)."""
    tools = ["Read", "Glob", "Grep", "Bash"] + (["Edit", "Write"] if writes else [])
    if web:
        tools += ["WebSearch", "WebFetch"]
    allowed = [t for t in tools if t != "Bash"] + [f"Bash({p}:*)" for p in policy.prefixes()]
    if policy.check_command.strip():
        allowed.append(f"Bash({policy.check_command.strip()})")
    return tools, allowed


def bash_denial(command: str, policy: BashPolicy, cwd: str = "") -> str | None:
    """Why a Bash command (run in `cwd`) must be refused under `policy`, or None."""
    return policy.refusal(command, cwd)


def deny(reason: str) -> dict[str, Any]:
    """The PreToolUse hook output that refuses a call, with the reason the model sees."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def guard_decision(
    hook_input: dict[str, Any],
    worktree: Path | None,
    protected: list[str],
    policy: BashPolicy,
    writable_files: list[str] | None = None,
) -> dict[str, Any]:
    """PreToolUse hook output for one tool call: a deny decision with its reason, or `{}` (no opinion).

    Edits are allowed inside `worktree` except protected paths (none when `worktree` is None), plus the
    exact `writable_files` (e.g. a custom command template's result file); Bash must pass `policy`, and reads and
    searches `policy.reads`. Relative paths are taken from the hook input's `cwd` (the session's working folder).
    """
    tool = str(hook_input.get("tool_name", ""))
    args = hook_input.get("tool_input") or {}
    cwd = str(hook_input.get("cwd") or worktree or policy.reads.run_dir or os.getcwd())
    reason: str | None = None
    if tool in READ_TOOLS or tool in SEARCH_TOOLS:
        reason = policy.reads.tool_refusal(tool, args, cwd)
    elif tool in EDIT_TOOLS:
        path = str(args.get("file_path") or args.get("notebook_path") or "")
        writable = {os.path.realpath(f) for f in writable_files or []}
        if not path:
            reason = "the edit names no file"
        elif os.path.realpath(path) in writable:
            reason = None
        elif worktree is None:
            reason = "this session does not edit files"
        else:
            reason = edit_denial(path, worktree, protected)
    elif tool == "Bash":
        reason = bash_denial(str(args.get("command", "")), policy, cwd)
    return {} if reason is None else deny(reason)


def safe_decision(hook_input: Any, decide: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """`decide(hook_input)`, failing closed: any exception (or a non-dict input) becomes a deny decision."""
    try:
        if not isinstance(hook_input, dict):
            raise TypeError(f"hook input is {type(hook_input).__name__}, not an object")
        return decide(hook_input)
    except Exception as exc:
        return deny(f"the saddler guard could not check this call ({type(exc).__name__}: {exc}); it is refused")


def policy_spec(policy: BashPolicy) -> dict[str, Any]:
    """The part of a command hook's spec that rebuilds `policy` (`policy_from_spec`)."""
    return {"check": policy.check_command, "db": policy.db, "run_dir": policy.reads.run_dir,
            "readable": list(policy.reads.readable)}  # fmt: skip


def policy_from_spec(spec: dict[str, Any]) -> BashPolicy:
    """The `BashPolicy` a command hook's spec describes (see `policy_spec`)."""
    reads = ReadPolicy(str(spec.get("run_dir", "")), tuple(str(p) for p in spec.get("readable", [])))
    return BashPolicy(str(spec.get("check", "")), str(spec.get("db", "")), reads)


def hook_command(spec: dict[str, Any]) -> str:
    """The shell command of the Claude Code command hook for `spec` (worktree, protected, writable and the
    policy's `policy_spec`).

    `|| exit 2` keeps it closed even when Python cannot start or import saddler: exit 2 blocks the call.
    """
    argv = [sys.executable, "-m", "saddler.sessions.guard", json.dumps(spec, sort_keys=True)]
    return f"{shlex.join(argv)} || exit {HOOK_EXIT_BLOCK}"


def guard_main(argv: list[str]) -> int:
    """Command-hook entry point: `python -m saddler.sessions.guard GUARD_JSON` reads the hook input from stdin
    and prints `guard_decision`. Anything unexpected prints a deny decision; exit 0 either way (a printed
    decision is only read on exit 0)."""
    try:
        spec = json.loads(argv[0])
        worktree = Path(spec["worktree"]) if spec.get("worktree") else None
        policy = policy_from_spec(spec)
        protected, writable = list(spec.get("protected", [])), spec.get("writable")
        hook_input = json.loads(sys.stdin.read() or "{}")
    except Exception as exc:
        print(json.dumps(deny(f"the saddler guard could not read its input ({type(exc).__name__}: {exc})")))
        return 0
    decision = safe_decision(hook_input, lambda i: guard_decision(i, worktree, protected, policy, writable))
    print(json.dumps(decision))
    return 0


if __name__ == "__main__":
    raise SystemExit(guard_main(sys.argv[1:]))
