"""Where the benchmark scripts find the books and the question sets: the public GutenQA set in
``../shared/data`` and the frozen development sets kept in ``benchmarks/questions``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
QUESTIONS = ROOT / "benchmarks" / "questions"
SETS = {
    "public": DATA / "gutenqa" / "questions.jsonl",
    "frozen": QUESTIONS / "dev_frozen.jsonl",
    "paraphrase": QUESTIONS / "dev_paraphrase.jsonl",
    "light": QUESTIONS / "dev_light.jsonl",
}
