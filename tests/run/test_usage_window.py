"""Issue 21.5: a session stopped by its plan's usage limit waits for the window's reset and is asked again, a run
killed while it waits waits for the same moment when resumed (no finished session paid twice), and `saddler status`
says what it waits for. The clock and sleeping are injected: nothing here waits."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from evodag.store import EvoDAG
from saddler.config import SessionConfig
from saddler.errors import BackendError
from saddler.reporting.status import render_status, status_snapshot
from saddler.run.usage_window import UsageWindow
from saddler.sessions.llm_backend import UsageLimitError

T0 = dt.datetime(2026, 3, 2, 1, 0, tzinfo=dt.UTC).timestamp()


class Clock:
    def __init__(self) -> None:
        self.now = T0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _store(tmp_path: Path) -> tuple[EvoDAG, int]:
    store = EvoDAG(tmp_path / "evodag.sqlite")
    return store, store.create_run({"name": "r", "loop": {}}, 0).id


def test_a_usage_limit_waits_until_the_window_resets_then_goes_on(tmp_path: Path) -> None:
    store, run_id = _store(tmp_path)
    clock, said = Clock(), []
    window = UsageWindow(store, run_id, SessionConfig(), sleep=clock.sleep, clock=clock, say=said.append)
    window.wait()
    assert clock.slept == []  # no window closed yet
    resets = T0 + 3 * 3600 + 600
    window.closed(UsageLimitError("You've hit your 5-hour limit · resets 4:10am (UTC)", resets), "reflection", 2)
    window.wait()
    assert clock.now == pytest.approx(resets + 30)  # a little after the announced minute
    assert any("waiting for the usage window until" in s for s in said)
    window.wait()
    assert len(clock.slept) == 1  # opened: the next session does not wait again


def test_a_killed_wait_resumes_waiting_for_the_same_moment(tmp_path: Path) -> None:
    store, run_id = _store(tmp_path)
    clock = Clock()
    first = UsageWindow(store, run_id, SessionConfig(), sleep=clock.sleep, clock=clock)
    first.closed(UsageLimitError("limit", T0 + 7200), "diagnosis_patch", 1)
    # the process is killed here, before its wait; an hour later the run is resumed
    clock.now += 3600
    again = UsageWindow(store, run_id, SessionConfig(), sleep=clock.sleep, clock=clock)
    again.wait()
    assert clock.slept == [pytest.approx(3600 + 30)]


def test_status_says_what_the_run_waits_for(tmp_path: Path) -> None:
    store, run_id = _store(tmp_path)
    clock = Clock()
    window = UsageWindow(store, run_id, SessionConfig(), sleep=clock.sleep, clock=clock)
    resets = dt.datetime(2026, 3, 2, 4, 10, tzinfo=dt.UTC).timestamp()
    window.closed(UsageLimitError("limit", resets - 30), "reflection", 2)
    snap = status_snapshot(store, tmp_path, run_id)
    assert snap["waiting_until"] == pytest.approx(resets)
    local = dt.datetime.fromtimestamp(resets).astimezone().strftime("%H:%M")
    text = render_status({**snap, "state": "running"})
    assert "waiting for the usage window until " in text and f"{local}\n" in text  # the date too when not today


def test_fallback_model_instead_of_waiting(tmp_path: Path) -> None:
    store, run_id = _store(tmp_path)
    clock, moved = Clock(), []
    cfg = SessionConfig(on_usage_limit="fallback_model", fallback_model="claude-sonnet-4-5")
    window = UsageWindow(store, run_id, cfg, sleep=clock.sleep, clock=clock, use_fallback=lambda: not moved.append(1))
    window.closed(UsageLimitError("limit", T0 + 7200), "evolution", 3)
    window.wait()
    assert clock.slept == [] and moved == [1]
    assert [e.kind for e in store.events(run_id=run_id, kind="session.fallback_model")] == ["session.fallback_model"]


def test_stop_names_the_reset(tmp_path: Path) -> None:
    store, run_id = _store(tmp_path)
    clock = Clock()
    window = UsageWindow(store, run_id, SessionConfig(on_usage_limit="stop"), sleep=clock.sleep, clock=clock)
    with pytest.raises(BackendError, match="resets at"):
        window.closed(UsageLimitError("limit", T0 + 7200), "evolution", 3)


def test_session_calls_ask_again_after_the_wait_and_record_once(tmp_path: Path, make_run, reflection_request) -> None:
    from saddler.run.session_calls import SessionCalls
    from saddler.sessions.schema import ReflectionResult, SessionStats

    store, run_id = _store(tmp_path)
    clock = Clock()
    calls: list[int] = []

    class Backend:
        confined_by_saddler = True

        def reflect(self, request):
            calls.append(1)
            if len(calls) == 1:
                raise UsageLimitError("You've hit your limit · resets 3am (UTC)", T0 + 7200)
            return ReflectionResult(lessons=[], summary="ok", stats=SessionStats(backend="x"))

    window = UsageWindow(store, run_id, SessionConfig(), sleep=clock.sleep, clock=clock)
    session_calls = SessionCalls(store, run_id, Backend(), space=None, run_dir=tmp_path, window=window)  # type: ignore[arg-type]
    store.start_iteration(run_id, 3, 0, ["t1"], phase="capability")
    node = store.add_node(run_id, "a" * 40, None, 0, "baseline", "baseline", "baseline", status="baseline")
    result = session_calls.reflect(reflection_request(tmp_path), node.id)
    assert result.summary == "ok" and len(calls) == 2
    assert clock.slept == [pytest.approx(7200 + 30)]
    assert len(store.sessions(run_id)) == 1
