"""Shared fixtures (the plugin modules below) and options: live tests call real LLM APIs and spend money: opt in
with `--run-live` (and a key).

A live test names the variables that can hold its key: `@pytest.mark.live(keys=("OPENAI_API_KEY",))`; the
default is Anthropic's. The marker is read from the item itself (a keyword match would also catch any folder
called `live` on the path).
"""

from __future__ import annotations

import os

import pytest

ANTHROPIC_KEYS = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
# The shared fixtures, one plugin module per kind of thing they build. Tests request them by name and import
# nothing from these modules but types, for annotations (under TYPE_CHECKING).
pytest_plugins = [
    "plugins.runs",  # make_run, dag_signature, run_git, open_run_context: run folders, opened
    "plugins.repos",  # source_repo, harness_files, git_in, write_files, skill_repo: git repositories
    "plugins.banks",  # template_repo, apply_patches, git_check: the simulated benchmarks' patch banks
    "plugins.stores",  # fixture_dag, counting_clock: a small deterministic EvoDAG
    "plugins.reports",  # open_store, build_run: a realistic finished run for reports, status, plot, export
    "plugins.sessions",  # make_worktree, diagnosis_request, reflection_request, evolution_request
    "plugins.executors",  # make_harness, make_job, executor_config, fakes_importable, require_sandbox, ...
    "plugins.fleet",  # fleet_setup: the fleet fixture project, a fake claude, fleet.json
    "plugins.clis",  # outside, fakes, records, command_backend: fake claude / codex / pi CLIs on PATH
    "plugins.docs",  # docs, all_docs, readme, repo_root: the markdown docs parsed
    "plugins.clitree",  # cli_trees, check_command, config_path_error: the CLIs' command trees, doc checkers
    "plugins.waits",  # wait_until: poll for another process's effect
]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-live", action="store_true", default=False, help="run tests that call a real LLM API")
    parser.addoption(
        "--run-real-clis",
        action="store_true",
        default=False,
        help="install the real claude, codex and pi CLIs (npm) and run saddler with each against a loopback model",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run_live = config.getoption("--run-live", default=False)
    real = config.getoption("--run-real-clis", default=False)
    for item in items:
        if item.get_closest_marker("real_clis") is not None and not real:
            item.add_marker(pytest.mark.skip(reason="real-CLI tier: pass --run-real-clis (installs the CLIs with npm)"))
        marker = item.get_closest_marker("live")
        if marker is None:
            continue
        keys = tuple(marker.kwargs.get("keys", ANTHROPIC_KEYS))
        if not run_live:
            item.add_marker(pytest.mark.skip(reason="live test: pass --run-live to call a real API"))
        elif not any(os.environ.get(k) for k in keys):
            item.add_marker(pytest.mark.skip(reason=f"live test: set {' or '.join(keys)}"))
