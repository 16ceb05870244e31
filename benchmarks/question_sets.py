"""Where the benchmark scripts find the books and the question sets: the public GutenQA set in
``../shared/data`` and the frozen development sets kept in ``benchmarks/questions``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
QUESTIONS = ROOT / "benchmarks" / "questions"
# The held-out sets a benchmark reports by default: the frozen development set and the set
# written blind to chunk boundaries (blind_positions.py). dev_paraphrase and dev_light are
# rewordings of public questions (they measure the public set again): pass them with --heldout
# as a paraphrase-robustness view, not as held-out evidence.
SETS = {
    "public": DATA / "gutenqa" / "questions.jsonl",
    "frozen": QUESTIONS / "dev_frozen.jsonl",
    "blind": QUESTIONS / "blind_frozen.jsonl",
}
