"""The mutator with a real agent CLI (default `claude -p`): it edits a copy of SKILL.md, one change, and writes
its hypothesis as JSON. It sees grading summaries only (failing assertion ids, descriptions, evidence), never
the full eval outputs (the seed's context-window rule)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from saddler.errors import BackendError
from saddler.modes.skill.mutator import Mutation, MutationState, failing_targets, focus_level
from saddler.modes.skill.program import STRATEGY_TYPES
from saddler.procs import run_process_group

TEMPLATE = (
    "claude -p --output-format json --model {model} --permission-mode acceptEdits "
    "--allowedTools Read,Edit,Write -- {prompt}"
)
PROMPT = """You improve a skill's SKILL.md (in the current folder) by autoresearch: ONE change only.
Focus level: {level}. Failing assertions, most important first (id: description — grader evidence):
{failing}
Capability issues reported by external verification (fix these first): {issues}
program.md strategies (use them first when given): {strategies}
Mutation exclusions (never make a change in these directions; they cannot be fixed in SKILL.md): {exclusions}
Hypotheses already tried (do not repeat their direction): {tried}
Default strategy, in order: missing (add the absent instruction to the right section), ambiguous (make a vague
instruction specific), structural (move it earlier or make it a required check item), excess (remove filler).
Keep the YAML frontmatter (name, description), every `## ` heading and every ${{VAR}} reference intact.
Edit SKILL.md, then write {result_file} with one JSON object:
{{"target": "<assertion id: description>", "analysis": "...", "plan": "...",
 "strategy_type": "missing|ambiguous|structural|excess"}}
"""


class ClaudeMutator:
    """Runs the agent CLI once per hypothesis in a scratch copy of the skill (its cost is recorded with the
    hypothesis); a session that changes nothing is an empty change, rejected and retried by the loop."""

    name = "claude"

    def __init__(self, template: str = TEMPLATE, model: str = "sonnet", timeout_s: float = 900.0) -> None:
        self.template, self.model, self.timeout_s = template, model, timeout_s

    def propose(self, state: MutationState) -> Mutation | None:
        from saddler.agentcli import build_argv, parse_usage

        targets = failing_targets(state.results, state.program)
        failing = "\n".join(f"- {t.label}: {t.assertion.description} — {t.evidence}" for t in targets) or "- none"
        with tempfile.TemporaryDirectory(prefix="saddler-skill-") as tmp:
            folder = Path(tmp)
            (folder / "SKILL.md").write_text(state.skill_text, encoding="utf-8")
            result_file = folder / "hypothesis.json"
            prompt = PROMPT.format(
                level=focus_level(state.results) or "all pass",
                failing=failing,
                issues="; ".join(state.program.capability_issues) or "none",
                strategies="; ".join(f"[{s.type}] {s.text}" for s in state.program.strategies) or "none",
                exclusions="; ".join(f"{e.pattern} ({e.reason})" for e in state.program.exclusions) or "none",
                tried="; ".join(sorted(state.skip)) or "none",
                result_file=result_file.name,
            )
            argv = build_argv(self.template, {"prompt": prompt, "model": self.model})
            if shutil.which(argv[0]) is None:
                raise BackendError(f"mutator CLI {argv[0]!r} not found on PATH; install it or use --backend offline")
            run = run_process_group(argv, cwd=folder, timeout_s=self.timeout_s)
            cost = float(parse_usage(run.stdout)["cost_usd"])
            text = state.skill_text if run.timed_out else (folder / "SKILL.md").read_text(encoding="utf-8")
            try:
                hyp = json.loads(result_file.read_text(encoding="utf-8")) if result_file.is_file() else {}
            except json.JSONDecodeError:
                hyp = {}
        if text == state.skill_text or not isinstance(hyp, dict):
            why = f"timeout after {self.timeout_s:g}s" if run.timed_out else f"exit {run.returncode}, no edit"
            return Mutation(
                f"claude:none:{state.iteration}:{state.attempt}",
                "missing",
                "",
                f"the mutator session changed nothing ({why})",
                "no change",
                state.skill_text,
                source="claude",
                cost_usd=cost,
            )  # an empty change: rejected before evaluation and retried, never "no hypothesis left"
        kind = str(hyp.get("strategy_type", "missing"))
        kind = kind if kind in STRATEGY_TYPES else "missing"
        plan = str(hyp.get("plan") or "agent edit")
        from_program = any(s.text in plan for s in state.program.strategies)
        return Mutation(
            f"claude:{kind}:{plan[:120]}",
            kind,
            str(hyp.get("target", "")),
            str(hyp.get("analysis", "")),
            plan,
            text,
            source="program" if from_program else "claude",
            cost_usd=cost,
        )
