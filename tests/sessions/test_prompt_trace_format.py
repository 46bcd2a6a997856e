"""The diagnosis prompt says what the benchmark's traces are (its `trace_format`), not always "JSON lines"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from saddler.sessions.prompts import render


@pytest.mark.parametrize("exploration", [False, True])
def test_the_diagnosis_prompt_carries_the_benchmark_trace_format(
    tmp_path: Path, exploration: bool, diagnosis_request: Callable[..., Any]
) -> None:
    base = diagnosis_request(tmp_path, tmp_path / "wt", exploration=exploration)
    described = base.model_copy(update={"trace_format": "one JSON object: command, seed, metric, stdout, stderr."})
    text = render("diagnosis_patch", described)
    assert "Trace format (as the benchmark describes it): one JSON object: command, seed, metric" in text
    assert "JSON lines" not in text
    silent = render("diagnosis_patch", base)
    assert "Trace format: not declared by the benchmark; each rollout's trace path is a file or its own folder." in (
        silent
    )
