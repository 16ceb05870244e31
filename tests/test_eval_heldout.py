"""Held-out reporting: the book split, the drop, the style table and the verdict, on real runs.

Two small books cut from the bundled novel (chapter I and chapter II as books of their own), a
"public" set and a "held-out" set of questions written from them, the real chunkers, the packaged
MiniLM and a real Qdrant Edge store, through `litrag eval heldout`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from litrag.cli import BUNDLED_BOOK, main
from litrag.eval.heldout import (
    QuestionSet,
    book_key,
    half,
    mrr,
    paired_gap,
    verdicts,
    wins_losses,
)
from litrag.eval.metrics import QuestionScore
from litrag.eval.questions import question_styles
from litrag.ingestion.gutenberg import load_book

ONE, TWO = "books/one_wild.txt", "books/two_wild.txt"
PUBLIC = [
    {
        "id": "p.elmo",
        "book_file": ONE,
        "question": "What kind of dog was Buck's father?",
        "chunk_must_contain": "His father, Elmo, a huge St. Bernard",
    },
    {
        "id": "p.curly",
        "book_file": TWO,
        "question": "Which dog had her face ripped open on the beach?",
        "chunk_must_contain": "Curly's face was ripped open from eye to jaw.",
    },
]
HELDOUT = [
    {
        "id": "h.lottery",
        "book_file": ONE,
        "question": "What gambling habit of the gardener's helper led to the betrayal?",
        "chunk_must_contain": "He loved to play Chinese lottery.",
        "style": "paraphrase",
    },
    {
        "id": "h.hatred",
        "book_file": TWO,
        "question": "Why did Buck come to hate Spitz?",
        "chunk_must_contain": "Spitz ran out his tongue and laughed again, and from that moment",
        "style": "why",
    },
    {
        "id": "h.harness",
        "book_file": TWO,
        "question": "What did Francois fasten on Buck after Curly died?",
        "chunk_must_contain": "Francois fastened upon him an\narrangement of straps and buckles.",
        "style": "who-what",
    },
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("heldout")
    text = load_book(BUNDLED_BOOK).text
    one = text[: text.index("Chapter II.")]
    two = text[text.index("Chapter II.") : text.index("Chapter III.")]
    (root / "books").mkdir()
    (root / ONE).write_text(one, encoding="utf-8")
    (root / TWO).write_text(two, encoding="utf-8")
    for name, rows in (("public.jsonl", PUBLIC), ("frozen.jsonl", HELDOUT)):
        with (root / name).open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    return root


def test_book_keys_and_halves() -> None:
    assert book_key("books/pg11_alice_in_wonderland.txt") == "pg11"
    assert book_key("pg1661_adventures_of_sherlock_holmes.txt") == "pg1661"
    assert half("books/pg84_frankenstein.txt", ("pg11", "pg84")) == "A"
    assert half("books/pg841_other.txt", ("pg11", "pg84")) == "B"  # not a prefix match


def test_mrr_of_ranks() -> None:
    scores = [QuestionScore("a", "b", 1, (1,)), QuestionScore("c", "b", 4, (4,))]
    scores.append(QuestionScore("d", "b", None, (None,)))
    assert mrr(scores) == pytest.approx((1 + 0.25 + 0) / 3)
    assert math.isnan(mrr([]))


def test_paired_gap_and_its_interval() -> None:
    ours = [QuestionScore(f"q{i}", "b", 1, (1,)) for i in range(10)]
    theirs = [QuestionScore(f"q{i}", "b", 2, (2,)) for i in range(10)]
    assert paired_gap(ours, theirs) == pytest.approx((0.5, 0.5, 0.5))
    # half the questions won by one side, half by the other: a gap of 0 whose interval spans 0
    mixed = [QuestionScore(f"q{i}", "b", 1 if i % 2 else None, (None,)) for i in range(10)]
    rev = [QuestionScore(f"q{i}", "b", None if i % 2 else 1, (None,)) for i in range(10)]
    gap, lo, hi = paired_gap(mixed, rev)
    assert gap == pytest.approx(0.0) and lo < 0 < hi
    # only questions both ranked count, and ``keep`` narrows them
    gap, _, _ = paired_gap(ours, theirs[:4], keep=lambda s: s.question_id != "q0")
    assert gap == pytest.approx(0.5)
    assert all(math.isnan(x) for x in paired_gap(ours, []))


def test_wins_losses_count_questions() -> None:
    ours = [QuestionScore("a", "b", 1, (1,)), QuestionScore("c", "b", 3, (3,))]
    ours += [QuestionScore("d", "b", None, (None,)), QuestionScore("e", "b", 2, (2,))]
    theirs = [QuestionScore("a", "b", 2, (2,)), QuestionScore("c", "b", 1, (1,))]
    theirs += [QuestionScore("d", "b", None, (None,)), QuestionScore("e", "b", 2, (2,))]
    assert wins_losses(ours, theirs) == (1, 1, 2)
    assert wins_losses(ours, theirs, keep=lambda s: s.question_id != "a") == (0, 1, 2)


def test_question_styles(data: Path) -> None:
    assert question_styles(data / "frozen.jsonl") == {
        "h.lottery": "paraphrase",
        "h.hatred": "why",
        "h.harness": "who-what",
    }
    assert question_styles(data / "public.jsonl") == {}


def test_cli_heldout_report(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    report = tmp_path / "results.md"
    report.write_text(
        "# litrag results\n\n<!-- section default -->\n## kept\n<!-- /section default -->\n",
        encoding="utf-8",
    )
    argv = ["eval", "heldout", "--public", str(data / "public.jsonl")]
    argv += ["--heldout", str(data / "frozen.jsonl"), "--books", str(data), "--split", "one"]
    argv += ["--chunkers", "litseg-offline,paragraphs@120", "--modes", "bm25,hybrid"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--report", str(report)]
    assert main(argv) == 0
    md = report.read_text(encoding="utf-8")
    assert "<!-- section default -->\n## kept" in md  # the other section stays
    section = md.split("<!-- section held-out -->")[1]
    assert "## Held-out retrieval" in section and "half A = one; half B = two" in section
    table = section.split("### MRR: public -> held-out")[1].split("###")[0]
    rows = [r for r in table.splitlines() if r.startswith("| LitSeg offline | bm25 |")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    public, pub_a, pub_b, frozen, drop = (float(c) for c in cells[3:8])
    assert drop == pytest.approx(frozen - public, abs=0.0015)
    assert public == pytest.approx((pub_a + pub_b) / 2, abs=0.0015)  # one question per half
    assert "| paragraphs ≤120w | hybrid-rsf a=0.3 |" in table
    styles = section.split("MRR by question style")[1].split("###")[0]
    assert "paraphrase (1)" in styles and "who-what (1)" in styles
    assert "Verdict" not in section  # no plain paragraphs in this run: nothing to hold against


def test_verdict_names_the_losing_views(data: Path, tmp_path: Path) -> None:
    """The verdict on a real run: every view is listed as a win or a loss, with the drops."""
    from litrag.eval.questions import load_questions
    from litrag.eval.retrieval import evaluate_retrieval, parse_modes

    sets = []
    for name in ("public", "frozen"):
        run = evaluate_retrieval(
            load_questions(data / f"{name}.jsonl"),
            data,
            ["litseg-offline", "paragraphs"],
            parse_modes(["bm25"]),
            cache_dir=tmp_path / "cache",
            intrinsic=False,
            say=lambda _m: None,
        )
        sets.append(QuestionSet(name, run, question_styles(data / f"{name}.jsonl")))
    (line,) = verdicts(sets[0], sets[1:], ("one",))
    assert line.startswith("- bm25: LitSeg offline ")
    for view in ("public A", "public B", "frozen ", "frozen A", "frozen B"):
        assert view in line
    assert "drop on frozen" in line and "theirs + 0.03" in line and "95% CI" in line
    assert "questions won" in line
    beats = " beats paragraphs" in line
    assert beats == ("loses on" not in line)
