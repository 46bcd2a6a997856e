"""Session prompt templates: rendering from requests, overrides, placeholders, exploration variant."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from saddler.agentcli import fill
from saddler.errors import ConfigError
from saddler.sessions.prompts import TEMPLATES, load_template, render, render_system, template_name
from saddler.sessions.schema import result_schema


def test_every_bundled_template_renders_without_leftover_placeholders(
    tmp_path: Path,
    diagnosis_request: Callable[..., Any],
    evolution_request: Callable[..., Any],
    reflection_request: Callable[..., Any],
) -> None:
    run = tmp_path / "run"
    requests = {
        "diagnosis_patch": diagnosis_request(run, tmp_path / "wt"),
        "reflection": reflection_request(run),
        "evolution": evolution_request(run),
    }
    for role, req in requests.items():
        for result_file in (None, "/tmp/answer.json"):
            text = render(role, req, result_file=result_file)  # type: ignore[arg-type]
            assert re.search(r"\{[a-z_]+\}", text) is None
            assert f"`{req.db_path}`" in text and "`$EVODAG_DB`" in text
            assert json.dumps(result_schema(role), indent=2, sort_keys=True) in text
            assert ("`/tmp/answer.json`" in text) == (result_file is not None)
    assert {"system", "diagnosis_patch", "diagnosis_patch_explore", "reflection", "evolution"} == set(TEMPLATES)


def test_diagnosis_prompt_carries_evidence_phase_and_globs(
    tmp_path: Path, diagnosis_request: Callable[..., Any]
) -> None:
    req = diagnosis_request(tmp_path / "run", tmp_path / "wt")
    text = render("diagnosis_patch", req)
    assert text.startswith("# Diagnosis-Patch session — iteration 3")
    assert "Phase: **capability**. Allowed patch kinds: **capability**." in text
    assert "- protected: `eval/**`, `saddler.toml`" in text
    assert "- `t1` (group g1, family lookup, rep 0, seed 7): score 0.00, FAIL, task_failure" in text
    assert "  - grader: expected 3 results, agent returned none" in text
    assert "  - failure point in: `tools/search.py`" in text
    assert "2 rollouts, 1 failed." in text
    assert "**Steering**" not in text  # only the taxonomy of the allowed kind
    assert "Run `python -m compileall -q .` (the harness's check command)" in text


def test_exploration_variant_and_web_search_note(tmp_path: Path, diagnosis_request: Callable[..., Any]) -> None:
    req = diagnosis_request(tmp_path / "run", tmp_path / "wt", exploration=True)
    assert template_name("diagnosis_patch", req) == "diagnosis_patch_explore"
    with_web = render("diagnosis_patch", req, web_search=True)
    without = render("diagnosis_patch", req, web_search=False)
    assert "Exploration mode" in with_web and "WebSearch and WebFetch" in with_web
    assert "Web search is not available" in without
    plain = render("diagnosis_patch", diagnosis_request(tmp_path / "run", tmp_path / "wt"), web_search=True)
    assert "Exploration mode" not in plain


def test_reflection_sees_dev_only_as_aggregates(tmp_path: Path, reflection_request: Callable[..., Any]) -> None:
    text = render("reflection", reflection_request(tmp_path / "run"))
    assert "parent 0.500, candidate 0.625, best so far 0.500" in text
    assert "- `t1`: F -> P" in text and "- `t2`: P -> P" in text
    assert "divergence point" in text
    assert "+    return [1, 2, 3]" in text


def test_evolution_lists_nodes_edges_and_actions(tmp_path: Path, evolution_request: Callable[..., Any]) -> None:
    text = render("evolution", evolution_request(tmp_path / "run"))
    assert "- node 2 (parent 1, iteration 1): accepted, origin -, dev 0.625, batch -, 0 lines changed" in text
    assert "true regressions t2" in text
    assert '{"2": [1], "3": [1, 2]}' in text
    for action in ("`continue`", "`rebase`", "`cherry_pick`", "`revert`"):
        assert action in text


def test_override_template_from_the_run_config(tmp_path: Path, evolution_request: Callable[..., Any]) -> None:
    (tmp_path / "mine.md").write_text("Iteration {iteration}: evolve from {current_node_id}. {{literal}}\n")
    text = render("evolution", evolution_request(tmp_path), {"evolution": "mine.md"}, base_dir=tmp_path)
    assert text == "Iteration 3: evolve from 3. {literal}\n"
    assert render_system("reflection").count("Session role: reflection.") == 1


def test_override_errors_are_config_errors(tmp_path: Path, evolution_request: Callable[..., Any]) -> None:
    with pytest.raises(ConfigError, match=r"sessions\.prompts\.evolution: no such file"):
        load_template("evolution", {"evolution": "missing.md"}, tmp_path)
    (tmp_path / "bad.md").write_text("{iteration} {not_a_placeholder}")
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \{not_a_placeholder\}"):
        render("evolution", evolution_request(tmp_path), {"evolution": str(tmp_path / "bad.md")})
    with pytest.raises(ConfigError, match="unknown prompt template"):
        load_template("nope")


def test_fill_is_single_pass() -> None:
    assert fill("{a}-{b}", {"a": "{b}", "b": "x"}) == "{b}-x"


def big_evolution_request(run: Path, n: int = 300):
    """A long run: n nodes (a third kept), one edge per node, lessons with attributions on some edges."""
    from saddler.sessions.schema import EdgeInfo, EvolutionRequest, NodeInfo

    nodes = [NodeInfo(node_id=1, parent_id=None, status="baseline", dev_mean=0.4)]
    edges = []
    for i in range(2, n + 1):
        status = "accepted" if i % 3 == 0 else ("rejected" if i % 3 == 1 else "invalid")
        parent = max(j for j in range(1, i) if j == 1 or j % 3 == 0)
        nodes.append(
            NodeInfo(
                node_id=i,
                parent_id=parent,
                status=status,
                origin=f"llm:add-a-verification-step-to-tools-search-py-and-retry-on-empty-results-{i}",
                dev_mean=0.4 + (i % 50) / 100 if status == "accepted" else None,
                batch_after=0.5,
                lines_changed=i % 40,
                iteration=i,
            )
        )
        edges.append(
            EdgeInfo(
                edge_id=i - 1,
                parent_id=parent,
                child_id=i,
                kind="patch",
                origin=nodes[-1].origin,
                child_status=status,
                files=["tools/search.py", "prompts/system.md"],
                fixed=[f"t{i % 7}"],
                regressed=[f"t{i % 5}"] if i % 4 == 0 else [],
                true_fixes=[f"t{i % 7}"] if i % 10 == 0 else [],
            )
        )
    kept = [x.node_id for x in nodes if x.status in ("baseline", "accepted")]
    return EvolutionRequest(
        run_dir=str(run),
        db_path=str(run / "evodag.sqlite"),
        iteration=n + 1,
        current_node_id=n,
        best_node_id=max(kept, key=lambda i: nodes[i - 1].dev_mean or 0),
        nodes=nodes,
        edges=edges,
        lineage_edge_ids={n: list(range(1, 40))},
        failing_train_tasks={n: ["t1", "t2"]},
        allowed_base_ids=kept,
    )


def test_every_prompt_stays_well_under_the_argument_limit_at_300_nodes(tmp_path: Path) -> None:
    req = big_evolution_request(tmp_path)
    text = render("evolution", req)
    assert len(text.encode()) < 60_000, len(text.encode())
    assert "(showing " in text and "of 300 nodes" in text
    assert f"- node {req.current_node_id} (parent " in text and f"- node {req.best_node_id} (parent " in text
    best_line = next(line for line in text.splitlines() if line.startswith(f"- node {req.best_node_id} "))
    assert "accepted" in best_line
    assert "…" in text  # long origins are cut
    assert "`evo-dag node ID` and `evo-dag lineage ID` show any node" in text
    for template in TEMPLATES:
        assert len(load_template(template).encode()) < 12_000


def test_the_evolution_prompt_is_as_long_at_3000_nodes_as_at_300(tmp_path: Path) -> None:
    """Node list, lineage, bases and tried actions are bounded, with a count of what is not shown (issue 23)."""
    sizes = {}
    for n in (300, 3000):
        req = big_evolution_request(tmp_path, n)
        req = req.model_copy(update={"lineage_edge_ids": {n: list(range(1, n // 3))},
                                     "tried_actions": [f"rebase:{i}" for i in range(n)]})  # fmt: skip
        text = render("evolution", req)
        sizes[n] = len(text.encode())
        assert f"and {n - 20} earlier ones)" in text and f"{n // 3 - 31} earlier" in text
        assert "more not listed above: any kept node" in text
    assert sizes[3000] < sizes[300] * 1.15 and sizes[3000] < 30_000, sizes


def test_the_diagnosis_prompt_has_autosaddlers_procedure(tmp_path: Path, diagnosis_request: Callable[..., Any]) -> None:
    text = render("diagnosis_patch", diagnosis_request(tmp_path / "run", tmp_path / "wt"), tool_limits="LIMITS-HERE")
    order = [
        "## Ground rules",
        "LIMITS-HERE",
        "## Step 1: history pass (required, before you open any trace)",
        "evo-dag history",
        "evo-dag scenario TASK_ID",
        "## Step 2: the evidence",
        "Compare repetitions before you blame the harness",
        "update its description and docstring",
        "rewrite the rule that is wrong instead of appending",
        "remove whatever your change contradicts",
        "Python must import, not only compile",
        "## Your answer",
    ]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)


def test_the_tool_limits_come_first_in_every_role(
    tmp_path: Path,
    diagnosis_request: Callable[..., Any],
    evolution_request: Callable[..., Any],
    reflection_request: Callable[..., Any],
) -> None:
    run = tmp_path / "run"
    for role, req in (
        ("diagnosis_patch", diagnosis_request(run, tmp_path / "wt")),
        ("reflection", reflection_request(run)),
        ("evolution", evolution_request(run)),
    ):
        text = render(role, req, tool_limits="Bash runs single commands only (LIMITS)")  # type: ignore[arg-type]
        assert text.index("Bash runs single commands only (LIMITS)") < text.index(
            "## ", text.index("## Ground rules") + 3
        )
        default = render(role, req)  # type: ignore[arg-type]
        assert ("Edit files inside the worktree only" in default) == (role == "diagnosis_patch")
        assert ("This session reads only" in default) == (role != "diagnosis_patch")


def test_reflection_gives_the_measured_category_and_asks_for_root_cause_and_next_step(
    tmp_path: Path, reflection_request: Callable[..., Any]
) -> None:
    from saddler.sessions.schema import TaskTransition

    req = reflection_request(tmp_path / "run")
    req = req.model_copy(
        update={
            "transitions": [
                *req.transitions,
                TaskTransition(task_id="t3", before=[True, False], after=[False, False]),
                TaskTransition(task_id="t4", before=[True], after=[False]),
            ]
        }
    )
    text = render("reflection", req)
    assert "- `t1`: F -> P (fixed)" in text
    assert "- `t2`: P -> P (still_passing)" in text
    assert "- `t3`: PF -> FF (still_failing; repetitions disagree before)" in text
    assert "- `t4`: P -> F (regressed)" in text
    assert "it is a measurement, not your call" in text
    assert "`Root cause: ... Evidence: <divergence point, trace, diff hunk> Next: <" in text
    assert "Compare repetitions" in text


def test_evolution_names_accepted_bases_no_sunk_cost_and_how_to_revert(
    tmp_path: Path, evolution_request: Callable[..., Any]
) -> None:
    req = evolution_request(tmp_path / "run").model_copy(update={"allowed_base_ids": [1, 2]})
    text = render("evolution", req)
    flat = " ".join(text.split())
    assert "`parent_node_id` must be one of the accepted bases: 1, 2. Any other id is refused." in flat
    assert "(no sunk cost)" in flat
    assert "Reverting adds a commit on top of the base; nothing is deleted" in flat
    assert text.index("## Ground rules") < text.index("## The DAG")


def test_a_phase_that_widens_tells_the_author_a_no_patch_is_asked_again(
    tmp_path: Path, diagnosis_request: Callable[..., Any]
) -> None:
    note = (
        "change in this phase. If the fix these failures need is of a kind this phase does not allow, leave the "
        "worktree unchanged and answer `no_patch` naming that kind: this iteration is then asked again with both "
        "kinds allowed."
    )
    for exploration in (False, True):
        req = diagnosis_request(tmp_path / "run", tmp_path / "wt", exploration=exploration)
        assert "If the fix these failures need" not in render("diagnosis_patch", req)
        widening = req.model_copy(update={"widens_on_no_patch": True})
        assert note in " ".join(render("diagnosis_patch", widening).split())
