"""The offline backend: deterministic diagnosis, reflection and evolution with no LLM.

- diagnosis_patch reads failure symptoms out of the batch's train traces (the benchmark's symptom
  extractor) and applies the best-matching patch from the benchmark's patch bank that the phase allows,
  that the lineage does not already hold and that is not excluded. An idea whose one change on this parent moved
  no task is open once more (`no_effect`): the author reads that change's diff and writes the patch again only
  when the diff is its own unfinished draft (a missed attempt of `calibrated`), not a patch written in full.
  Where that patch conflicts with a bank patch the lineage holds (two edits of the same code, as `loop_retry_all`
  and `loop_retry_backoff`), it takes that one back and writes its own in its place, as an author rewriting the
  code would (the hypothesis says which it replaces). It never invents a change: with no matching patch it
  returns `no_patch` (the loop counts a stall).
  In exploration mode (plateau) it may also try allowed patches whose symptoms were not seen. How it writes the
  chosen patch is `sessions.proposer`: as meant (`neutral`), or as the paper measured LLM authors do
  (`calibrated`, see `saddler.sessions.proposer`).
  A warm-started run (`saddler init --warm-start`) tries the other run's accepted edges first, in lineage order,
  as they were written (`warm_candidates`), while the phase allows them and the lineage lacks them.
- reflection classifies each batch task as fixed / regressed / still failing / still passing and
  attributes it: true fix or true regression when every repetition agrees and the trace's failure point
  lies in a file the diff touched; stochastic when the failure point lies outside the diff; uncertain
  when repetitions disagree. Dev is seen only as aggregates.
- evolution applies DAG heuristics: revert a net-harmful edge on the base, cherry-pick an edge whose
  true fixes cover tasks the base still fails, rebase onto the best node, or continue.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from evodag.decisions import KEPT_DECISIONS
from saddler.benchmark import BankPatch, Benchmark, RolloutResult
from saddler.config import SessionConfig
from saddler.harness.gitcmd import git
from saddler.scoring import figure
from saddler.sessions.proposer import MISSED_NOTE, Proposal, Proposer, missed_edit
from saddler.sessions.schema import (
    DiagnosisRequest,
    DiagnosisResult,
    EdgeInfo,
    EvolutionRequest,
    EvolutionResult,
    Hypothesis,
    LessonOut,
    ReflectionRequest,
    ReflectionResult,
    SessionStats,
    TaskTransition,
    transition_category,
)
from saddler.warmstart import WarmStart, load_warm_start


def _stats(started: float, outcome: str = "ok") -> SessionStats:
    return SessionStats(
        backend="offline", model="offline-rules", turns=1, duration_s=time.monotonic() - started, outcome=outcome
    )


def _git_apply(worktree: Path, diff: str, reverse: bool = False) -> str:
    """Apply `diff` (or take it back, `reverse`) in the worktree with a 3-way merge; '' on success, else the error
    (worktree reset). `git apply --3way` exits non-zero when a hunk conflicts, so a zero exit needs no check for
    unmerged paths."""
    flags = ["-R"] if reverse else []
    proc = git(["apply", "--3way", *flags, "--whitespace=nowarn", "-"], worktree, check=False, input=diff)
    if proc.returncode == 0:
        return ""
    git(["reset", "-q", "--hard"], worktree, check=False)
    git(["clean", "-qfd"], worktree, check=False)
    return (proc.stderr or proc.stdout or "conflict").strip().splitlines()[-1][:300]


def _apply(worktree: Path, patch: BankPatch, held: Sequence[BankPatch]) -> tuple[str, list[str]]:
    """Write `patch`; where it conflicts with an edit the lineage holds (`held`, root first), write it in that
    edit's place, as an author rewriting the same code would: take back one held patch of the same files (the
    latest first) and apply. ('' or the first error, the ids of the held patches it replaced)."""
    error = _git_apply(worktree, patch.diff)
    if not error:
        return "", []
    for old in reversed(held):
        if old.id == patch.id or not set(old.files) & set(patch.files):
            continue
        if _git_apply(worktree, old.diff, reverse=True) == "" and _git_apply(worktree, patch.diff) == "":
            return "", [old.id]  # a failed step reset the worktree: the next one starts clean
    return error, []


def _write(worktree: Path, proposal: Proposal, held: Sequence[BankPatch] = ()) -> tuple[str, list[str]]:
    """Write what the author proposes into the worktree (`_apply`); ('' or why not, the worktree reset; the held
    patches it replaced). A side edit that does not apply on top is left out."""
    patch = proposal.patch
    if proposal.missed:
        target = worktree / (patch.files[0] if patch.files else "NOTES.md")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as fh:
            fh.write(missed_edit(target.name))
        return "", []
    error, replaced = _apply(worktree, patch, held)
    if error or proposal.side is None:
        return error, replaced
    if _git_apply(worktree, proposal.side.diff):  # reset the worktree: write the patch alone
        return _apply(worktree, patch, held)
    return "", replaced


BANK = "bank:"  # the origin of a node whose edit is a bank patch: `bank:<id>`


def bank_origin(patch: BankPatch) -> str:
    """The origin a node written from `patch` carries."""
    return f"{BANK}{patch.id}"


def held_bank_id(origin: str) -> str | None:
    """The bank id an origin names (`bank:<id>`), or None for every other origin."""
    return origin[len(BANK) :] if origin.startswith(BANK) else None


def warm_candidates(bank: list[BankPatch], warm: WarmStart | None) -> list[BankPatch]:
    """The warm start's accepted edges as patches, oldest first: the bank's own patch for a `bank:<id>` origin,
    else the edge's diff as a patch `warm-<n>` (no symptoms)."""
    if warm is None:
        return []
    by_id = {p.id: p for p in bank}
    out: list[BankPatch] = []
    for n, edge in enumerate(warm.accepted):
        known = by_id.get(held_bank_id(edge.origin) or "")
        patch = known or BankPatch(f"warm-{n}", edge.kind, "warm", (), edge.plan or edge.origin, edge.diff)
        if patch not in out:
            out.append(patch)
    return out


