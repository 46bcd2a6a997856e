"""The repofix oracle on hand-made end states: a real fix passes; each kind of wrong change fails the check it
should, with a rationale."""

from __future__ import annotations

from benchmarks.repofix.env import Workspace
from benchmarks.repofix.grader import grade
from benchmarks.repofix.repos import REPO_BY_ID
from benchmarks.repofix.tasks import TaskSpec, all_specs, task_files


def _spec(family: str, repo: str | None = None, decoy: bool = False) -> TaskSpec:
    return next(
        s
        for s in all_specs()
        if s.family == family and (repo is None or s.group == repo) and bool(s.params["sites"][0]["decoy"]) == decoy
    )


def _ws(spec: TaskSpec) -> Workspace:
    return Workspace(spec, REPO_BY_ID[spec.group], task_files(spec), rng_key="grader-test", log=lambda event: None)


def _fix(ws: Workspace, index: int = 0, text: str | None = None) -> None:
    site = ws.spec.params["sites"][index]
    before = ws.files[site["path"]]
    start = before.index(f"def {site['func']}(") if site["func"] else 0
    ws.files[site["path"]] = before[:start] + before[start:].replace(site["buggy"], text or site["fixed"][0], 1)


def test_the_checkout_compiles_and_fails_its_hidden_tests() -> None:
    for spec in all_specs():
        ws = _ws(spec)
        for path, text in ws.files.items():
            if path.endswith(".py"):
                compile(text, path, "exec")
        result = grade(spec, ws)
        assert not result.passed and any(name.startswith("f2p:") for name, _ in result.failed), spec.id


def test_a_real_fix_passes_every_check() -> None:
    for family in ("off_by_one", "edge_case", "api_misuse", "wrong_import", "multi_file", "flaky_test"):
        spec = _spec(family)
        ws = _ws(spec)
        for index in range(len(spec.params["sites"])):
            _fix(ws, index)
        result = grade(spec, ws)
        assert (result.passed, result.score, result.rationale) == (True, 1.0, ""), (spec.id, result.rationale)


def test_a_partial_edge_case_fix_fails_only_the_sibling_case() -> None:
    spec = _spec("edge_case", "tinyjson")
    ws = _ws(spec)
    _fix(ws, 0, spec.params["sites"][0]["partial"])
    failed = dict(grade(spec, ws).failed)
    assert list(failed) == [f"f2p:{spec.params['f2p'][1][0]}"]
    assert "only the reported case is handled" in next(iter(failed.values()))


def test_changing_the_shared_default_passes_the_issue_and_breaks_the_other_callers() -> None:
    spec = _spec("api_misuse", "tinyjson")
    helper = spec.params["sites"][0]["helper"]
    ws = _ws(spec)
    ws.files[helper["path"]] = ws.files[helper["path"]].replace(helper["def"], helper["overbroad"])
    result = grade(spec, ws)
    names = [name for name, _ in result.failed]
    assert not any(n.startswith("f2p:") for n in names)
    assert f"p2p:{helper['test_path']}" in names and len(names) >= 2


def test_the_first_occurrence_of_a_repeated_line_is_the_wrong_one() -> None:
    spec = _spec("off_by_one", "logpipe", decoy=True)
    site = spec.params["sites"][0]
    ws = _ws(spec)
    ws.files[site["path"]] = ws.files[site["path"]].replace(site["buggy"], site["fixed"][0], 1)
    failed = dict(grade(spec, ws).failed)
    assert set(failed) == {next(f"f2p:{n}" for n, _, _ in spec.params["f2p"]), f"p2p:{site['test_path']}"}
    assert failed[f"p2p:{site['test_path']}"] == f"test_{site['decoy']} fail: behaviour changed"


def test_style_rules_are_the_repositorys_own() -> None:
    spec = _spec("off_by_one", "mailmerge")  # pep8: 79 columns, single quotes
    ws = _ws(spec)
    _fix(ws, 0, spec.params["sites"][0]["fixed"][0] + "  # a comment long enough to pass the column limit")
    assert [name for name, _ in grade(spec, ws).failed] == ["style"]
    assert "E501 line too long" in dict(grade(spec, ws).failed)["style"]


def test_a_syntax_error_fails_the_module_and_edits_to_tests_do_not_count() -> None:
    spec = _spec("off_by_one", "tinyjson")
    site = spec.params["sites"][0]
    ws = _ws(spec)
    _fix(ws, 0, site["fixed"][0].replace(")", "", 1))
    failed = dict(grade(spec, ws).failed)
    assert "SyntaxError" in failed[f"p2p:{site['test_path']}"] and "f2p:" + spec.params["f2p"][0][0] in failed
    fixed = _ws(spec)
    _fix(fixed, 0)
    fixed.files[site["test_path"]] += "\n\ndef test_extra():\n    assert False\n"
    assert grade(spec, fixed).passed


def test_a_wrong_import_fixed_from_a_stale_build_copy_still_fails() -> None:
    spec = _spec("wrong_import", "geodesy")
    site = spec.params["sites"][0]
    ws = _ws(spec)
    ws.files[site["path"]] = ws.files[site["path"]].replace(site["buggy"], site["slip"])
    failed = dict(grade(spec, ws).failed)
    assert all(name in failed for name in (f"f2p:{n}" for n, _, _ in spec.params["f2p"]))
    assert "the change does not fix it" in failed[f"f2p:{spec.params['f2p'][0][0]}"]
