"""The warm-start document `RUN/warm-start.json`: what `saddler init … --warm-start OTHER_RUN` took from another
run of the same harness and benchmark (made by `saddler.run.warmstart`), read by the run when it starts (its
lessons become this run's history) and by the offline backend (its accepted edges are the first patches it tries).

It holds train-side history only, by construction: no rollout, no test score, no per-task dev; a lesson or reason
that names a dev or test task is left out.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

WARM_START_FILE = "warm-start.json"


@dataclass(frozen=True)
class WarmLesson:
    """A lesson of the other run (its text prefixed with where it comes from), or an excluded idea as a lesson."""

    category: str
    attribution: str
    text: str
    task_id: str | None = None


@dataclass(frozen=True)
class WarmEdge:
    """An accepted change along the other run's best lineage, oldest first: `origin` and `plan` of its hypothesis,
    `kind` (capability | steering | mixed), `diff` against its parent, the train tasks it `fixed`."""

    origin: str
    kind: str
    plan: str
    diff: str
    fixed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WarmStart:
    """The other run (`source` folder, `name`), its fingerprints (the harness baseline tree, the benchmark), its
    lessons, excluded ideas and per-task registry as `lessons`, and its `accepted` edges."""

    source: str
    name: str
    harness_tree: str
    benchmark: str
    benchmark_fingerprint: str
    lessons: list[WarmLesson]
    accepted: list[WarmEdge]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WarmStart:
        fields = dict(data)
        fields["lessons"] = [WarmLesson(**x) for x in data["lessons"]]
        fields["accepted"] = [WarmEdge(**x) for x in data["accepted"]]
        return cls(**fields)


def save_warm_start(run_dir: Path, warm: WarmStart) -> Path:
    path = Path(run_dir) / WARM_START_FILE
    path.write_text(json.dumps(warm.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_warm_start(run_dir: Path) -> WarmStart | None:
    """The run's warm start, None when it was not warm-started."""
    path = Path(run_dir) / WARM_START_FILE
    if not path.is_file():
        return None
    return WarmStart.from_json(json.loads(path.read_text(encoding="utf-8")))
