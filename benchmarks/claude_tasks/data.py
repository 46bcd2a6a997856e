"""Deterministic task data of claude-tasks: ledgers, policies, questions and expected answers."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

SPLITS = {"acme": "train", "globex": "train", "initech": "dev", "umbrella": "test", "hooli": "test"}
PEOPLE = ["ana", "bo", "chen", "dara", "eli", "fay"]
CATEGORIES = ["travel", "meals", "software", "office"]
VENDORS = ["Northwind", "Contoso", "Fabrikam", "Tailspin", "Litware", "Proseware", "Adatum"]
ROWS = 40


@dataclass(frozen=True)
class Question:
    task_id: str
    group: str
    family: str
    prompt: str
    expected: str


def _rng(group: str) -> random.Random:
    return random.Random(int(hashlib.sha256(group.encode()).hexdigest()[:12], 16))


def ledger_rows(group: str) -> list[dict[str, str]]:
    """The group's expense rows (date, person, category, vendor, amount), in canonical order."""
    rng = _rng(group)
    rows = []
    for i in range(ROWS):
        rows.append(
            {
                "date": f"2025-{1 + i % 12:02d}-{1 + rng.randrange(28):02d}",
                "person": rng.choice(PEOPLE),
                "category": rng.choice(CATEGORIES),
                "vendor": rng.choice(VENDORS),
                "amount": f"{rng.randrange(500, 90000) / 100:.2f}",
            }
        )
    return rows


def ledger_csv(group: str, seed: int) -> str:
    """`ledger.csv` with the rows shuffled by `seed` (the answers do not depend on the order)."""
    rows = ledger_rows(group)
    random.Random(seed).shuffle(rows)
    lines = ["date,person,category,vendor,amount"] + [",".join(r.values()) for r in rows]
    return "\n".join(lines) + "\n"


def meal_limit(group: str) -> int:
    return 20 + 5 * _rng(group + ":policy").randrange(10)


def policy_md(group: str) -> str:
    return (
        f"# {group.title()} expense policy\n\n"
        f"- Daily meal limit: {meal_limit(group)} USD per person.\n"
        "- Travel must be booked through the travel desk.\n"
    )


def questions(group: str) -> list[Question]:
    """The four tasks of one group."""
    rows = ledger_rows(group)
    cat = CATEGORIES[len(group) % len(CATEGORIES)]
    person = PEOPLE[len(group) % len(PEOPLE)]
    total = sum(float(r["amount"]) for r in rows if r["category"] == cat)
    largest = max(rows, key=lambda r: float(r["amount"]))
    return [
        Question(
            f"{group}-total-{cat}",
            group,
            "total_category",
            f"What is the total amount of all '{cat}' expenses in ledger.csv? Answer with two decimals.",
            f"{total:.2f}",
        ),
        Question(
            f"{group}-count-{person}",
            group,
            "count_person",
            f"How many expenses in ledger.csv were filed by {person}?",
            str(sum(1 for r in rows if r["person"] == person)),
        ),
        Question(
            f"{group}-largest-vendor",
            group,
            "largest_vendor",
            "Which vendor received the single largest payment in ledger.csv?",
            largest["vendor"],
        ),
        Question(
            f"{group}-meal-limit",
            group,
            "policy_limit",
            "What is the daily meal limit per person, in USD, according to policy.md?",
            str(meal_limit(group)),
        ),
    ]


def grade(expected: str, answer: str) -> bool:
    """Numbers match within 0.01 (a leading `$` or trailing `USD` is ignored); names case-insensitively."""
    clean = answer.strip().strip(".").replace("$", "").replace("USD", "").replace(",", "").strip()
    try:
        return abs(float(clean) - float(expected)) < 0.01
    except ValueError:
        return clean.lower() == expected.lower()
