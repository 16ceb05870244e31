"""The frozen reader questions and their key-fact scorer (litrag.eval.keyfacts)."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from litrag.eval.keyfacts import (
    CLASSES,
    ReaderQuestion,
    is_abstention,
    load_reader_questions,
    normalise,
    score_answer,
    summarise,
)

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "data" / "questions" / "reader_questions.jsonl"
DATA = Path(__file__).resolve().parents[1] / "data"
BOOKS = {
    "books/pg215_call_of_the_wild.txt",
    "books/pg11_alice_in_wonderland.txt",
    "books/pg1661_adventures_of_sherlock_holmes.txt",
}
MINIMUM = {
    "detail": 5,
    "who-is": 3,
    "relationship": 2,
    "why": 3,
    "chapter": 2,
    "whole-book": 2,
    "spoiler": 2,
    "unanswerable": 3,
}
CHAPTERS = {"pg215": 7, "pg11": 12, "pg1661": 12}


@pytest.fixture(scope="module")
def questions() -> list[ReaderQuestion]:
    return load_reader_questions(QUESTIONS)


def by_id(questions: list[ReaderQuestion], qid: str) -> ReaderQuestion:
    return next(q for q in questions if q.id == qid)


def _flat(text: str) -> str:
    """Whitespace, quotes and dashes made uniform: CRLF breaks and typography don't count."""
    text = unicodedata.normalize("NFKC", text)
    for ch in "‘’‚‛′":
        text = text.replace(ch, "'")
    for ch in "“”„″":
        text = text.replace(ch, '"')
    text = text.replace("--", "-")
    for ch in "—–‐‑":
        text = text.replace(ch, "-")
    return " ".join(text.split())


def _book(book_file: str) -> str:
    raw = (DATA / book_file).read_bytes()
    # pg1661 is ISO-8859-1; the others are UTF-8 with a BOM.
    return raw.decode("latin-1") if "pg1661" in book_file else raw.decode("utf-8-sig")


# ----------------------------------------------------------------------------- the file
def test_every_row_validates(questions: list[ReaderQuestion]) -> None:
    lines = [ln for ln in QUESTIONS.read_text(encoding="utf-8").splitlines() if ln.strip()]
    assert len(questions) == len(lines) >= 66
    assert len({q.id for q in questions}) == len(questions)
    assert {q.book_file for q in questions} == BOOKS
    for q in questions:
        book = q.book_file.split("/")[1].split("_")[0]
        assert q.id.startswith(f"reader.{book}."), q.id
        for ch in (q.chapter, q.upto_chapter):
            assert ch is None or 1 <= ch <= CHAPTERS[book], q.id


def test_counts_per_book_and_class(questions: list[ReaderQuestion]) -> None:
    counts = Counter((q.book_file, q.class_) for q in questions)
    for book in BOOKS:
        assert sum(n for (b, _), n in counts.items() if b == book) >= 22, book
        for cls, least in MINIMUM.items():
            assert counts[book, cls] >= least, (book, cls, counts[book, cls])


def test_evidence_is_verbatim_in_the_raw_book(questions: list[ReaderQuestion]) -> None:
    texts = {b: _flat(_book(b)) for b in BOOKS}
    for q in questions:
        if q.class_ == "unanswerable":
            assert q.evidence is None and q.key_facts == (), q.id
            continue
        assert q.evidence, q.id
        for sentence in q.evidence:
            assert _flat(sentence) in texts[q.book_file], (q.id, sentence)


def test_spoiler_questions_have_a_limit(questions: list[ReaderQuestion]) -> None:
    spoilers = [q for q in questions if q.class_ == "spoiler"]
    assert spoilers
    for q in spoilers:
        assert isinstance(q.upto_chapter, int) and q.upto_chapter >= 1, q.id
        assert q.forbidden, q.id
        assert q.chapter is None or q.chapter <= q.upto_chapter, q.id


def test_required_pg215_questions(questions: list[ReaderQuestion]) -> None:
    pg215 = {q.question: q for q in questions if "pg215" in q.book_file}
    stole = pg215["Who stole Buck from Judge Miller's place?"]
    assert stole.key_facts == (("manuel",),)
    spitz = pg215["Who is Spitz?"]
    assert spitz.class_ == "who-is" and len(spitz.key_facts) == 2
    end = pg215["How does the book end?"]
    assert end.class_ == "spoiler" and end.upto_chapter == 1
    assert {"thornton", "wolf", "dies", "death", "yeehats"} <= set(end.forbidden)


def test_bad_rows_name_file_and_line(tmp_path: Path) -> None:
    good = json.loads(QUESTIONS.read_text(encoding="utf-8").splitlines()[0])
    for broken in (
        {**good, "class": "trivia"},
        {**good, "key_facts": [["Manuel"]]},
        {**good, "class": "spoiler", "upto_chapter": None},
        {**good, "class": "unanswerable"},
        {k: v for k, v in good.items() if k != "note"},
    ):
        path = tmp_path / "q.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=r"q\.jsonl:2: "):
            load_reader_questions(path)
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"q\.jsonl:1: "):
        load_reader_questions(path)


