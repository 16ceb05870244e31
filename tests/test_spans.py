"""The span normaliser on hand cases and on GutenQA's real gold spans against the raw books."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litrag.eval.spans import contains_span, normalize, relevance
from litrag.ingestion.gutenberg import load_book

# GutenQA quotes emma.28's dialogue without the narration between ("” cried Emma, after a
# moment's pause--“"): the span is not in the text under any normalisation.
EMMA_NOT_IN_TEXT = {"emma.28"}


def _questions(data_dir: Path) -> list[dict]:
    with (data_dir / "gutenqa" / "questions.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def emma(data_dir: Path) -> tuple[str, list[dict]]:
    text = load_book(data_dir / "books" / "pg158_emma.txt").text
    qs = [q for q in _questions(data_dir) if q["book_file"].endswith("pg158_emma.txt")]
    return text, qs


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("“Do you think so?” replied he.", '"Do you think so?" replied he.'),
        ("every body’s happiness", "every body's happiness"),
        ("‘ORANGE MARMALADE’", "'ORANGE MARMALADE'"),
        ("`quoted´ and ″double″", "'quoted' and 'double'"),
        ("mean?—Good Heaven", "mean?--Good\nHeaven"),
        ("a pause – then", "a pause--then"),
        ("a pause—then", "a pause -- then"),
        ("a pause---then", "a pause — then"),
        ("_Emma_ was", "Emma was"),
        ("HARRIET\tsmith", "harriet   Smith"),
        ("so…", "so..."),
    ],
)
def test_forms_that_normalise_alike(a: str, b: str) -> None:
    assert normalize(a) == normalize(b)


def test_what_normalisation_keeps_apart() -> None:
    assert normalize("tea-time") != normalize("tea time")  # a hyphen is not a dash
    assert normalize("tea-time") == "tea-time"
    assert normalize("Mr. Knightley") != normalize("Mr Knightley")
    assert normalize("  Emma  ") == "emma"


def test_contains_span() -> None:
    chunk = "“Harriet!” cried Emma, after a moment's pause--“What do you mean?--Good\nHeaven!"
    assert contains_span(chunk, "What do you mean?—Good Heaven!")
    assert contains_span(chunk, "after a moment’s pause—")
    assert not contains_span(chunk, "What do you mean?—Good Heavens!")
    assert not contains_span(chunk, "")
    assert not contains_span(chunk, " \n ")


def test_relevance_matrix() -> None:
    chunks = [normalize(c) for c in ["It was _very_ lucky--", "nothing here", "VERY lucky—and"]]
    assert relevance(chunks, ["very lucky", "lucky — and"]) == [
        [True, False],
        [False, False],
        [True, True],
    ]


def test_every_emma_span_is_found_after_normalising(emma: tuple[str, list[dict]]) -> None:
    text, qs = emma
    assert len(qs) == 30
    book = normalize(text)
    missing = {q["id"] for q in qs if normalize(q["chunk_must_contain"]) not in book}
    assert missing == EMMA_NOT_IN_TEXT


def test_emma_spans_need_the_normalisation(emma: tuple[str, list[dict]]) -> None:
    """GutenQA's ’ and — vs the file's ' and -- (both use “ ”): whitespace alone fails."""
    text, qs = emma
    flat = " ".join(text.split())
    verbatim = [q for q in qs if " ".join(q["chunk_must_contain"].split()) in flat]
    typographic = [q for q in qs if any(c in q["chunk_must_contain"] for c in "’‘—")]
    assert "’" not in text and "—" not in text and "“" in text
    assert len(typographic) >= 10
    assert not set(q["id"] for q in typographic) & set(q["id"] for q in verbatim)
    # e.g. the raw file writes the apostrophe of "body's" straight
    assert "every body's happiness" in flat
    assert "every body’s happiness" not in flat


def test_spans_of_the_other_books_are_found(data_dir: Path) -> None:
    qs = [q for q in _questions(data_dir) if q["chunk_must_contain"] is not None]
    by_book: dict[str, list[dict]] = {}
    for q in qs:
        if not q["book_file"].endswith("pg158_emma.txt"):
            by_book.setdefault(q["book_file"], []).append(q)
    assert len(by_book) == 5
    for book_file, book_qs in by_book.items():
        book = normalize(load_book(data_dir / book_file).text)
        missing = [q["id"] for q in book_qs if normalize(q["chunk_must_contain"]) not in book]
        assert missing == [], book_file
