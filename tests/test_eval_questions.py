"""The question sets on the real files: GutenQA's answers and notes, LiteraryQA's books found
(or not) in a folder, the selection by book, and a sub-corpus of each book's first chapters."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from litrag.eval.questions import (
    QuestionFileError,
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


# ------------------------------------------------------------------ bad question files (issue 34)
ROW = '{"id": "q1", "question": "Who is Buck?", "book_file": "' + WILD + '", '


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "has no questions"),
        ("\n\n", "has no questions"),
        ("[1, 2]\n", "line 1: a JSON object is wanted, got list"),
        ('\n{"question": "Who?", "chunk_must_contain": "Buck"}\n', "line 2: 'book_file'"),
        (ROW + '"chunk_must_contain": "Buck"}\n\n{bad\n', "line 3: not JSON"),
        (ROW + '"chunk_must_contain": null}\n', "none of its 1 questions has a gold span"),
    ],
)
def test_a_bad_retrieval_file_names_the_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "qs.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(QuestionFileError) as caught:
        load_questions(path)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "has no questions"),
        ("7\n", "line 1: a JSON object is wanted, got int"),
        (ROW + '"answer": ["Buck"]}\n{"question": "Why?", "answer": "x"}\n', "line 2: 'book_file'"),
        (ROW + '"answer": null}\n', "none of its 1 questions has a usable answer"),
    ],
)
def test_a_bad_answer_file_names_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "qs.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(QuestionFileError) as caught:
        load_gutenqa(path)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


def _eval_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str
) -> tuple[int, list[str]]:
    from litrag.cli import main

    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    code = main(["eval", *args, "--out", str(tmp_path / "out")])
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("text", "command", "message"),
    [
        ("", "retrieval", "has no questions"),  # was KeyError 'MRR' after a partial report
        ("[1]\n", "retrieval", "line 1: a JSON object is wanted"),  # was AttributeError
        ('{"question": "Who?", "chunk_must_contain": "Buck"}\n', "retrieval", "'book_file'"),
        ("{bad\n", "answers", "line 1: not JSON"),
        (ROW + '"answer": ""}\n', "answers", "has a usable answer"),  # was "after --only-books"
    ],
)
def test_eval_refuses_a_bad_question_file_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data: Path,
    text: str,
    command: str,
    message: str,
) -> None:
    path = tmp_path / "qs.jsonl"
    path.write_text(text, encoding="utf-8")
    extra = ["--chunkers", "paragraphs", "--modes", "bm25"] if command == "retrieval" else []
    code, err = _eval_cli(
        monkeypatch, capsys, tmp_path, command, "--questions", str(path), "--books", str(data),
        *extra, *(["--no-llm"] if command == "answers" else []),
    )  # fmt: skip
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {path}") and message in err[0]
    assert not (tmp_path / "out").exists()  # no partial report


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["retrieval", "--top-k", "-1"], "--top-k must be at least 1, got -1"),
        (["retrieval", "--max-chapters", "0"], "--max-chapters must be at least 1, got 0"),
        (["answers", "--limit", "-1", "--no-llm"], "--limit must be at least 1, got -1"),
        (["answers", "--top-k", "-1", "--no-llm"], "--top-k must be at least 1"),
        (["retrieval", "--only-books", "pg999"], "is about --only-books pg999"),
        (["retrieval", "--alpha", "x"], "--alpha wants weights from 0 to 1 like 0.3,0.5, got 'x'"),
        (["retrieval", "--alpha", "0.3,2"], "--alpha wants weights from 0 to 1"),
        (["retrieval", "--alpha", "nan"], "--alpha wants weights from 0 to 1"),
    ],
)
def test_eval_refuses_a_bad_count_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data_dir: Path,
    args: list[str],
    flag: str,
) -> None:
    qfile = data_dir / "gutenqa" / "questions.jsonl"
    code, err = _eval_cli(monkeypatch, capsys, tmp_path, *args, "--questions", str(qfile))
    assert code == 2 and len(err) == 1 and flag in err[0], err
    assert not (tmp_path / "out").exists()


def test_eval_answers_refuses_a_missing_bertscore_model(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data_dir: Path,
) -> None:
    """``--bertscore /nonexistent`` was skipped silently (a "skipped" label in the report, after
    the whole run); the variable is checked the same way, named as itself."""
    qfile = data_dir / "gutenqa" / "questions.jsonl"
    args = ["answers", "--no-llm", "--limit", "1", "--questions", str(qfile)]
    code, err = _eval_cli(monkeypatch, capsys, tmp_path, *args, "--bertscore", "/nonexistent")
    assert code == 2 and err == [
        "error: --bertscore must be 'minilm' or a local model folder with config.json, "
        "got '/nonexistent'"
    ]
    monkeypatch.setenv("LITRAG_BERTSCORE_MODEL", str(tmp_path))  # a folder, but no model
    code, err = _eval_cli(monkeypatch, capsys, tmp_path, *args)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: LITRAG_BERTSCORE_MODEL must")
    assert not (tmp_path / "out").exists()
