"""`{skill-name}-workspace/evals/evals.json` in the 000 seed's schema, read exactly as users write it.

    {"skill_name": "...", "evals": [{"id": 1, "name": "...", "level": "L1-routing", "prompt": "...",
     "files": ["..."], "expected_output": "...",
     "assertions": [{"id": "...", "description": "...", "check": "keyword", "keywords": ["..."]}]}]}

`level` defaults to L1-routing. An eval without assertions is judged on `expected_output` by an
`llm_judge` assertion (id `expected_output`) and the suite carries a warning, as the seed says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saddler.errors import ConfigError

LEVELS = ("L1-routing", "L2-execution", "L3-quality")
CHECKS = ("keyword", "llm_judge")


@dataclass(frozen=True)
class Assertion:
    """One binary check of an eval's output."""

    id: str
    description: str = ""
    check: str = "keyword"  # keyword | llm_judge
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvalCase:
    """One eval: a prompt (with attached files) for the skill, and the assertions its output must pass."""

    id: int | str
    name: str
    level: str
    prompt: str
    files: tuple[str, ...] = ()
    expected_output: str = ""
    assertions: tuple[Assertion, ...] = ()


@dataclass(frozen=True)
class EvalSuite:
    """The parsed evals.json: `base_dir` is where `files` paths are resolved from."""

    skill_name: str
    evals: tuple[EvalCase, ...]
    path: Path
    base_dir: Path
    warnings: tuple[str, ...] = field(default=())

    def assertion_count(self) -> int:
        return sum(len(e.assertions) for e in self.evals)


def _fail(path: Path, where: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {where}: {message} (see the evals.json schema in benchmarks/skill_evals/README.md)")


def _assertion(path: Path, where: str, raw: Any) -> Assertion:
    if not isinstance(raw, dict) or not str(raw.get("id", "")).strip():
        raise _fail(path, where, "each assertion is an object with an 'id'")
    check = str(raw.get("check", "keyword"))
    if check not in CHECKS:
        raise _fail(path, where, f"check must be one of {', '.join(CHECKS)}, not {check!r}")
    keywords = raw.get("keywords", [])
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        raise _fail(path, where, "keywords must be a list of strings")
    if check == "keyword" and not keywords:
        raise _fail(path, where, "a keyword assertion needs at least one keyword")
    return Assertion(str(raw["id"]), str(raw.get("description", "")), check, tuple(keywords))


def parse_evals(data: Any, path: Path) -> EvalSuite:
    """Validate evals.json content; a schema error is a `ConfigError` naming the eval and field."""
    if not isinstance(data, dict) or not isinstance(data.get("evals"), list) or not data["evals"]:
        raise _fail(path, "<root>", "expected an object with a non-empty 'evals' list")
    cases, warnings, names = [], [], set()
    for i, raw in enumerate(data["evals"]):
        where = f"evals[{i}]"
        if not isinstance(raw, dict):
            raise _fail(path, where, "each eval is an object")
        for key in ("id", "name", "prompt"):
            if key not in raw or raw[key] in ("", None):
                raise _fail(path, where, f"missing {key!r}")
        name = str(raw["name"])
        if name in names:
            raise _fail(path, where, f"duplicate eval name {name!r}")
        names.add(name)
        level = str(raw.get("level") or "L1-routing")
        if level not in LEVELS:
            raise _fail(path, where, f"level must be one of {', '.join(LEVELS)}, not {level!r}")
        files = raw.get("files", [])
        if not isinstance(files, list):
            raise _fail(path, where, "files must be a list of paths")
        expected = str(raw.get("expected_output", ""))
        raw_assertions = raw.get("assertions") or []
        assertions = tuple(_assertion(path, f"{where}.assertions[{j}]", a) for j, a in enumerate(raw_assertions))
        if not assertions:
            if not expected:
                raise _fail(path, where, "an eval without assertions needs expected_output")
            warnings.append(
                f"eval {name!r} has no assertions: expected_output is judged by llm_judge "
                "(low accuracy; add keyword assertions)"
            )
            assertions = (Assertion("expected_output", expected, "llm_judge"),)
        cases.append(
            EvalCase(raw["id"], name, level, str(raw["prompt"]), tuple(str(f) for f in files), expected, assertions)
        )
    skill_name = str(data.get("skill_name") or path.parent.parent.name.removesuffix("-workspace"))
    return EvalSuite(skill_name, tuple(cases), path, path.parent.parent.parent, tuple(warnings))


def load_evals(path: Path) -> EvalSuite:
    """Read and validate an evals.json file (`ConfigError` when missing or malformed)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"{path}: no evals.json; write it in the schema of benchmarks/skill_evals/README.md "
            "(EVAL.md's binary criteria, one eval per case)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from exc
    return parse_evals(data, path)


def find_evals(skill_dir: Path, skill_name: str) -> Path | None:
    """`{skill-name}-workspace/evals/evals.json` inside the skill, in a folder above it up to the repository root,
    or beside that repository."""
    rel = Path(f"{skill_name}-workspace") / "evals" / "evals.json"
    skill_dir = Path(skill_dir).resolve()
    stop = False
    for base in (skill_dir, *skill_dir.parents):
        if (base / rel).is_file():
            return base / rel
        if stop:
            break
        stop = (base / ".git").exists()
    return None
