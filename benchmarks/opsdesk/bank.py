"""The patch bank: real diffs against `harness_templates/opsdesk/`, with metadata in `patch_bank/bank.json`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmarks.simkit import bank_metadata_of, load_bank_dir
from saddler.benchmark import BankPatch

BANK_DIR = Path(__file__).resolve().parent / "patch_bank"


@lru_cache(maxsize=1)
def bank_metadata() -> dict[str, Any]:
    return bank_metadata_of(str(BANK_DIR))


def load_bank() -> list[BankPatch]:
    """Every bank patch, in bank order."""
    return load_bank_dir(str(BANK_DIR))
