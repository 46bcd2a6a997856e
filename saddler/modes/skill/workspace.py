"""The 000 seed's workspace files: iteration folders, autoresearch-log.json, report.md and the run logs.

    W/iteration-0/SKILL.md.bak            the original, before anything ran
    W/iteration-N/SKILL.md                the mutated skill evaluated in iteration N
    W/iteration-N/hypothesis.md           the seed's hypothesis format
    W/iteration-N/eval-{name}/output.md   run 1's output (output-run-K.md for the others)
    W/iteration-N/eval-{name}/grading.json
    W/iteration-N/benchmark.json
    W/autoresearch-log.json, W/report.md, W/logs/{timestamp}/result.json + summary.md, W/logs/index.json
A finished earlier run in the same workspace is moved to W/previous/{k}/ before a new one starts.

A run starts in the staging folder W/.start/ (repo, evodag.sqlite, saddler.toml, iteration-0, and last
autoresearch-log.json); the items are then moved into W, the log last: a workspace with a log has a complete
start, and a kill at any point of the start leaves either a W/.start/ without a log (dropped on the next run:
the start is redone) or one with its log (its remaining items are moved in and the run continues).
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
from pathlib import Path
from typing import Any

from benchmarks.skill_evals.agent import AgentOutput
from benchmarks.skill_evals.evals import LEVELS, EvalSuite
from benchmarks.skill_evals.grading import CaseResult, RunGrade
from saddler.errors import RunStateError
from saddler.files import atomic_path
from saddler.modes.skill.mutator import Mutation
from saddler.modes.skill.program import STRATEGY_LABELS

RUN_FILES = (  # what a run (or `saddler report W`) writes into a workspace; only these are ever archived
    "autoresearch-log.json*", ".autoresearch-log.json.tmp-*", "iteration-*", "repo", "worktrees", "evodag.sqlite*",
    "saddler.toml", "report.md", "report.html", "logs", "results.tsv", "progress.png", "export",
)  # fmt: skip
STAGE = ".start"
LOG_NAME = "autoresearch-log.json"
REASON_TEXT = {
    "target_achieved": "target 달성 (target reached)",
    "stall_limit": "stall 중단 (stall limit)",
    "max_iterations": "예산 소진 (max iterations)",
    "strategies_exhausted": "전략 소진 (no untried hypothesis left)",
}


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def assertion_map(results: list[CaseResult]) -> dict[str, dict[str, bool]]:
    """{eval name: {assertion id: passed}} (the seed's assertion_baseline shape)."""
    return {r.case.name: r.passed_map for r in results}


def flat(results: list[CaseResult]) -> dict[str, bool]:
    return {f"{r.case.name}/{k}": v for r in results for k, v in r.passed_map.items()}


def mean_pass_rate(results: list[CaseResult]) -> float:
    return sum(r.pass_rate for r in results) / len(results) if results else 0.0


def level_rates(results: list[CaseResult]) -> dict[str, float | None]:
    """Assertion pass rate per level (None for a level without evals)."""
    out: dict[str, float | None] = {}
    for level in LEVELS:
        marks = [a["passed"] for r in results if r.case.level == level for a in r.assertions]
        out[level] = round(sum(marks) / len(marks), 4) if marks else None
    return out


class SkillWorkspace:
    """One skill-mode workspace folder (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    @property
    def log_path(self) -> Path:
        return self.root / "autoresearch-log.json"

    def prepare(self) -> Path | None:
        """Create the folder; move what an earlier run left (a finished run, or files of another version) to
        previous/{k}/ (returns that folder, if any). Only run files move: the user's program.md,
        verification-results.json and anything else of theirs stay."""
        self.root.mkdir(parents=True, exist_ok=True)
        leftovers = [c for c in self.root.iterdir() if any(fnmatch.fnmatch(c.name, pat) for pat in RUN_FILES)]
        if not leftovers:
            return None
        k = 1
        while (self.root / "previous" / str(k)).exists():
            k += 1
        dest = self.root / "previous" / str(k)
        dest.mkdir(parents=True)
        for child in leftovers:
            shutil.move(str(child), dest / child.name)
        return dest

    @property
    def stage(self) -> Path:
        return self.root / STAGE

    def new_stage(self) -> SkillWorkspace:
        """An empty W/.start/ to build a run's start in (see the module docstring)."""
        shutil.rmtree(self.stage, ignore_errors=True)
        self.stage.mkdir(parents=True)
        return SkillWorkspace(self.stage)

    def finish_start(self) -> bool:
        """Move a completed start (W/.start/ holding its log) into W, the log last; drop an incomplete one.
        True when a start was moved in."""
        stage = self.stage
        if not stage.is_dir():
            return False
        if not (stage / LOG_NAME).is_file():
            shutil.rmtree(stage)  # killed before the start was complete: nothing of it counts
            return False
        for item in sorted(stage.iterdir(), key=lambda p: p.name == LOG_NAME):
            target = self.root / item.name
            if target.exists():
                raise RunStateError(
                    f"{target} exists while a run start waits in {stage}; move one of them away and rerun"
                )
            os.replace(item, target)
        stage.rmdir()
        return True

    def iteration_dir(self, n: int) -> Path:
        path = self.root / f"iteration-{n}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_evals(self, n: int, results: list[CaseResult]) -> None:
        """eval-{name}/output.md (+ output-run-K.md) and grading.json for every eval of iteration n."""
        for r in results:
            folder = self.iteration_dir(n) / f"eval-{r.case.name}"
            folder.mkdir(parents=True, exist_ok=True)
            for run in r.runs:
                name = "output.md" if run.run == 1 else f"output-run-{run.run}.md"
                (folder / name).write_text(run.output.text, encoding="utf-8")
            write_json(folder / "grading.json", r.grading_json())

    def write_benchmark(self, n: int, results: list[CaseResult], extra: dict[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = {
            "iteration": n, "type": "baseline" if n == 0 else "mutation",
            "mean_pass_rate": round(mean_pass_rate(results), 4),
            "per_eval": [{"name": r.case.name, "level": r.case.level, "pass_rate": round(r.pass_rate, 4),
                          "runs": len(r.runs)} for r in results],
            "per_level": level_rates(results),
            ("assertion_baseline" if n == 0 else "assertions"): assertion_map(results),
            **extra,
        }  # fmt: skip
        write_json(self.iteration_dir(n) / "benchmark.json", data)
        return data

    def write_skill(self, n: int, text: str, name: str = "SKILL.md") -> Path:
        path = self.iteration_dir(n) / name
        path.write_text(text, encoding="utf-8")
        return path

    def write_hypothesis(self, n: int, m: Mutation, rejected: list[tuple[Mutation, str]]) -> None:
        label = STRATEGY_LABELS.get(m.strategy_type, m.strategy_type)
        lines = [
            f"# Iteration {n} 가설",
            "",
            f"**대상 assertion:** {m.target}",
            "",
            f"**분석:** {m.analysis}",
            "",
            f"**변경 계획:** {m.plan}",
            "",
            f"**전략 유형:** {label} ({m.strategy_type})",
            "",
        ]
        if rejected:
            lines += ["## Rejected before evaluation", ""]
            lines += [f"- {r.strategy_type}: {r.plan} — {why}" for r, why in rejected]
            lines.append("")
        (self.iteration_dir(n) / "hypothesis.md").write_text("\n".join(lines), encoding="utf-8")

    def write_log(self, log: dict[str, Any]) -> None:
        """autoresearch-log.json, replaced atomically (a kill never leaves half a log)."""
        with atomic_path(self.log_path) as tmp:
            write_json(tmp, log)

    def load_results(self, n: int, suite: EvalSuite) -> list[CaseResult] | None:
        """Iteration n's grading as written by `write_evals` (outputs, per-run grades, final verdicts), or None
        when a file is missing: a resumed run reuses what it paid for instead of running the evals again."""
        out = []
        for case in suite.evals:
            folder = self.root / f"iteration-{n}" / f"eval-{case.name}"
            try:
                grading = json.loads((folder / "grading.json").read_text(encoding="utf-8"))
                runs = [
                    RunGrade(
                        r["run"],
                        r["seed"],
                        AgentOutput(
                            (folder / ("output.md" if r["run"] == 1 else f"output-run-{r['run']}.md")).read_text(
                                encoding="utf-8"
                            ),
                            error=r.get("error", ""),
                        ),
                        r["assertions"],
                    )
                    for r in grading["runs"]
                ]
            except (OSError, KeyError, TypeError, json.JSONDecodeError):
                return None
            if [a["id"] for a in grading["assertions"]] != [a.id for a in case.assertions]:
                return None
            out.append(CaseResult(case, runs, grading["assertions"]))
        return out

    def write_run_logs(self, log: dict[str, Any], summary: str) -> Path:
        """The seed's 3-3 logs, kept inside the workspace: logs/{ts}/result.json, summary.md, logs/index.json."""
        stamp = str(log["started_at"]).replace(":", "").replace("-", "")
        folder = self.root / "logs" / stamp
        result = {
            "skillName": log["skill_name"], "skillPath": log["skill_path"],
            "baselinePassRate": log["baseline_pass_rate"], "finalPassRate": log["final_pass_rate"],
            "totalIterations": log["total_iterations"], "keptMutations": log["kept_mutations"],
            "discardedMutations": log["discarded_mutations"], "terminationReason": log["termination_reason"],
        }  # fmt: skip
        write_json(folder / "result.json", result)
        (folder / "summary.md").write_text(summary, encoding="utf-8")
        index_path = self.root / "logs" / "index.json"
        index = json.loads(index_path.read_text(encoding="utf-8")) if index_path.is_file() else []
        index = [e for e in index if e.get("timestamp") != stamp] + [{"timestamp": stamp, **result}]
        write_json(index_path, index)
        return folder


def _changed_in(log: dict[str, Any], key: str) -> str:
    for it in reversed(log["iterations"]):
        if it["outcome"] == "kept" and key in it.get("kept_assertions_gained", []):
            return f"Iteration {it['iteration']}"
    return "—"


def render_report(log: dict[str, Any], baseline: dict[str, bool], final: dict[str, bool]) -> str:
    """report.md with the seed's tables (3-1)."""
    base, fin = log["baseline_pass_rate"], log["final_pass_rate"]
    out = [
        f"# Autoresearch Report: {log['skill_name']}", "",
        f"**실행 일시:** {log['started_at']} ~ {log['completed_at']}",
        f"**종료 사유:** {REASON_TEXT.get(log['termination_reason'], log['termination_reason'])}", "",
        "## 결과 요약", "", "| 메트릭 | Baseline | Final | Delta |", "|--------|----------|-------|-------|",
        f"| Mean Pass Rate | {base:.2f} | {fin:.2f} | {fin - base:+.2f} |",
        f"| 총 Iterations | — | {log['total_iterations']} | — |",
        f"| Kept | — | {log['kept_mutations']} | — |",
        f"| Discarded | — | {log['discarded_mutations']} | — |", "",
        "## 효과적이었던 Mutations", "", "| Iteration | 전략 | 가설 | Delta |", "|-----------|------|------|-------|",
    ]  # fmt: skip
    out += [
        f"| {it['iteration']} | {it['strategy_type']} | {_cell(it['hypothesis'])} | {it['delta']} |"
        for it in log["iterations"]
        if it["outcome"] == "kept"
    ]
    out += [
        "",
        "## Assertion-Level 변화",
        "",
        "| Assertion | Baseline | Final | Changed in |",
        "|-----------|----------|-------|------------|",
    ]
    for key in sorted(baseline):
        if baseline[key] != final.get(key):
            out.append(f"| {key} | {_pf(baseline[key])} | {_pf(final.get(key, False))} | {_changed_in(log, key)} |")
    out += [
        "",
        "## 실패한 Mutations (참고용)",
        "",
        "| Iteration | 가설 | 실패 사유 |",
        "|-----------|------|-----------|",
    ]
    out += [
        f"| {it['iteration']} | {_cell(it['hypothesis'])} | {_cell(it['reason'])} |"
        for it in log["iterations"]
        if it["outcome"] != "kept"
    ]
    return "\n".join(out) + "\n"


def _pf(value: bool) -> str:
    return "PASS" if value else "FAIL"


def _cell(text: str) -> str:
    return " ".join(str(text).replace("|", "\\|").split())


def report_from_files(root: Path) -> str:
    """Re-render report.md from autoresearch-log.json and the iterations' benchmark.json files."""
    root = Path(root)
    log_path = root / "autoresearch-log.json"
    if not log_path.is_file():
        from saddler.errors import RunStateError

        raise RunStateError(f"{root} is not a skill-mode workspace (no autoresearch-log.json)")
    log = json.loads(log_path.read_text(encoding="utf-8"))
    base = json.loads((root / "iteration-0" / "benchmark.json").read_text(encoding="utf-8"))["assertion_baseline"]
    final = base
    for it in log["iterations"]:
        bench = root / f"iteration-{it['iteration']}" / "benchmark.json"
        if it["outcome"] == "kept" and bench.is_file():
            final = json.loads(bench.read_text(encoding="utf-8"))["assertions"]
    flat_map = lambda m: {f"{e}/{a}": v for e, d in m.items() for a, v in d.items()}  # noqa: E731
    log.setdefault("completed_at", None)
    return render_report(log, flat_map(base), flat_map(final))
