"""The default-on-a-frozen-set harness (``litrag.eval.default_run``) on a real case: the first
stave of A Christmas Carol ingested with the default settings, the frozen set's own questions on
that stave, and answers phrased here (not the set's reference answers) for the scoring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_library import short_book

from litrag.eval.default_run import (
    RowLog,
    balanced,
    gold_rank,
    ingest_books,
    load_set,
    markdown,
    retrieval_rows,
    score,
    span_in,
    stratified,
    summarise,
)

STAVE_ONE = ("more.pg46.01", "more.pg46.02", "more.pg46.16", "more.pg46.17", "more.pg46.18")
VARIANTS = {"650 words": 650, "whole": 0}


@pytest.fixture(scope="module")
def frozen(data_dir: Path) -> Path:
    return data_dir / "questions" / "more_frozen.jsonl"


def test_the_subset_is_the_first_of_each_kind_per_book_in_file_order(frozen: Path) -> None:
    questions = load_set(frozen)
    assert len(questions) == 100
    subset = stratified(questions, 6, 4)
    assert len(subset) == 40
    for book in ("pg74", "pg36", "pg174", "pg46"):
        mine = [q.id for q in subset if q.book_id == book]
        assert mine == [f"more.{book}.{n:02d}" for n in (1, 2, 3, 4, 5, 6, 16, 17, 18, 19)]
    order = balanced(subset)
    assert sorted(q.id for q in order) == sorted(q.id for q in subset)
    first = order[:8]  # a run stopped after 8 answers has asked each book both kinds
    assert {(q.book_id, q.kind) for q in first} == {
        (b, k) for b in ("pg74", "pg36", "pg174", "pg46") for k in ("blind", "reader")
    }


def test_scoring_right_declined_and_confident_wrong(frozen: Path) -> None:
    qs = {q.id: q for q in load_set(frozen)}
    marley = qs["more.pg46.16"]
    right = score(marley, "Jacob Marley was Scrooge's old business partner, seven years dead.")
    assert right["right"] and not right["declined"] and not right["confident_wrong"]
    declined = score(marley, "The passages do not say who Jacob Marley was.")
    assert declined["declined"] and not declined["right"] and not declined["confident_wrong"]
    wrong = score(marley, "Jacob Marley was Scrooge's clerk, a poor man with a large family.")
    assert wrong["confident_wrong"] and not wrong["right"]
    echo = score(qs["more.pg46.02"], "Marley's face lay in the cellars below and echoed.")
    assert not echo["right"]  # the question's own words are not the answer


def test_a_span_is_found_across_typography() -> None:
    span = "“That's the name they lick me by. I'm Tom when I'm good.”"
    assert span_in(["He said: \"That's the NAME they lick me by.  I'm Tom when I'm good.\""], span)
    assert not span_in(["That's the name they lick me by."], span)


def test_retrieval_rows_on_a_real_ingest_resume_and_report(
    frozen: Path, books_dir: Path, tmp_path: Path
) -> None:
    book = short_book(
        books_dir / "more" / "pg46_christmas_carol.txt", tmp_path / "pg46_carol.txt", "STAVE II:"
    )
    home = tmp_path / "home"
    ingest_books(home, [book], say=lambda _: None)
    questions = [q for q in load_set(frozen) if q.id in STAVE_ONE]
    assert len(questions) == len(STAVE_ONE)
    log = RowLog(tmp_path / "out" / "rows.jsonl")
    retrieval_rows(home, questions, log, VARIANTS, say=lambda _: None)
    rows = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [r["id"] for r in rows] == list(STAVE_ONE)
    ranks = [r["rank"] for r in rows]
    assert any(r is not None and r <= 5 for r in ranks), ranks  # stave I holds every gold
    for r in rows:
        assert r["in_top_k"] == (r["rank"] is not None and r["rank"] <= 5)
        assert r["words:whole"] >= r["words:650 words"]
        assert r["read:whole"] or not r["read:650 words"]  # reading more never loses the gold
    # a rerun finds every row done and adds none
    again = RowLog(log.path)
    retrieval_rows(home, questions, again, VARIANTS, say=lambda _: None)
    assert len(log.path.read_text().splitlines()) == len(STAVE_ONE)
    summary = summarise(again.rows, list(VARIANTS))
    allq = summary["retrieval"]["all"]
    assert allq["n"] == 5 and allq["hit@5"] == sum(r is not None and r <= 5 for r in ranks)
    assert set(summary["retrieval"]) == {"all", "blind", "reader", "pg46"}
    md = markdown(summary, list(VARIANTS), "cmd")
    assert "| reader | 3 |" in md and "| blind | 2 |" in md


def test_a_span_outside_every_block_has_no_rank() -> None:
    assert gold_rank([], "anything at all here") is None
