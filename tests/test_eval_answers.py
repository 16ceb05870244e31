"""`litrag eval answers` end to end on real data: real GutenQA and LiteraryQA questions about
chapter I of The Call of the Wild (the real book, cut after chapter I), the real chunker, MiniLM
and Qdrant Edge; extractive answers without an LLM, and a run through a real llama.cpp server
(SmolLM2: plumbing, not quality) answering and judging. Reruns must come from the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_library import short_book
from test_retriever import ingested_shelf

from litrag.builders import AnswerLLM
from litrag.cli import main
from litrag.eval.answer_metrics import AnswerScorer
from litrag.eval.answer_report import markdown
from litrag.eval.answers import Generator, evaluate_answers, prediction_text
from litrag.eval.judge import build_judge
from litrag.eval.questions import (
    load_gutenqa,
)
from litrag.settings import Settings

WILD = "books/pg215_call_of_the_wild.txt"
CHAPTER_ONE = ("q.1621", "q.1622", "q.1623")  # GutenQA questions whose evidence is in chapter I


@pytest.fixture(scope="module")
def data(data_dir: Path, books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder: the real Call of the Wild up to chapter II, three real GutenQA questions
    about it and the real LiteraryQA subset (its Sherlock Holmes book is absent: dropped)."""
    root = tmp_path_factory.mktemp("answerdata")
    (root / "books").mkdir()
    short_book(books_dir / "pg215_call_of_the_wild.txt", root / WILD, "Chapter II.")
    rows = [json.loads(x) for x in (data_dir / "gutenqa" / "questions.jsonl").open()]
    kept = [r for r in rows if r["id"] in CHAPTER_ONE]
    assert len(kept) == 3 and all(r["book_file"] == WILD for r in kept)
    with (root / "gutenqa.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in kept)
    shutil.copy(data_dir / "literaryqa" / "local_books_literaryqa_subset.jsonl", root / "lqa.jsonl")
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("answercache")


def _run(data: Path, cache: Path, out: Path, *extra: str) -> dict:
    argv = ["eval", "answers", "--books", str(data), "--cache-dir", str(cache), "--out", str(out)]
    assert main([*argv, *extra]) == 0
    dataset = extra[extra.index("--dataset") + 1] if "--dataset" in extra else "gutenqa"
    return json.loads((out / f"answers-{dataset}.json").read_text())


def test_no_llm_gutenqa_then_rerun_from_cache(data: Path, cache: Path, tmp_path: Path) -> None:
    run = _run(data, cache, tmp_path, "--questions", str(data / "gutenqa.jsonl"), "--no-llm")
    rows = run["rows"]
    assert [r["id"] for r in rows] == list(CHAPTER_ONE)
    assert run["answers_generated"] == 3 and run["answers_cached"] == 0
    book = (data / WILD).read_text(encoding="utf-8")
    flat = " ".join(book.split())
    for r in rows:
        assert r["mode"] == "extractive" and r["error"] is None and r["contexts"] == 5
        # the quoted sentences alone, without the label: every word is the book's
        assert r["prediction"] and not r["prediction"].startswith("Extractive answer")
        assert set(r["prediction"].split()) <= set(flat.split())
        for key in ("em", "f1", "rouge_l", "meteor"):
            assert 0.0 <= r["scores"][key] <= 1.0
    assert sum(r["evidence_hit"] for r in rows) >= 2  # hybrid top 5 finds chapter-I evidence
    # quoted sentences of the right passage share words with the reference answers
    assert all(r["scores"]["f1"] > 0 for r in rows) and run["overall"]["f1"] > 0.1
    assert run["overall"]["questions"] == 3 and run["overall"]["em_n"] == 3
    assert run["config"]["llm"] == "extractive (no LLM)" and run["config"]["judge"] is None
    assert "synonym" in run["metrics"]["meteor"]
    assert run["metrics"]["answer_accuracy"].startswith("skipped: no judge")
    md = (tmp_path / "answers-gutenqa.md").read_text()
    assert "| **all** | 3 |" in md and "LitSeg offline" in md and "METEOR (NLTK" in md

    again = _run(data, cache, tmp_path, "--questions", str(data / "gutenqa.jsonl"), "--no-llm")
    assert again["answers_generated"] == 0 and again["answers_cached"] == 3
    assert [r["scores"] for r in again["rows"]] == [r["scores"] for r in rows]


def test_no_llm_literaryqa(data: Path, cache: Path, tmp_path: Path) -> None:
    run = _run(
        data, cache, tmp_path, "--dataset", "literaryqa", "--questions", str(data / "lqa.jsonl"),
        "--limit", "2", "--no-llm",
    )  # fmt: skip
    assert [r["id"] for r in run["rows"]] == ["lqa.215.0", "lqa.215.1"]
    assert run["dropped"] == []  # Sherlock's questions are not of the books in the run
    first = run["rows"][0]
    assert first["references"] == ["Buck"] and first["evidence_hit"] is None
    assert run["overall"]["evidence_hit"] is None
    assert (
        (tmp_path / "answers-literaryqa.md")
        .read_text()
        .startswith("# Answer evaluation (literaryqa)")
    )


def test_library_mode_uses_the_ingested_library(
    data: Path, books_dir: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    home = ingested_shelf(books_dir, tmp_path_factory)  # Alice 1-3, Call of the Wild 1-2
    qs, _ = load_gutenqa(data / "gutenqa.jsonl")
    run = evaluate_answers(
        qs[:2], data, cache_dir=tmp_path, library=Settings(home=home), say=lambda _m: None
    )
    assert run.config["source"] == f"library at {home}" and run.config["chunker"] == "library"
    assert [r.mode for r in run.rows] == ["extractive", "extractive"]
    assert all(r.sources and r.sources[0].startswith("[1] The Call of the Wild") for r in run.rows)
    assert "evidence@k" in markdown(run)


def test_prediction_text_strips_the_extractive_label() -> None:
    rec = {"mode": "extractive", "text": "Extractive answer (...): a ... b", "evidence": ["a", "b"]}
    assert prediction_text(rec) == "a b"
    assert prediction_text({"mode": "none", "text": "Nothing in X matches."}) == ""
    assert prediction_text({"mode": "llm", "text": "Buck."}) == "Buck."


@pytest.mark.llm
def test_real_llm_answers_and_judge_through_the_cli(
    llama_server, monkeypatch: pytest.MonkeyPatch, data: Path, cache: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("LITRAG_LLM_URL", llama_server.api_base)
    monkeypatch.setenv("LITRAG_LLM_MODEL", llama_server.model)
    args = [
        "--questions", str(data / "gutenqa.jsonl"), "--limit", "2", "--top-k", "2",
        "--answer-tokens", "48",
        "--judge-url", llama_server.api_base, "--judge-model", llama_server.model,
        "--judge-retries", "1", "--timeout", "900",  # a busy 2-core machine can be slow
    ]  # fmt: skip
    run = _run(data, cache, tmp_path, *args)
    assert run["answers_generated"] == 2
    # the answering LLM is named with the client that reached it (LITRAG_LLM_BACKEND)
    assert run["config"]["llm"] == f"{llama_server.model} at {llama_server.api_base} (OpenAILike)"
    assert run["config"]["judge"] == f"{llama_server.model} at {llama_server.api_base} (OpenAILike)"
    for r in run["rows"]:
        assert r["mode"] == "llm" and r["error"] is None and r["prediction"].strip()
        assert r["sources"] and r["contexts"] == 2
        for metric in ("answer_accuracy", "context_relevance"):
            verdict = r["judge"][metric]
            assert [x["prompt"] for x in verdict["ratings"]] in (
                ["aa_direct", "aa_swapped"],
                ["cr_direct", "cr_reader"],
            )
            for rating in verdict["ratings"]:
                assert rating["error"] is None and 1 <= len(rating["replies"]) <= 2
            score = r["scores"][metric]
            assert score is None or 0.0 <= score <= 1.0
    md = (tmp_path / "answers-gutenqa.md").read_text()
    assert "## Judge replies" in md and "`aa_direct`" in md

    again = _run(data, cache, tmp_path, *args)  # answers and verdicts from the cache
    assert again["answers_cached"] == 2 and again["answers_generated"] == 0
    assert again["judge_calls"] == 0 and again["judge_cached"] == 4
    assert [r["prediction"] for r in again["rows"]] == [r["prediction"] for r in run["rows"]]

    # a server reads every block whole by default; a word budget is another prompt: new answers
    assert run["config"]["read_words"] == 0
    budget = _run(data, cache, tmp_path, *args, "--read-words", "110")
    assert budget["config"]["read_words"] == 110 and budget["answers_generated"] == 2
    assert "<= 110 words in all" in (tmp_path / "answers-gutenqa.md").read_text()

    # `--judge local` shares the answering LLM's local server instead of starting another
    shared = AnswerLLM(None, "local", server=llama_server)
    judge, closer = build_judge(Settings(), local=True, answer_llm=shared)
    assert closer is None and judge is not None
    assert judge.identity == f"{llama_server.model_path.stem} (local llama.cpp)"
    assert build_judge(Settings()) == (None, None)


def test_scorer_labels_travel_with_the_run(data: Path, cache: Path) -> None:
    qs, _ = load_gutenqa(data / "gutenqa.jsonl")
    run = evaluate_answers(
        qs[:1], data, cache_dir=cache, generator=Generator(), scorer=AnswerScorer.create(),
        say=lambda _m: None,
    )  # fmt: skip
    assert run.answers_cached + run.answers_generated == 1
    assert set(run.metrics) >= {"em", "f1", "rouge_l", "meteor", "bertscore", "answer_accuracy"}
