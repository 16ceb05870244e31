"""Where the benchmark scripts find the books and the question sets: the public GutenQA set in
``data/`` and the frozen development sets kept in ``data/questions``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
QUESTIONS = ROOT / "data" / "questions"
# The held-out sets a benchmark reports by default: the frozen development set and the set
# written blind to chunk boundaries (blind_positions.py). dev_paraphrase and dev_light are
# rewordings of public questions (they measure the public set again): pass them with --heldout
# as a paraphrase-robustness view, not as held-out evidence.
SETS = {
    "public": DATA / "gutenqa" / "questions.jsonl",
    "frozen": QUESTIONS / "dev_frozen.jsonl",
    "blind": QUESTIONS / "blind_frozen.jsonl",
}


def by_half(rows: list[dict], half_a: set[str]) -> dict[str, list[dict]]:
    """Rows (each with ``set`` and ``book``) grouped by set, and by set and book half: "public",
    "public A", "public B" (half A: the books in ``half_a``)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        half = "A" if r["book"] in half_a else "B"
        for g in (r["set"], f"{r['set']} {half}"):
            groups.setdefault(g, []).append(r)
    return groups
