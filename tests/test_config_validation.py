"""Config validation: every error reported with its dotted path, through the loaders and `saddler validate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from saddler.benchmark import BENCHMARKS
from saddler.cli.app import app
from saddler.config import HarnessConfig, RunConfig, load_harness_config, load_run_config
from saddler.errors import ConfigError
from saddler.run.harness_check import check_harness
from saddler.sessions.registry import BACKENDS

runner = CliRunner()

GOOD_RUN = '[run]\nname = "r1"\nseed = 7\nbenchmark = "opsdesk"\n\n[run.loop]\nbatch_size = 4\n'
GOOD_HARNESS = '[harness]\nname = "h"\n\n[harness.components]\ncapability = ["tools/**"]\nsteering = ["prompts/**"]\n'


def harness_dir(path: Path, toml: str | None = GOOD_HARNESS) -> Path:
    """A harness folder with one file per component glob of GOOD_HARNESS (and its saddler.toml, if given)."""
    for rel in ("tools/search.py", "prompts/system.md"):
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text("x = 1\n")
    if toml is not None:
        (path / "saddler.toml").write_text(toml)
    return path


def folder(
    tmp_path: Path, run: str | None = GOOD_RUN, harness: str | None = GOOD_HARNESS, sub: str = "harness"
) -> Path:
    root = tmp_path / "runs" / "r1"
    root.mkdir(parents=True)
    if run is not None:
        (root / "saddler.toml").write_text(run)
    if harness is not None:
        harness_dir(root / sub, harness)
    return root


def validate(path: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["validate", str(path), *extra])
    return result.exit_code, result.stdout


def test_valid_run_folder_with_harness(tmp_path: Path) -> None:
    root = folder(tmp_path, harness=GOOD_HARNESS)
    assert validate(root) == (0, "ok\n")
    code, out = validate(root, "--json")
    assert code == 0
    assert json.loads(out) == {"ok": True, "checked": ["saddler.toml", "harness/saddler.toml"], "errors": []}
    cfg = load_run_config(root)
    assert (cfg.name, cfg.seed, cfg.loop.batch_size, cfg.loop.repetitions) == ("r1", 7, 4, 1)


def test_harness_folder_directly(tmp_path: Path) -> None:
    h = harness_dir(tmp_path / "h")
    code, out = validate(h, "--json")
    assert (code, json.loads(out)) == (0, {"ok": True, "checked": ["saddler.toml"], "errors": []})
    assert load_harness_config(h).components.protected == ["saddler.toml"]
    assert validate(h / "saddler.toml") == (0, "ok\n")


def test_unknown_key_wrong_type_and_nested_value(tmp_path: Path) -> None:
    run = (
        '[run]\nseeed = 1\nseed = "seven"\n\n[run.loop]\nbatch_size = 0\n\n'
        '[run.executor]\nkind = "k8s"\nworkers = 2.5\n'
    )
    root = folder(tmp_path, run=run)
    code, out = validate(root)
    assert code == 2
    assert out.splitlines() == [
        "saddler.toml: run.seed: Input should be a valid integer",
        "saddler.toml: run.loop.batch_size: Input should be greater than or equal to 1",
        "saddler.toml: run.executor.kind: Input should be 'local' or 'ray'",
        "saddler.toml: run.executor.workers: Input should be a valid integer",
        "saddler.toml: run.seeed: Extra inputs are not permitted",
    ]
    code, out = validate(root, "--json")
    assert code == 2
    doc = json.loads(out)
    assert doc["ok"] is False and len(doc["errors"]) == 5
    with pytest.raises(ConfigError) as exc:
        load_run_config(root)
    assert "  run.loop.batch_size: Input should be greater than or equal to 1" in str(exc.value).splitlines()
    assert exc.value.exit_code == 2


def test_policy_names_and_a_removed_value(tmp_path: Path) -> None:
    run = GOOD_RUN + '\n[run.policies]\nranking = "best_batch"\nacceptance = "vibes"\nevolution_bases = "all"\n'
    code, out = validate(folder(tmp_path, run=run))
    assert code == 2
    assert out.splitlines() == [
        "saddler.toml: run.policies.acceptance: Input should be 'sequential', 'strict_mean' or 'pass_count'",
        "saddler.toml: run.policies.ranking: 'best_batch' was removed: batch scores of different "
        "mini-batches are not comparable, so no node can be ranked by them; use 'best_dev' (the default) or "
        "'latest_kept'",
        "saddler.toml: run.policies.evolution_bases: Input should be 'kept' or 'any'",
    ]
    ok = GOOD_RUN + '\n[run.policies]\nranking = "latest_kept"\nacceptance = "pass_count"\nevolution_bases = "any"\n'
    assert validate(folder(tmp_path / "ok", run=ok)) == (0, "ok\n")


def test_errors_in_the_runs_harness_are_reported_too(tmp_path: Path) -> None:
    harness = '[harness]\n\n[harness.components]\ncapability = "tools/**"\n\n[harness.structure]\nlint = 1\n'
    run = GOOD_RUN.replace("[run.loop]", 'harness = "hx"\n\n[run.loop]')
    root = folder(tmp_path, run=run, harness=harness, sub="hx")
    code, out = validate(root)
    assert code == 2
    assert out.splitlines() == [
        "hx/saddler.toml: harness.components.capability: Input should be a valid list",
        "hx/saddler.toml: harness.structure.lint: Extra inputs are not permitted",
    ]


def test_malformed_globs_are_named_by_index(tmp_path: Path) -> None:
    h = harness_dir(
        tmp_path / "h",
        '[harness.components]\nsteering = ["prompts/**", "p/[z-a]"]\n[harness.structure]\nskill_files = ["[b-a]"]\n',
    )
    code, out = validate(h)
    assert code == 2
    assert out.splitlines() == [
        "saddler.toml: harness.components.steering.1: invalid glob 'p/[z-a]': bad character range z-a at position 3",
        "saddler.toml: harness.structure.skill_files.0: invalid glob '[b-a]': bad character range b-a at position 1",
    ]


def test_unknown_benchmark_and_backend_names(tmp_path: Path) -> None:
    root = folder(tmp_path, run='[run]\nbenchmark = "nope"\n\n[run.sessions]\nbackend = "gpt"\n')
    assert {"opsdesk", "command"} <= set(BENCHMARKS) and {"offline", "claude"} <= set(BACKENDS)
    code, out = validate(root)
    assert code == 2
    benchmarks = ", ".join(sorted([*BENCHMARKS, "package.module:Class"]))
    assert out.splitlines() == [
        f"saddler.toml: run.benchmark: unknown benchmark 'nope'; available: {benchmarks}",
        f"saddler.toml: run.sessions.backend: unknown backend 'gpt'; available: {', '.join(sorted(BACKENDS))}",
    ]


def test_bad_toml_syntax_missing_file_and_empty_file(tmp_path: Path) -> None:
    root = folder(tmp_path, run="[run]\nseed = = 1\n")
    code, out = validate(root)
    assert code == 2
    assert out == "saddler.toml: invalid TOML: Invalid value (at line 2, column 8)\n"
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_run_config(root)
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = validate(empty)
    assert (code, out) == (2, "saddler.toml: no such file (run `saddler init` first, or pass the right folder)\n")
    (empty / "saddler.toml").write_text("# nothing\n")
    code, out = validate(empty, "--json")
    assert code == 2 and json.loads(out)["errors"] == [
        "saddler.toml: no [run] or [harness] table; run `saddler init` to create a run folder"
    ]
    code, out = validate(tmp_path / "missing")
    assert (code, out) == (2, f"{tmp_path / 'missing'}: no such folder; pass a run folder or a harness folder\n")


def test_missing_run_table_when_loading_a_run(tmp_path: Path) -> None:
    root = folder(tmp_path, run=GOOD_HARNESS)
    with pytest.raises(ConfigError, match=r"missing \[run\] table"):
        load_run_config(root)
    assert load_harness_config(root).name == "h"
    assert load_harness_config(tmp_path) == HarnessConfig()


NO_CAPABILITY_FILE = (
    "harness.components.capability: no editable file for the capability phase (allowed: capability); add globs "
    'that match files, or set run.policies.phases = "none"'
)


@pytest.mark.parametrize(
    ("policies", "phase_errors"),
    [
        ({}, [NO_CAPABILITY_FILE]),
        ({"capability_epochs": 0}, []),  # by epochs, zero capability epochs: the run starts in steering
        ({"capability_epochs": 0, "phase_transition": "full_coverage"}, [NO_CAPABILITY_FILE]),  # covers tasks first
        ({"phases": "none"}, []),
    ],
)
def test_each_phase_the_schedule_goes_through_needs_an_editable_file(
    policies: dict[str, object], phase_errors: list[str]
) -> None:
    harness = HarnessConfig.model_validate({"components": {"capability": ["tools/**"], "steering": ["prompts/**"]}})
    glob_error = "harness.components.capability.0: 'tools/**' matches no file in the harness"
    files = ["prompts/system.md", "saddler.toml"]
    errors = check_harness(harness, files, RunConfig.model_validate({"policies": policies}))
    assert errors == [glob_error, *phase_errors]


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 50),
    reps=st.integers(1, 10),
    seed=st.integers(-(2**31), 2**31),
    dev_eval=st.sampled_from(["on_accept", "always", "never"]),
    protected=st.lists(st.text("abc/*", min_size=1, max_size=6), max_size=3),
)
def test_config_round_trip(batch: int, reps: int, seed: int, dev_eval: str, protected: list[str]) -> None:
    cfg = RunConfig.model_validate(
        {"seed": seed, "loop": {"batch_size": batch, "repetitions": reps}, "policies": {"dev_eval": dev_eval}}
    )
    assert RunConfig.model_validate(cfg.model_dump()) == cfg
    assert RunConfig.model_validate_json(cfg.model_dump_json()) == cfg
    harness = HarnessConfig.model_validate({"components": {"protected": protected}})
    assert "saddler.toml" in harness.components.protected
    assert HarnessConfig.model_validate(harness.model_dump()) == harness
