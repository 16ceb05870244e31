"""The question sets on the real files: GutenQA's answers and notes, LiteraryQA's books found
(or not) in a folder, the selection by book, and a sub-corpus of each book's first chapters."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from litrag.eval.questions import (
    find_gutenberg_book,
    load_books,
    load_gutenqa,
    load_literaryqa,
    load_questions,
    select_questions,
)

WILD = "books/pg215_call_of_the_wild.txt"


@pytest.fixture(scope="module")
def data(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding The Call of the Wild and the real LiteraryQA subset (whose Sherlock
    Holmes book is absent here)."""
    root = tmp_path_factory.mktemp("questions")
    (root / "books").mkdir()
    shutil.copy(data_dir / WILD, root / WILD)
    shutil.copy(data_dir / "literaryqa" / "local_books_literaryqa_subset.jsonl", root / "lqa.jsonl")
    return root


def test_loaders_on_the_real_files(data_dir: Path, data: Path) -> None:
    qs, dropped = load_gutenqa(data_dir / "gutenqa" / "questions.jsonl")
    # three published answers are wrong about the text (data notes): not scored
    assert {d[0] for d in dropped} == {"q.48", "q.669", "q.1644"}
    assert len(qs) == 177 and all(q.references for q in qs)
    q = next(q for q in qs if q.id == "q.1622")
    assert q.references[0].startswith("Manuel's besetting sin") and q.evidence
    kept, dropped_ids = select_questions(qs, ["pg11_"], 2, dropped)
    assert [k.id for k in kept] == ["q.31", "q.32"] and dropped_ids == ["q.48"]

    lqa, lqa_dropped = load_literaryqa(data / "lqa.jsonl", data)
    assert len(lqa) == 27 and len(lqa_dropped) == 28  # Sherlock Holmes is not in this folder
    assert lqa[0].id == "lqa.215.0" and lqa[0].book_file == WILD
    assert lqa[0].question == "What is Judge Millers dog's name?"
    assert lqa[0].references == ("Buck",)  # the two identical references, once
    assert find_gutenberg_book(data_dir, "1661") == "books/pg1661_adventures_of_sherlock_holmes.txt"


def test_max_chapters_keeps_a_sub_corpus(data_dir: Path) -> None:
    qs = [
        q
        for q in load_questions(data_dir / "gutenqa" / "questions.jsonl")
        if "pg11_" in q.book_file
    ]
    (full,), none = load_books(qs, data_dir)
    (first,), dropped = load_books(qs, data_dir, max_chapters=1)
    assert none == [] and len(full.docs) == 12 and len(first.docs) == 1
    assert 0 < len(first.questions) < len(qs) == len(first.questions) + len(dropped)
    assert first.key != full.key  # its own chunk cache
    assert first.docs[0].text == full.docs[0].text
