"""`policies.phase_widening = "on_no_patch"` through each real CLI (the real-CLI tier: `pytest --run-real-clis
tests/real`): an iteration the evidence narrows to Capability, whose model answers `no_patch` naming the steering
fix it needs, is asked again in `mixed` in the same iteration, and the model's edit there becomes the candidate.

What the real CLIs add over the offline e2e test (tests/e2e/test_phase_widening.py): the narrowed prompt the CLI
actually sends carries the widening sentence, a CLI's `no_patch` (structured output for claude, final text for
codex and pi) is read as one, and the widened attempt runs the CLI again, whose edit becomes the candidate."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loopback_model import LoopbackModel, Reply, SessionPlayer, is_diagnosis, request_text, tool_names

pytestmark = [pytest.mark.real_clis, pytest.mark.slow]
WIDEN_SENTENCE = "this iteration is then asked again with both kinds allowed"


class StrictPhasePlayer(SessionPlayer):
    """The loopback model as an author whose fix is a steering edit: in a diagnosis allowed only capability
    patches it answers `no_patch` at once, naming the kind; otherwise it plays as `SessionPlayer` does. Keeps the
    allowed kinds and whether the widening sentence was there, per diagnosis request it answered first."""

    def __init__(self) -> None:
        self.diagnoses: list[tuple[str, bool]] = []

    def __call__(self, api: str, body: dict[str, Any], server: LoopbackModel) -> Reply:
        from fake_agent import allowed_kinds

        tools = tool_names(api, body)
        text = request_text(api, body)
        kinds = ", ".join(allowed_kinds(text))
        if tools and kinds and is_diagnosis(text):
            if not (self.diagnoses and self.diagnoses[-1] == (kinds, WIDEN_SENTENCE in text)):
                self.diagnoses.append((kinds, WIDEN_SENTENCE in text))
            if kinds == "capability":
                answer = {"status": "no_patch", "reason": "the fix is a steering edit (the system prompt)"}
                return self.answer(tools, body, answer)
        return super().__call__(api, body, server)


@pytest.mark.parametrize("preset", ["claude", "codex", "pi"])
def test_a_narrowed_no_patch_is_asked_again_in_mixed_through_each_real_cli(
    preset: str, clis: dict[str, Path], run_preset: Callable[..., Path]
) -> None:
    player = StrictPhasePlayer()
    model = LoopbackModel(responder=player).start()
    try:
        run_dir = run_preset(
            preset, model.url, seed=0, loop__max_iterations="1",
            policies__capability_epochs="0.0", policies__phase_widening='"on_no_patch"',
        )  # fmt: skip
    finally:
        model.stop()
    # the narrowed prompt the CLI sent told the model a no_patch widens; the widened one allowed both kinds
    assert player.diagnoses == [("capability", True), ("capability, steering", False)], player.diagnoses
    db = sqlite3.connect(run_dir / "evodag.sqlite")
    sessions = db.execute(
        "SELECT attempt, outcome FROM sessions WHERE role = 'diagnosis_patch' AND iteration = 1 ORDER BY attempt"
    ).fetchall()
    assert sessions == [(0, "no_patch"), (1, "ok")], sessions
    moves = [json.loads(p) for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'phase.moved' ORDER BY id")]
    widened = [m for m in moves if m.get("widened")]
    assert [(m["iteration"], m["from"], m["to"], m["attempt"]) for m in widened] == [(1, "capability", "mixed", 1)]
    # the widened attempt's edit, made with the CLI's own tool, is the iteration's candidate
    [(phase, candidate)] = db.execute("SELECT phase, candidate_id FROM iterations WHERE number = 1").fetchall()
    assert phase == "mixed" and candidate is not None, (phase, candidate)
    assert not db.execute("SELECT COUNT(*) FROM events WHERE kind = 'session.escaped'").fetchone()[0]
