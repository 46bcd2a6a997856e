"""The 000 seed's rules as pure functions: Phase 0 checks and the circuit breaker (2-7); its decision table (2-6) is
the `assertion_veto` policy (`saddler.policies.seed_acceptance`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from benchmarks.skill_evals.grading import CaseResult
from saddler.errors import ConfigError
from saddler.harness.structure import parse_frontmatter
from saddler.modes.skill.program import Program, SkillOptions
from saddler.policies.seed_acceptance import EPS
from saddler.policies.stopping import budget_spent


def stop_reason(n: int, opts: SkillOptions, best: float, stalls: int, program: Program, tried: set[str]) -> str | None:
    """The seed's circuit breaker (2-7), checked after every iteration (and before the first)."""
    if stalls >= opts.stall_limit:
        return "stall_limit"
    if best >= opts.target_pass_rate - EPS:
        if not program.force_at_least_one_iteration:
            return "target_achieved"
        if n >= 1 and all(s.key in tried for s in program.strategies):
            return "target_achieved"
    return budget_spent(n, opts.max_iterations)


def stop_message(reason: str, opts: SkillOptions, program: Program, left: list[str]) -> str:
    """What the run says when the circuit breaker stops it, in the seed's words (2-7); `left` = the failing
    assertions still failing (named when no hypothesis is left for them)."""
    if reason == "stall_limit":
        return f"연속 {opts.stall_limit}회 개선 없음. 다른 전략이 필요합니다."
    if reason == "target_achieved":
        done = f"목표 pass_rate {opts.target_pass_rate} 달성!"
        return f"{done} 모든 program.md 전략을 시도한 후 종료" if program.force_at_least_one_iteration else done
    if reason == "max_iterations":
        return "최대 iteration 수 도달."
    return (
        "시도할 가설이 남지 않았습니다 (no untried hypothesis left outside the mutation exclusions and api issues) "
        f"for: {', '.join(left) or 'nothing'}"
    )


def eval_seed(seed: int, name: str, run: int) -> int:
    """The seed of eval `name`'s run `run`: the same in every iteration, so candidates face the same draws."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}:{run}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def resolve_skill(skill_dir: Path) -> tuple[Path, str]:
    """(SKILL.md path, skill name) after the seed's Phase 0 checks (SKILL.md and EVAL.md are required)."""
    skill_dir = Path(skill_dir).resolve()
    skill_md = skill_dir / "SKILL.md"
    if not skill_md.is_file():
        raise ConfigError(f"{skill_md} not found: skill mode needs the skill folder holding SKILL.md")
    if not (skill_dir / "EVAL.md").is_file():
        raise ConfigError(
            f"{skill_dir / 'EVAL.md'} not found: EVAL.md를 먼저 작성하세요 (write EVAL.md first: the "
            "binary criteria the evals check)"
        )
    fields, problems = parse_frontmatter(skill_md.read_text(encoding="utf-8"))
    if fields is None or not fields.get("name"):
        raise ConfigError(f"{skill_md}: frontmatter must parse and name the skill: {'; '.join(problems) or 'no name'}")
    return skill_md, fields["name"]


@dataclass
class Best:
    """The current best SKILL.md: its text, grading, mean pass rate, node and commit."""

    text: str
    results: list[CaseResult]
    rate: float
    node_id: int
    commit: str
