"""skill-evals: grade a SKILL.md harness on `{skill-name}-workspace/evals/evals.json` (the 000 seed's schema).

Each eval is a task (group = eval name, family = level). A rollout runs the task agent once with the
harness's SKILL.md as instructions and scores the assertion pass rate; `passed` = every assertion passed.
Options: `evals` (path of evals.json; default: the bundled `harness_templates/skill` example's),
`agent` (`offline` stand-in or `claude`), `model`, `omit_rate` (offline stand-in), `skill_file`,
`holdout` (evals sorted by id: every 5th from the 4th is dev, from the 5th is test; False = all train).
Skill mode (`saddler skill run`) uses the same agent and graders on every eval, with the seed's 2+1 runs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from benchmarks.skill_evals.agent import CommandSkillAgent, OfflineSkillAgent, SkillAgent
from benchmarks.skill_evals.evals import EvalCase, EvalSuite, load_evals
from benchmarks.skill_evals.grading import Judge, grade_run, offline_judge
from saddler.benchmark import BankPatch, BenchmarkBase, RolloutResult, Symptom, Task
from saddler.errors import ConfigError

__all__ = ["SkillEvalsBenchmark", "default_evals_path", "make_agent"]


def default_evals_path() -> Path:
    """The bundled example skill's evals.json."""
    from importlib import resources

    root = Path(str(resources.files("harness_templates"))) / "skill"
    found = sorted(root.glob("*-workspace/evals/evals.json"))
    if not found:
        raise ConfigError(f"no bundled evals.json under {root}; pass benchmark_options.evals")
    return found[0]


def make_agent(agent: str, model: str = "sonnet", omit_rate: float = 0.25) -> tuple[SkillAgent, Judge]:
    """The task agent and llm_judge for `agent` = offline (stand-ins) or claude (the `claude` CLI)."""
    if agent == "offline":
        return OfflineSkillAgent(omit_rate), offline_judge
    if agent == "claude":
        from benchmarks.skill_evals.judge import CommandJudge

        return CommandSkillAgent(model=model), CommandJudge(model=model)
    raise ConfigError(f"skill-evals agent must be offline or claude, not {agent!r}")


class SkillEvalsBenchmark(BenchmarkBase):
    """Grade a SKILL.md harness on `{skill-name}-workspace/evals/evals.json` (the 000 seed's schema).

    Its options and behaviour: the module docstring.
    """

    name = "skill-evals"
    trace_format = (
        "one JSON object: `eval` (the case), `seed`, `output` (what the agent produced with the skill) and "
        "`assertions` (each with `id`, `passed` and `evidence`)."
    )
    score_kind = "mean_score"  # the 000 seed's mean_pass_rate: the share of assertions passed, averaged
    metric = None

    def __init__(
        self,
        evals: str | None = None,
        agent: str = "offline",
        model: str = "sonnet",
        omit_rate: float = 0.25,
        skill_file: str = "SKILL.md",
        holdout: bool = True,
    ) -> None:
        self.suite: EvalSuite = load_evals(Path(evals) if evals else default_evals_path())
        self.agent_name, self.model, self.omit_rate = agent, model, omit_rate
        self.agent, self.judge = make_agent(agent, model, omit_rate)
        self.skill_file, self.holdout = skill_file, holdout

    def _split_of(self, index: int) -> str:
        if not self.holdout:
            return "train"
        return {3: "dev", 4: "test"}.get(index % 5, "train")

    def tasks(self, split: str) -> list[Task]:
        ordered = sorted(self.suite.evals, key=lambda e: (str(type(e.id)), e.id))
        return [
            Task(e.name, e.name, split, e.level, e.prompt) for i, e in enumerate(ordered) if self._split_of(i) == split
        ]

    def case(self, task_id: str) -> EvalCase:
        for case in self.suite.evals:
            if case.name == task_id:
                return case
        raise ConfigError(f"skill-evals: no eval named {task_id!r} in {self.suite.path}")

    def run(self, harness_dir: Path, task: Task, seed: int, trace_dir: Path) -> RolloutResult:
        case = self.case(task.id)
        skill_path = Path(harness_dir) / self.skill_file
        if not skill_path.is_file():
            return RolloutResult(task.id, 0.0, False, "task_failure", error_tail=f"{self.skill_file} is missing")
        grade = grade_run(
            self.agent, skill_path.read_text(encoding="utf-8"), case, self.suite.base_dir, 1, seed, self.judge
        )
        trace_dir = Path(trace_dir)
        trace_dir.mkdir(parents=True, exist_ok=True)
        trace = trace_dir / "trace.json"
        trace.write_text(
            json.dumps(
                {"eval": case.name, "seed": seed, "output": grade.output.text, "assertions": grade.assertions},
                indent=2,
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )
        score = sum(grade.vector) / len(grade.vector)
        failed = [a for a in grade.assertions if not a["passed"]]
        disposition = "infra_error" if grade.output.error else ("success" if not failed else "task_failure")
        return RolloutResult(
            task.id,
            score,
            not failed,
            disposition,
            cost=grade.output.cost_usd,
            llm_calls=0 if self.agent_name == "offline" else 1,
            trace_path=str(trace),
            error_tail=grade.output.error,
            rationale="; ".join(f"{a['id']}: {a['evidence']}" for a in failed)[:1000],
            failure_file=self.skill_file if failed else None,
        )

    def fingerprint(self) -> str:
        text = self.suite.path.read_text(encoding="utf-8")
        return hashlib.sha256(f"{text}\0{self.agent_name}\0{self.omit_rate}".encode()).hexdigest()[:16]

    def model_fingerprint(self) -> str:
        return f"{self.agent_name}:{self.model if self.agent_name != 'offline' else 'stand-in'}"

    def symptoms(self, result: RolloutResult) -> list[Symptom]:
        if result.passed or not result.trace_path or not Path(result.trace_path).is_file():
            return []
        data: dict[str, Any] = json.loads(Path(result.trace_path).read_text(encoding="utf-8"))
        return [
            Symptom(f"assertion:{a['id']}", result.task_id, self.skill_file, str(a["evidence"]))
            for a in data.get("assertions", [])
            if not a["passed"]
        ]

    def patch_bank(self) -> list[BankPatch]:
        return []
