"""The question sets and their books.

Retrieval questions (GutenQA style): a question, its book and the gold span(s) a relevant chunk
must contain whole; each question's book is loaded and split into chapters once, the same text
for every chunker. Answer questions (GutenQA, LiteraryQA): a question, its book and its reference
answer(s), with GutenQA's gold evidence span when there is one.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llama_index.core.schema import Document

from litrag.eval.embedding_cache import text_key
from litrag.eval.spans import normalize
from litrag.ingestion.input_file import InputFileError, read_input_text


@dataclass(frozen=True)
class Question:
    """One retrieval question: its book and the gold span(s) a relevant chunk must contain."""

    id: str
    book_file: str
    question: str
    spans: tuple[str, ...]


class QuestionFileError(ValueError):
    """A question file that cannot be read as a question set; the message is one line naming
    the file (and the line, where one line is at fault)."""


def read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers (blank lines skipped).

    Why here: a bad line must say which file and which line (``json`` counts lines within the
    one line it was given), and a list or a number on a line is an error, not an
    ``AttributeError`` further on."""
    path = Path(path)
    try:  # a device or a FIFO is refused before a byte is read, and the read is capped
        text = read_input_text(path, "question file")
    except InputFileError as exc:
        raise QuestionFileError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise QuestionFileError(f"{path}: not UTF-8 text ({exc.reason})") from None
    for n, line in enumerate(io.StringIO(text, newline=None), start=1):  # as a text file reads
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuestionFileError(
                f"{path} line {n}: not JSON ({exc.msg}, column {exc.colno})"
            ) from None
        if not isinstance(row, dict):
            raise QuestionFileError(
                f"{path} line {n}: a JSON object is wanted, got {type(row).__name__}"
            )
        yield n, row


def _text(row: dict[str, Any], key: str, path: Path, n: int) -> str:
    """The row's required text field ``key``, or ``QuestionFileError`` naming file and line."""
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if key not in row else f"{type(value).__name__} {value!r}"[:60]
        raise QuestionFileError(f"{path} line {n}: {key!r} must be non-empty text ({got})")
    return value


def load_questions(path: Path) -> list[Question]:
    """Questions from JSONL (``question``, ``book_file``, ``chunk_must_contain``: str or list).

    Rows without a span (GutenQA marks a few ``null``) cannot be scored and are skipped; a file
    with no scorable row is a ``QuestionFileError`` (an empty evaluation has no result).
    """
    out: list[Question] = []
    rows = 0
    for n, row in read_rows(path):
        rows += 1
        gold = row.get("chunk_must_contain")
        spans = tuple(s for s in ([gold] if isinstance(gold, str) else gold or []) if s)
        if not all(isinstance(s, str) for s in spans):
            raise QuestionFileError(f"{path} line {n}: 'chunk_must_contain' must be text or a list")
        book, question = _text(row, "book_file", path, n), _text(row, "question", path, n)
        if spans:
            out.append(Question(str(row.get("id", f"line{n}")), book, question, spans))
    if not rows:
        raise QuestionFileError(f"{path} has no questions (no JSON line)")
    if not out:
        raise QuestionFileError(
            f"{path}: none of its {rows} questions has a gold span (chunk_must_contain)"
        )
    return out


def question_styles(path: Path) -> dict[str, str]:
    """Question id -> ``style`` for the rows of a JSONL set that name one (the frozen
    development set does: paraphrase, why, who-what, two-passage); empty for sets without."""
    out: dict[str, str] = {}
    for n, row in read_rows(path):
        if row.get("style"):
            out[str(row.get("id", f"line{n}"))] = str(row["style"])
    return out


def resolve_book(book_file: str, books_dir: Path) -> Path:
    """``book_file`` under ``books_dir`` as given, or by its bare file name."""
    for cand in (books_dir / book_file, books_dir / Path(book_file).name):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"book {book_file!r} not found under {books_dir}")


@dataclass
class Book:
    file: str
    book_id: str
    key: str  # text hash: chunk-cache key
    docs: list[Document]
    questions: list[Question]


def load_books(
    questions: Sequence[Question], books_dir: Path, max_chapters: int | None = None
) -> tuple[list[Book], list[str]]:
    """Each question's book loaded and split into chapters once; unfindable spans dropped.

    ``max_chapters`` keeps only each book's first chapters (a sub-corpus for slow chunkers, the
    same for every chunker); questions whose span lies elsewhere are dropped too.
    """
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book

    books: dict[str, Book] = {}
    norm_text: dict[str, str] = {}
    dropped: list[str] = []
    for q in questions:
        book = books.get(q.book_file)
        if book is None:
            loaded = load_book(resolve_book(q.book_file, books_dir))
            docs = split_chapters(loaded)
            key = text_key(loaded.text)[:16]
            if max_chapters is not None:
                docs = docs[:max_chapters]
                key = text_key(f"{loaded.text}|first {max_chapters} chapters")[:16]
            book = Book(q.book_file, loaded.book_id, key, docs, [])
            books[q.book_file] = book
            norm_text[q.book_file] = normalize("\n\n".join(d.text for d in docs))
        if all(normalize(s) in norm_text[q.book_file] for s in q.spans):
            book.questions.append(q)
        else:
            dropped.append(q.id)
    return [b for b in books.values() if b.questions], dropped


