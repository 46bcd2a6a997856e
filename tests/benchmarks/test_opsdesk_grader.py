"""The opsdesk oracle on hand-made end states: passing states pass, broken ones fail with a rationale."""

from __future__ import annotations

import copy

from benchmarks.opsdesk.env import Env
from benchmarks.opsdesk.grader import grade
from benchmarks.opsdesk.tasks import TaskSpec, all_specs, group_world
from benchmarks.opsdesk.world import GROUP_BY_ID


def _spec(family: str, group: str | None = None) -> TaskSpec:
    return next(s for s in all_specs() if s.family == family and (group is None or s.group == group))


def _env(spec: TaskSpec) -> Env:
    g = GROUP_BY_ID[spec.group]
    return Env(
        copy.deepcopy(group_world(spec.group)[0]),
        transient=0.0,
        send_limit=g.send_limit,
        rng_key="grader-test",
        log=lambda event: None,
    )


def test_schedule_confirm_pass_and_each_failure() -> None:
    spec = _spec("schedule_confirm")
    p = spec.params
    env = _env(spec)
    env.db_events.append(
        {"id": "new", "title": p["title"], "start": p["start_utc"], "minutes": 30, "attendees": [p["email"]]}
    )
    assert grade(spec, env, "done").passed is False  # confirmation missing
    env.outbox.append({"to": p["email"], "subject": f"Confirmed: {p['title']}", "body": "ok"})
    ok = grade(spec, env, "done")
    assert ok.passed and ok.score == 1.0 and ok.rationale == ""
    env.db_events[-1]["start"] = "2026-03-09T00:00Z"
    bad = grade(spec, env, "done")
    assert not bad.passed and bad.score == 0.75
    assert bad.rationale == (
        f"event_time: event starts 2026-03-09T00:00Z, expected {p['start_utc']} ({p['local_time']} local)"
    )


def test_quiet_universe_forbids_unrequested_mail() -> None:
    spec = _spec("schedule", "greyfield")
    p = spec.params
    env = _env(spec)
    env.db_events.append(
        {"id": "new", "title": p["title"], "start": p["start_utc"], "minutes": 30, "attendees": [p["email"]]}
    )
    assert grade(spec, env, "done").passed
    env.outbox.append({"to": p["email"], "subject": "Invitation", "body": "hi"})
    result = grade(spec, env, "done")
    assert not result.passed
    assert result.failed == [("quiet_policy", f"policy forbids unrequested mail, but mailed ['{p['email']}']")]


def test_expense_fields_are_checked_exactly() -> None:
    spec = _spec("file_expense")
    p = spec.params
    env = _env(spec)
    assert grade(spec, env, "").rationale == "expense_filed: 0 expense(s) filed, expected 1"
    env.db_expenses.append(
        {
            "id": "x1",
            "amount_cents": p["amount_cents"],
            "currency": p["currency"],
            "category": p["category"],
            "date": p["date"],
        }
    )
    assert grade(spec, env, "").passed
    env.db_expenses[-1]["amount_cents"] += 1
    assert not grade(spec, env, "").passed
    assert "wrong fields {'amount_cents'" in grade(spec, env, "").rationale


def test_answer_tasks_compare_the_number_in_the_answer() -> None:
    spec = _spec("count_events")
    env = _env(spec)
    want = spec.params["answer"]
    assert grade(spec, env, f"You have {want} meetings.").passed
    wrong = grade(spec, env, f"You have {int(want) + 1} meetings.")
    assert not wrong.passed and wrong.rationale == f"answer: answered '{int(want) + 1}', expected {want}"
    assert not grade(spec, env, None).passed


def test_bulk_lists_the_people_not_notified() -> None:
    spec = _spec("bulk_notify")
    p = spec.params
    env = _env(spec)
    for email in p["emails"][:-1]:
        env.outbox.append({"to": email, "subject": "Update", "body": f"Hi, {p['message']}."})
    result = grade(spec, env, "")
    assert result.rationale == f"all_notified: 1 of {len(p['emails'])} not notified: ['{p['emails'][-1]}']"