class OfflineBackend:
    """Deterministic rule-based sessions; see the module docstring."""

    name = "offline"
    reads_history = False  # it decides from the request alone: no session view is written for it
    confined_by_saddler = True  # saddler's own rules, no agent: the run folder needs no check around it

    def __init__(self, config: SessionConfig, *, benchmark: Benchmark, run_dir: Path, seed: int) -> None:
        self.config, self.benchmark, self.run_dir, self.seed = config, benchmark, Path(run_dir), seed
        self._bank = benchmark.patch_bank()
        self._proposer = Proposer(config.proposer)
        self._warm = warm_candidates(self._bank, load_warm_start(self.run_dir))

    # diagnosis -----------------------------------------------------------------------------------
    def diagnose_patch(self, request: DiagnosisRequest) -> DiagnosisResult:
        started = time.monotonic()
        failing = [e for e in request.evidence if not e.passed]
        counts: Counter[str] = Counter()
        tasks_by_code: dict[str, set[str]] = {}
        files_by_code: dict[str, set[str]] = {}
        for ev in failing:
            result = RolloutResult(
                task_id=ev.task_id,
                score=ev.score,
                passed=ev.passed,
                disposition=ev.disposition,
                trace_path=ev.trace_path,
                rationale=ev.rationale,
                failure_file=ev.failure_file,
                error_tail=ev.error_tail,
            )
            for sym in self.benchmark.symptoms(result):
                counts[sym.code] += 1
                tasks_by_code.setdefault(sym.code, set()).add(ev.task_id)
                if sym.file:
                    files_by_code.setdefault(sym.code, set()).add(sym.file)
        redo = {origin for origin, diff in request.no_effect.items() if MISSED_NOTE in diff}  # its draft did nothing
        done = set(request.lineage_origins) | set(request.excluded)  # a bank patch has one form, except a draft:
        done |= (set(request.refused) | set(request.no_effect)) - redo
        allowed = [
            p for p in self._bank if p.kind in request.allowed_kinds and bank_origin(p) not in done and p.id not in done
        ]
        rng = random.Random(f"{self.seed}:diagnosis:{request.iteration}:{request.attempt}")
        scored = [(sum(counts[c] for c in p.symptoms), rng.random(), p) for p in allowed]
        ranked = [p for n, _, p in sorted(scored, key=lambda s: (-s[0], s[1])) if n > 0 or request.exploration]
        if not ranked and not any(p.kind in request.allowed_kinds and bank_origin(p) not in done for p in self._warm):
            seen = ", ".join(f"{c}×{n}" for c, n in counts.most_common()) or "none"
            reason = (
                f"no bank patch left for phase {request.phase} (allowed kinds {request.allowed_kinds}) "
                f"matching the symptoms seen ({seen}); {len(failing)} failing task(s)"
            )
            return DiagnosisResult(status="no_patch", reason=reason, stats=_stats(started, "no_patch"))
        warm = [
            p for p in self._warm if p.kind in request.allowed_kinds and bank_origin(p) not in done and p.id not in done
        ]  # a warm start's accepted edges come first, written as they were
        ranked = [p for p in ranked if p not in warm]
        unmatched = [p for p in allowed if p not in ranked and p not in warm]
        label = f"{self.seed}:{request.iteration}:{request.attempt}"
        errors = []
        proposals = [Proposal(p) for p in warm] + self._proposer.choose(ranked, unmatched, request.allowed_kinds, label)
        by_id = {p.id: p for p in self._bank}
        held = [by_id[i] for i in map(held_bank_id, request.lineage_origins) if i in by_id]
        for proposal in proposals:
            patch = proposal.patch
            error, replaced = _write(Path(request.worktree), proposal, held)
            if error:
                errors.append(f"{bank_origin(patch)}: {error}")
                continue
            matched = [c for c in patch.symptoms if counts[c]]
            targets = sorted(set().union(*(tasks_by_code.get(c, set()) for c in matched))) if matched else []
            seen = (
                "; ".join(
                    f"{c} in {counts[c]} failing task(s) "
                    f"({', '.join(sorted(files_by_code.get(c, set()))) or 'no file'})"
                    for c in matched
                )
                or "no matching symptom: exploring an untried patch after a plateau"
            )
            if patch in warm:
                seen = f"accepted in the warm start's run; {seen}"
            if bank_origin(patch) in redo:
                seen += "; written again: its change here moved no task, and its diff was an unfinished draft"
            if replaced:
                seen += f"; replaces {', '.join(BANK + r for r in replaced)} (an edit of the same code)"
            hyp = Hypothesis(
                target_tasks=targets,
                diagnosis=seen,
                plan=patch.description,
                patch_kind=patch.kind,
                subtype=patch.subtype,
                files=list(patch.files),
                origin=bank_origin(patch),
                symptoms=matched,
            )
            return DiagnosisResult(status="patched", hypothesis=hyp, reason="; ".join(errors), stats=_stats(started))
        return DiagnosisResult(
            status="no_patch",
            reason="no candidate patch applies: " + "; ".join(errors)[:2000],
            stats=_stats(started, "no_patch"),
        )

    # reflection ----------------------------------------------------------------------------------
    def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        started = time.monotonic()
        touched = set(request.files_changed)
        lessons = [self._task_lesson(t, touched) for t in request.transitions]
        fixed = sum(1 for lesson in lessons if lesson.category == "fixed")
        regressed = sum(1 for lesson in lessons if lesson.category == "regressed")
        dev = ""
        if request.candidate_dev_mean is not None:
            dev = (
                f"; dev {request.parent_dev_mean if request.parent_dev_mean is not None else float('nan'):.3f}"
                f" -> {request.candidate_dev_mean:.3f} (best {request.best_dev_mean or 0.0:.3f})"
            )
        origin = request.hypothesis.origin if request.hypothesis else "change"
        true_fix = sum(1 for lesson in lessons if lesson.attribution == "true_fix")
        true_reg = sum(1 for lesson in lessons if lesson.attribution == "true_regression")
        overall = "true_fix" if true_fix > true_reg else "true_regression" if true_reg > true_fix else "uncertain"
        if fixed == regressed == 0:
            overall = "uncertain"
        summary = (
            f"{origin} {request.decision}: fixed {fixed}, regressed {regressed} "
            f"({true_fix} true fix, {true_reg} true regression){dev}"
        )
        lessons.append(LessonOut(category="general", attribution=overall, text=summary))
        return ReflectionResult(lessons=lessons, summary=summary, stats=_stats(started))

    @staticmethod
    def _task_lesson(t: TaskTransition, touched: set[str]) -> LessonOut:
        category = transition_category(t.before, t.after)
        consistent = len(set(t.before)) <= 1 and len(set(t.after)) <= 1
        if category == "fixed":
            where = set(t.before_failure_files)
        elif category in ("regressed", "still_failing"):
            where = set(t.after_failure_files)
        else:
            where = set()
        in_diff = bool(where & touched)
        if category in ("fixed", "regressed"):
            if not consistent:
                attribution = "uncertain"
            elif in_diff:
                attribution = "true_fix" if category == "fixed" else "true_regression"
            else:
                attribution = "stochastic"
            text = (
                f"{t.task_id} {category}: failure point {', '.join(sorted(where)) or 'unknown'} "
                f"{'is' if in_diff else 'is not'} in the diff; repetitions {t.before} -> {t.after}"
            )
        else:
            attribution = "uncertain"  # no transition: nothing to attribute
            text = f"{t.task_id} {category}: failure point {', '.join(sorted(where)) or 'none'}"
        return LessonOut(task_id=t.task_id, category=category, attribution=attribution, text=text)

    # evolution -----------------------------------------------------------------------------------
    def evolve(self, request: EvolutionRequest) -> EvolutionResult:
        started = time.monotonic()
        nodes = {n.node_id: n for n in request.nodes}
        edges = {e.edge_id: e for e in request.edges}
        cur, best = nodes[request.current_node_id], nodes[request.best_node_id]
        base, action, why = cur, "continue", f"continue from the latest kept node n{cur.node_id}"
        if best.node_id != cur.node_id and (cur.dev_mean is None or (best.dev_mean or 0.0) > cur.dev_mean):
            base, action = best, "rebase"
            why = f"rebase onto the best node n{best.node_id} (dev {figure(best.dev_mean)}) from n{cur.node_id}"
        lineage = [edges[i] for i in request.lineage_edge_ids.get(base.node_id, []) if i in edges]
        for edge in reversed(lineage):
            harmful = edge.kind in ("patch", "cherry_pick") and edge.true_regressions
            key = f"revert:{edge.edge_id}@{base.node_id}"
            if harmful and len(edge.true_regressions) >= len(edge.true_fixes) and key not in request.tried_actions:
                return EvolutionResult(
                    action="revert",
                    parent_node_id=base.node_id,
                    edge_ids=[edge.edge_id],
                    stats=_stats(started),
                    rationale=f"revert edge {edge.edge_id} ({edge.origin}) on n{base.node_id}: true regressions "
                    f"{edge.true_regressions} outweigh true fixes {edge.true_fixes}",
                )
        failing = set(request.failing_train_tasks.get(base.node_id, []))
        on_lineage = {e.edge_id for e in lineage}
        origins = {e.origin for e in lineage}
        picks: list[tuple[int, int, EdgeInfo]] = []
        for edge in request.edges:
            key = f"cherry_pick:{edge.edge_id}@{base.node_id}"
            if (
                edge.edge_id in on_lineage
                or edge.kind != "patch"
                or edge.child_status not in KEPT_DECISIONS
                or edge.origin in origins
                or key in request.tried_actions
            ):
                continue
            cover = failing & set(edge.true_fixes)
            if cover and len(edge.true_regressions) < len(edge.true_fixes):
                picks.append((-len(cover), edge.edge_id, edge))
        if picks:
            edge = sorted(picks, key=lambda p: (p[0], p[1]))[0][2]
            return EvolutionResult(
                action="cherry_pick",
                parent_node_id=base.node_id,
                edge_ids=[edge.edge_id],
                stats=_stats(started),
                rationale=f"cherry-pick edge {edge.edge_id} ({edge.origin}) onto n{base.node_id}: its true fixes "
                f"{sorted(failing & set(edge.true_fixes))} still fail there",
            )
        return EvolutionResult(action=action, parent_node_id=base.node_id, rationale=why, stats=_stats(started))
