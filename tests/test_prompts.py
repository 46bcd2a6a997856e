"""Session prompt templates: rendering from requests, overrides, placeholders, exploration variant."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from session_helpers import diagnosis_request, evolution_request, reflection_request

from saddler.agentcli import fill
from saddler.errors import ConfigError
from saddler.sessions.prompts import TEMPLATES, load_template, render, render_system, template_name
from saddler.sessions.schema import result_schema


def test_every_bundled_template_renders_without_leftover_placeholders(tmp_path: Path) -> None:
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


def test_diagnosis_prompt_carries_evidence_phase_and_globs(tmp_path: Path) -> None:
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


def test_exploration_variant_and_web_search_note(tmp_path: Path) -> None:
    req = diagnosis_request(tmp_path / "run", tmp_path / "wt", exploration=True)
    assert template_name("diagnosis_patch", req) == "diagnosis_patch_explore"
    with_web = render("diagnosis_patch", req, web_search=True)
    without = render("diagnosis_patch", req, web_search=False)
    assert "Exploration mode" in with_web and "WebSearch and WebFetch" in with_web
    assert "Web search is not available" in without
    plain = render("diagnosis_patch", diagnosis_request(tmp_path / "run", tmp_path / "wt"), web_search=True)
    assert "Exploration mode" not in plain


def test_reflection_sees_dev_only_as_aggregates(tmp_path: Path) -> None:
    text = render("reflection", reflection_request(tmp_path / "run"))
    assert "parent 0.500, candidate 0.625, best so far 0.500" in text
    assert "- `t1`: F -> P" in text and "- `t2`: P -> P" in text
    assert "divergence point" in text
    assert "+    return [1, 2, 3]" in text


def test_evolution_lists_nodes_edges_and_actions(tmp_path: Path) -> None:
    text = render("evolution", evolution_request(tmp_path / "run"))
    assert "- node 2 (parent 1, iteration 1): accepted, origin -, dev 0.625, batch -, 0 lines changed" in text
    assert "true regressions t2" in text
    assert '{"2": [1], "3": [1, 2]}' in text
    for action in ("`continue`", "`rebase`", "`cherry_pick`", "`revert`"):
        assert action in text


def test_override_template_from_the_run_config(tmp_path: Path) -> None:
    (tmp_path / "mine.md").write_text("Iteration {iteration}: evolve from {current_node_id}. {{literal}}\n")
    text = render("evolution", evolution_request(tmp_path), {"evolution": "mine.md"}, base_dir=tmp_path)
    assert text == "Iteration 3: evolve from 3. {literal}\n"
    assert render_system("reflection").count("Session role: reflection.") == 1


def test_override_errors_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sessions\.prompts\.evolution: no such file"):
        load_template("evolution", {"evolution": "missing.md"}, tmp_path)
    (tmp_path / "bad.md").write_text("{iteration} {not_a_placeholder}")
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \{not_a_placeholder\}"):
        render("evolution", evolution_request(tmp_path), {"evolution": str(tmp_path / "bad.md")})
    with pytest.raises(ConfigError, match="unknown prompt template"):
        load_template("nope")


def test_fill_is_single_pass() -> None:
    assert fill("{a}-{b}", {"a": "{b}", "b": "x"}) == "{b}-x"