# ----------------------------------------------------------------------------- the scorer
def test_normalise() -> None:
    assert normalise("François paid $1,600 — a St. Bernard's worth!") == (
        "francois paid 1600 a st bernards worth"
    )
    assert normalise("I haven’t reached that") == normalise("i haven't reached that")


def test_right_answer_and_wrong_name(questions: list[ReaderQuestion]) -> None:
    stole = by_id(questions, "reader.pg215.01")
    right = score_answer(
        stole, "Manuel, one of the gardener's helpers, sold him to pay for gambling."
    )
    assert right.correct and right.all_facts and right.partial == 1.0 and not right.abstained
    wrong = score_answer(stole, "The man in the red sweater took him from the Judge.")
    assert not wrong.correct and wrong.facts_found == 0 and wrong.partial == 0.0

    spitz = next(q for q in questions if q.question == "Who is Spitz?")
    half = score_answer(spitz, "Spitz is the lead dog of Perrault's team.")
    assert not half.correct and half.facts_found == 1 and half.partial == 0.5
    full = score_answer(spitz, "The white lead dog, Buck's rival, who fights him for leadership.")
    assert full.correct


def test_word_start_matching(questions: list[ReaderQuestion]) -> None:
    end = next(q for q in questions if q.question == "How does the book end?")
    # "studies" must not count as the forbidden "dies": variants match at the start of a word.
    ok = score_answer(
        end, "So far Buck has been stolen and sold; he studies the man with the club."
    )
    assert ok.forbidden_hits == [] and ok.correct


def test_abstention(questions: list[ReaderQuestion]) -> None:
    for answer in (
        "The book doesn't say.",
        "I don't know.",
        "That is not stated in the passages.",
        "No passage mentions it.",
        "I cannot answer that from the text.",
        "His name is not mentioned.",
        "The passages do not give a name.",
        "You haven't reached that part yet.",
    ):
        assert is_abstention(answer), answer
    assert not is_abstention("Manuel stole Buck and sold him at College Park.")

    unanswerable = [q for q in questions if q.class_ == "unanswerable"]
    sweater = next(q for q in unanswerable if "red sweater" in q.question)
    assert score_answer(sweater, "The book never names him.").correct
    assert not score_answer(sweater, "His name was Manuel.").correct
    stole = by_id(questions, "reader.pg215.01")
    assert not score_answer(stole, "I don't know, the passages do not say.").correct


def test_the_products_own_declines_are_abstentions() -> None:
    """What litrag itself says when it does not answer counts as declining."""
    from litrag.answering.checks import no_answer_text
    from litrag.answering.name_check import dropped_note, never_mentioned_text

    for limit in (None, 3):
        assert is_abstention(no_answer_text("Emma", limit))
        assert is_abstention(never_mentioned_text(["Moriarty"], "Emma", limit))
        assert is_abstention(f"{no_answer_text('Emma', limit)} {dropped_note(['Mycroft'])}")


def test_spoiler_leak(questions: list[ReaderQuestion]) -> None:
    end = next(q for q in questions if q.question == "How does the book end?")
    leak = score_answer(end, "Buck leaves the dead Thornton and runs with the wolves.")
    assert not leak.correct and {"thornton", "wolves"} <= set(leak.forbidden_hits)
    leak2 = score_answer(end, "So far Manuel sold him; in the end Thornton dies.")
    assert not leak2.correct and leak2.all_facts and leak2.forbidden_hits
    decline = score_answer(end, "You haven't reached the end yet: so far Buck has been stolen.")
    assert decline.abstained and decline.correct
    told = score_answer(
        end, "Up to here, Manuel sells Buck and the man in the red sweater clubs him."
    )
    assert told.correct


def test_summarise(questions: list[ReaderQuestion]) -> None:
    stole = by_id(questions, "reader.pg215.01")
    sweater = next(q for q in questions if "red sweater" in q.question)
    scores = [
        score_answer(stole, "Manuel."),
        score_answer(stole, "Perrault."),
        score_answer(sweater, "The book doesn't say."),
    ]
    out = summarise(scores, ["detail", "detail", "unanswerable"])
    assert out["all"]["n"] == 3 and out["all"]["correct"] == 2
    assert out["detail"] == {
        "n": 2,
        "correct": 1,
        "accuracy": 0.5,
        "partial": 0.5,
        "abstained": 0,
        "forbidden_hit": 0,
    }
    assert out["unanswerable"]["accuracy"] == 1.0 and out["unanswerable"]["abstained"] == 1
    assert set(out) <= {"all", *CLASSES}
    with pytest.raises(ValueError):
        summarise(scores, ["detail"])
