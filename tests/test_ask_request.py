"""The one request model of ``litrag ask`` and the UI's ``/answer`` API: each bad field of issue 34
(bugs 5-7) is refused in one line that names it, and good requests come through normalised."""

from __future__ import annotations

import math

import pytest

from litrag.answering.ask_request import (
    MAX_QUESTION_CHARS,
    AskRequest,
    AskRequestError,
    spoiler_value,
)

GOOD = {"question": "  Who is   Buck? ", "books": ["pg215"]}


def test_a_good_request_is_normalised() -> None:
    r = AskRequest.parse(**GOOD, upto_chapter=2, top_k=5, retrieval="")
    assert (r.question, r.books, r.upto_chapter, r.top_k, r.retrieval) == (
        "Who is Buck?",
        ["pg215"],
        2,
        5,
        None,
    )
    assert AskRequest.parse(question="Q?", books=["pg11", "pg11", " pg215"]).books == [
        "pg11",
        "pg215",
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"question": "x" * 100_000}, "the question is 100,000 characters long; the limit is"),
        ({"question": "   "}, "the question is empty"),
        ({"question": None}, "question: Input should be a valid string (got None)"),
        ({"top_k": -3}, "top_k: Input should be greater than or equal to 1 (got -3)"),
        ({"top_k": "abc"}, "top_k: Input should be a valid integer (got 'abc')"),
        ({"top_k": 10**6}, "top_k: Input should be less than or equal to 50"),
        ({"books": "pg215"}, "books: Input should be a valid list (got 'pg215')"),
        ({"books": []}, "books: List should have at least 1 item"),
        ({"books": [""]}, "each book id is a non-empty id"),
        ({"upto_chapter": 10**12}, "upto_chapter: Input should be less than or equal to 100000"),
        ({"upto_chapter": float("nan")}, "upto_chapter: Input should be a valid integer"),
        ({"upto_chapter": 1.5}, "upto_chapter: Input should be a valid integer"),
        ({"upto_chapter": -2}, "upto_chapter: Input should be greater than or equal to 0"),
        ({"use_llm": "yes"}, "use_llm: Input should be a valid boolean"),
        ({"retrieval": "fast"}, "the retrieval preset is 'embedded' or 'paper', not 'fast'"),
        ({"hack": 1}, "unknown field 'hack'"),
    ],
)
def test_each_bad_field_is_one_line_naming_it(fields: dict, message: str) -> None:
    with pytest.raises(AskRequestError) as info:
        AskRequest.parse(**{**GOOD, **fields})
    text = str(info.value)
    assert message in text and "\n" not in text


def test_the_cli_names_its_flags_and_the_chapter_bound() -> None:
    names = {"upto_chapter": "--upto-chapter", "top_k": "--top-k"}
    with pytest.raises(AskRequestError, match=r"^--top-k: Input should be greater"):
        AskRequest.parse(names, **GOOD, top_k=0)
    r = AskRequest.parse(names, **GOOD, upto_chapter=9)
    with pytest.raises(AskRequestError) as info:
        r.check_chapters(3, "--upto-chapter")
    assert str(info.value) == "--upto-chapter must be a chapter of the book (1-3), got 9"
    r.check_chapters(None)  # chapters unknown: the model's own bound only
    AskRequest.parse(**GOOD, upto_chapter=3).check_chapters(3)
    # the CLI counts chapters from 1 (issue 34: `--upto-chapter 0` was taken); the slider's 0 stays
    zero = AskRequest.parse(names, **GOOD, upto_chapter=0)
    with pytest.raises(AskRequestError) as info:
        zero.check_chapters(3, "--upto-chapter", first=1)
    assert str(info.value) == "--upto-chapter must be a chapter of the book (1-3), got 0"
    with pytest.raises(
        AskRequestError, match=r"^--upto-chapter must be a chapter from 1 on, got 0$"
    ):
        zero.check_chapters(None, "--upto-chapter", first=1)
    zero.check_chapters(3)
    assert len(AskRequest.parse(question="x" * MAX_QUESTION_CHARS, books=["b"]).question) == 2000


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1, True, "3", [3]])
def test_a_spoiler_value_is_a_finite_chapter(bad: object) -> None:
    with pytest.raises(AskRequestError, match=r"^upto must be"):
        spoiler_value(bad)
    assert spoiler_value(None) is None and spoiler_value(3.0) == 3 and spoiler_value(0) == 0


def test_a_spoiler_limit_on_a_book_of_one_chapter_is_refused():
    """Issue 50, bug 12: a book whose headings were not found is one chapter, and a spoiler
    limit on it hid nothing while the reader trusted it: refused in one line that says why."""
    one = AskRequest.parse(**GOOD, upto_chapter=1)
    with pytest.raises(AskRequestError) as exc:
        one.check_chapters(1, "--upto-chapter", first=1)
    assert str(exc.value) == (
        "--upto-chapter cannot hide anything: the book is one chapter (no chapter headings were "
        "found in it); ask without --upto-chapter"
    )
    one.check_chapters(2, "--upto-chapter", first=1)  # two chapters: a limit that hides one
    AskRequest.parse(**GOOD).check_chapters(1)  # no limit asked: nothing to refuse
