"""The offline backend's patch authors: `neutral` writes what matches best; `calibrated` behaves as the paper measured
LLM authors do (its rates are the published ones, checked here over many seeded draws)."""

from __future__ import annotations

from pathlib import Path

from saddler.benchmark import BankPatch
from saddler.sessions.offline import _write
from saddler.sessions.proposer import MISSED_NOTE, Proposal, Proposer, missed_edit


def _patch(pid: str, kind: str, subtype: str) -> BankPatch:
    return BankPatch(pid, kind, subtype, ("sym",), f"fix {pid}", "", (f"{pid}.py",))


TOOL, LOOP = _patch("tool_fix", "capability", "tool"), _patch("loop_fix", "capability", "loop")
PROMPT, HOOK = _patch("prompt_fix", "steering", "prompt"), _patch("hook_extra", "steering", "hook")


def test_neutral_writes_every_ranked_patch_as_meant_in_rank_order() -> None:
    out = Proposer("neutral").choose([TOOL, PROMPT], [HOOK], ["capability", "steering"], "0:1:0")
    assert out == [Proposal(TOOL), Proposal(PROMPT)]


def test_calibrated_prefers_steering_when_both_kinds_are_allowed_and_match() -> None:
    firsts = [
        Proposer("calibrated").choose([TOOL, PROMPT], [], ["capability", "steering"], str(i))[0] for i in range(2000)
    ]
    share = sum(p.patch.kind == "steering" for p in firsts) / len(firsts)
    assert 0.89 < share < 0.94  # STEERING_SHARE_UNSTRUCTURED = 0.915
    only_capability = Proposer("calibrated").choose([TOOL, PROMPT], [], ["capability"], "1")
    assert [p.patch for p in only_capability] == [TOOL, PROMPT]  # the phase decides: no reordering


def test_calibrated_capability_patches_miss_at_the_published_rates_and_steering_never() -> None:
    def missed(patch: BankPatch) -> float:
        draws = [Proposer("calibrated").choose([patch], [], ["capability"], str(i))[0] for i in range(3000)]
        return sum(p.missed for p in draws) / len(draws)

    assert abs(missed(TOOL) - 0.17) < 0.025 and abs(missed(LOOP) - 0.29) < 0.03
    assert missed(PROMPT) == 0.0


def test_calibrated_side_edits_come_from_the_unmatched_patches_of_the_same_kind() -> None:
    draws = [Proposer("calibrated").choose([PROMPT], [HOOK, TOOL], ["steering"], str(i))[0] for i in range(3000)]
    sides = [p.side for p in draws if p.side is not None]
    assert abs(len(sides) / len(draws) - 0.17) < 0.025 and set(sides) == {HOOK}
    again = [Proposer("calibrated").choose([PROMPT], [HOOK, TOOL], ["steering"], str(i))[0] for i in range(3000)]
    assert again == draws  # seeded


def test_a_missed_attempt_is_a_comment_in_the_patch_file(tmp_path: Path) -> None:
    assert missed_edit("prompts/system.md") == f"<!-- {MISSED_NOTE} -->\n"
    assert missed_edit("tools/calendar.py") == f"# {MISSED_NOTE}\n"
    (tmp_path / "tool_fix.py").write_text("x = 1\n")
    assert _write(tmp_path, Proposal(TOOL, missed=True)) == ("", [])
    assert (tmp_path / "tool_fix.py").read_text() == f"x = 1\n# {MISSED_NOTE}\n"
    assert "verify" not in MISSED_NOTE.lower() and "retry" not in MISSED_NOTE.lower()
