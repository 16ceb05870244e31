"""Every gold answer of the project's question sets as a finished draft, written from the book's
text around its gold span: what a check must never withdraw (a right answer)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from litrag.answering.checks import Draft
from litrag.answering.name_check import BookWords
from litrag.ingestion.gutenberg import load_book

DATA = Path(__file__).resolve().parent.parent / "data"
# Every set with a gold answer and the span it stands on (the public GutenQA set, the frozen,
# blind, light, paraphrased and new-books sets).
SETS = [*sorted((DATA / "questions").glob("*.jsonl")), DATA / "gutenqa" / "questions.jsonl"]
REACH = 3000  # characters of the book either side of the span: about what the model reads


@lru_cache(maxsize=16)
def _book(path: str) -> tuple[str, str, str, BookWords]:
    book = load_book(path)
    return book.text, book.title, book.author or "", BookWords.of([book.text])


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _around(text: str, span: str) -> str:
    """The book's text around the span's longest sentence-like piece (the span may be edited:
    brackets, quotes), or the span itself when it is not found."""
    flat = _flat(text)
    pieces = sorted(re.split(r"[\[\]()‘’“”\"]", _flat(span)), key=len, reverse=True)
    for piece in pieces[:3]:
        piece = piece.strip(" ,.;:")
        if len(piece) >= 20 and (at := flat.find(piece)) >= 0:
            return flat[max(at - REACH, 0) : at + len(piece) + REACH]
    return _flat(span)


def gold_drafts() -> Iterator[tuple[str, Draft]]:
    """``(set:id, draft)`` for each question with a gold answer and a gold span."""
    for path in SETS:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            q = json.loads(line) if line.strip() else {}
            answer, span = q.get("answer"), q.get("chunk_must_contain")
            if isinstance(span, list):  # a set that gives the span in pieces
                span = " ".join(span)
            if not answer or not span or not q.get("book_file"):
                continue
            text, title, author, words = _book(str(DATA / q["book_file"]))
            source = _around(text, span)
            yield (
                f"{path.name}:{q.get('id', n)}",
                Draft(
                    question=q["question"],
                    text=answer,
                    sources=(source,),
                    title=title,
                    known=" ".join([title, author]),
                    book=words,
                ),
            )
