"""The benchmark registry: short names, `module:Class` plugins, clear errors."""

from __future__ import annotations

import pytest

from saddler.benchmark import is_known_benchmark, load_benchmark
from saddler.errors import UnknownNameError


def test_short_name_and_module_path_load_the_same_class() -> None:
    by_name = load_benchmark("opsdesk")
    by_path = load_benchmark("benchmarks.opsdesk:OpsdeskBenchmark", {"noise": 1.0})
    assert type(by_name) is type(by_path) and by_name.fingerprint() == by_path.fingerprint()
    assert is_known_benchmark("my_pkg.bench:MyBench") and not is_known_benchmark("my_pkg.bench:")


def test_unknown_benchmark_names_the_choices() -> None:
    with pytest.raises(UnknownNameError) as err:
        load_benchmark("nope")
    assert str(err.value) == (
        "unknown benchmark 'nope'; available: claude-tasks, command, harbor, inspect, opsdesk, "
        "package.module:Class, repofix, skill-evals"
    )
    assert err.value.exit_code == 2
