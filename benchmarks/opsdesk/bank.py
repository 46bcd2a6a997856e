"""The patch bank: real diffs against `harness_templates/opsdesk/`, with metadata in `patch_bank/bank.json`."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from saddler.benchmark import BankPatch

BANK_DIR = Path(__file__).resolve().parent / "patch_bank"


def diff_files(diff: str) -> tuple[str, ...]:
    """Harness-relative paths a unified diff touches (new files included)."""
    files = []
    for match in re.finditer(r"^\+\+\+ (?:b/)?(\S+)|^--- (?:a/)?(\S+)", diff, re.M):
        path = match.group(1) or match.group(2)
        if path != "/dev/null" and path not in files:
            files.append(path)
    return tuple(files)


@lru_cache(maxsize=1)
def bank_metadata() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((BANK_DIR / "bank.json").read_text(encoding="utf-8"))
    return data


def load_bank() -> list[BankPatch]:
    """Every bank patch, in bank order."""
    out = []
    for meta in bank_metadata()["patches"]:
        diff = (BANK_DIR / f"{meta['id']}.patch").read_text(encoding="utf-8")
        out.append(
            BankPatch(
                id=meta["id"],
                kind=meta["kind"],
                subtype=meta["subtype"],
                symptoms=tuple(meta["symptoms"]),
                description=meta["description"],
                diff=diff,
                files=diff_files(diff),
            )
        )
    return out