# --------------------------------------------------------------------------------- answers
Dataset = Literal["gutenqa", "literaryqa"]
DATASETS: dict[str, str] = {
    "gutenqa": "gutenqa/questions.jsonl",
    "literaryqa": "literaryqa/local_books_literaryqa_subset.jsonl",
}


@dataclass(frozen=True)
class AnswerQuestion:
    """A question with its book, reference answer(s) and (GutenQA) gold evidence span(s)."""

    id: str
    book_file: str
    question: str
    references: tuple[str, ...]
    evidence: tuple[str, ...] = ()


def _strings(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value or [])
    return tuple(dict.fromkeys(s.strip() for s in items if isinstance(s, str) and s.strip()))


Dropped = list[tuple[str, str]]  # (question id, book_file)


def load_gutenqa(path: Path) -> tuple[list[AnswerQuestion], Dropped]:
    """GutenQA-style JSONL: ``question``, ``book_file``, ``answer`` (str or list) and optionally
    ``chunk_must_contain``. Rows without an answer, and rows whose ``note`` says the published
    answer is wrong about the text, are dropped (returned with their books)."""
    out: list[AnswerQuestion] = []
    dropped: Dropped = []
    for n, row in read_rows(path):
        qid = str(row.get("id", f"line{n}"))
        book, question = _text(row, "book_file", path, n), _text(row, "question", path, n)
        refs = _strings(row.get("answer") or row.get("answers"))
        if not refs or "answer is wrong" in str(row.get("note") or "").lower():
            dropped.append((qid, book))
            continue
        out.append(
            AnswerQuestion(qid, book, question, refs, _strings(row.get("chunk_must_contain")))
        )
    if not out and not dropped:
        raise QuestionFileError(f"{path} has no questions (no JSON line)")
    if not out:
        raise QuestionFileError(
            f"{path}: none of its {len(dropped)} questions has a usable answer (answer or answers)"
        )
    return out, dropped


def find_gutenberg_book(books_dir: Path, gutenberg_id: str) -> str | None:
    """``books/pg<ID>_*.txt`` under ``books_dir`` (or its ``books/``), as a ``book_file``."""
    for folder, prefix in ((books_dir / "books", "books/"), (books_dir, "")):
        hits = sorted(folder.glob(f"pg{gutenberg_id}_*.txt")) if folder.is_dir() else []
        if hits:
            return prefix + hits[0].name
    return None


def load_literaryqa(path: Path, books_dir: Path) -> tuple[list[AnswerQuestion], Dropped]:
    """LiteraryQA records (one per book: ``gutenberg_id``, ``qas`` with ``question`` and
    ``answers``); a book not under ``books_dir`` drops its questions."""
    out: list[AnswerQuestion] = []
    dropped: Dropped = []
    for n, doc in read_rows(path):
        gid = doc.get("gutenberg_id")
        if isinstance(gid, bool) or not isinstance(gid, int | str) or not str(gid).strip():
            raise QuestionFileError(f"{path} line {n}: 'gutenberg_id' is missing or not an id")
        gid = str(gid).strip()
        qas = doc.get("qas", [])
        if not isinstance(qas, list) or not all(isinstance(qa, dict) for qa in qas):
            raise QuestionFileError(f"{path} line {n}: 'qas' must be a list of objects")
        book = find_gutenberg_book(books_dir, gid)
        for i, qa in enumerate(qas):
            qid = f"lqa.{gid}.{i}"
            question = _text(qa, "question", path, n)
            refs = _strings(qa.get("answers"))
            if book is None or not refs:
                dropped.append((qid, book or f"pg{gid} (not found)"))
                continue
            out.append(AnswerQuestion(qid, book, " ".join(question.split()), refs))
    if not out and not dropped:
        raise QuestionFileError(f"{path} has no questions (no JSON line with qas)")
    if not out:
        raise QuestionFileError(
            f"{path}: none of its {len(dropped)} questions has both an answer and its book "
            f"under {books_dir}"
        )
    return out, dropped


def load_answer_questions(
    path: Path, dataset: Dataset, books_dir: Path
) -> tuple[list[AnswerQuestion], Dropped]:
    if dataset == "gutenqa":
        return load_gutenqa(path)
    if dataset == "literaryqa":
        return load_literaryqa(path, books_dir)
    raise ValueError(f"unknown dataset {dataset!r}: gutenqa or literaryqa")


def select_questions(
    questions: Sequence[AnswerQuestion],
    only_books: Sequence[str] = (),
    limit: int | None = None,
    dropped: Dropped = (),
) -> tuple[list[AnswerQuestion], list[str]]:
    """Questions of the books whose ``book_file`` contains one of ``only_books``, the first
    ``limit`` of them in file order; and the ids of the dropped questions of those books."""
    kept = [q for q in questions if not only_books or any(b in q.book_file for b in only_books)]
    kept = kept[:limit] if limit is not None else kept
    books = {q.book_file for q in kept}
    return kept, [qid for qid, book in dropped if book in books]
