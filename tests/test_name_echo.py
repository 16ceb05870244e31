"""The echo check on real books: an answer that only says the question back ("Who killed
Thornton?" -> "John Thornton killed Thornton", a draft of the packaged 1.5B model) is withdrawn
for the plain reply; an answer that adds anything stands, and no gold answer of the project's
question sets is ever taken for an echo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from test_name_tie import a_run

from litrag.answering.name_check import BookWords, echoed_names, withdraw_unsupported
from litrag.ingestion.gutenberg import load_book

TITLE = "The Call of the Wild"
QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "questions"


@pytest.fixture(scope="module")
def wild(books_dir: Path) -> tuple[list[str], BookWords]:
    text = load_book(books_dir / "pg215_call_of_the_wild.txt").text
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return paragraphs, BookWords.of([text])


def test_a_draft_that_names_only_the_person_asked_about_is_withdrawn(wild):
    paragraphs, words = wild
    # The attack and the morning after: "John Thornton" stands beside "killed" there, so the
    # tie check lets the name through; only the echo check sees that it answers nothing.
    sources = [
        next(p for p in paragraphs if "chief of the Yeehats" in p),
        next(p for p in paragraphs if p.startswith("All day Buck brooded by the pool")),
    ]
    used = [NodeWithScore(node=TextNode(text=t), score=1.0) for t in sources]
    run = a_run("Who killed Thornton?")
    run.text = "John Thornton killed Thornton."
    withdraw_unsupported(run, used, words, TITLE)
    assert run.draft == "John Thornton killed Thornton."
    assert run.withheld == ["John Thornton", "Thornton"]
    assert "do not say" in run.text and "whom the question itself names" in run.text
    assert "Thornton killed" not in run.text


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Who killed Thornton?", "Thornton was killed by the Yeehats."),  # a name added
        ("Who is Spitz?", "Spitz is the leader of the pack."),  # words added
        ("Who did Buck kill first?", "Buck killed a rabbit."),
        ("Who wins the fight, Buck or Spitz?", "Buck"),  # a choice the question offers
        ("Who stole Buck from Judge Miller's place?", "Buck"),  # two people asked about
        ("Is Buck a dog?", "Buck is a dog."),  # not a wh-question
    ],
)
def test_an_answer_that_adds_anything_stands(wild, question, answer):
    _, words = wild
    assert echoed_names(answer, question, words) == []


@pytest.mark.parametrize(
    ("question", "answer", "names"),
    [
        ("Who is Spitz?", "Spitz.", ["Spitz"]),
        ("What is the name of Buck's father?", "Buck", ["Buck"]),
        ("Who is Buck's father?", "Buck's father is Buck.", ["Buck's", "Buck"]),
    ],
)
def test_an_answer_that_adds_nothing_is_an_echo(wild, question, answer, names):
    _, words = wild
    assert echoed_names(answer, question, words) == names


def test_no_gold_answer_of_the_question_sets_is_an_echo(books_dir: Path):
    """Every question of the public GutenQA set and of the project's sets that carries a gold
    answer text, read against its own book: none is taken for an echo."""
    books = {p.name.split("_")[0]: p for p in books_dir.glob("*.txt")}
    words: dict[str, BookWords] = {}
    files = [books_dir.parent / "gutenqa" / "questions.jsonl", *sorted(QUESTIONS.glob("*.jsonl"))]
    checked, echoes = 0, []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            q = json.loads(line) if line.strip() else {}
            answer = q.get("answer")
            book = q.get("book") or Path(q.get("book_file", "")).name.split("_")[0]
            if not isinstance(answer, str) or not answer or book not in books:
                continue
            if book not in words:
                words[book] = BookWords.of([load_book(books[book]).text])
            checked += 1
            if echoed_names(answer, q["question"], words[book]):
                echoes.append((q["question"], answer))
    assert checked > 600, checked
    assert echoes == []


def test_a_chapter_heading_is_not_the_question_s_words(books_dir: Path):
    """A real run: the pair route read passages headed "A Mad Tea-Party"; "mad" is the answer's
    own word there, so the draft stands (it was taken for an echo when the headings counted)."""
    text = load_book(books_dir / "pg11_alice_in_wonderland.txt").text
    words = BookWords.of([text])
    tea = next(p for p in text.split("\n\n") if "March Hare" in p)
    used = [
        NodeWithScore(
            node=TextNode(text=tea, metadata={"chapter_title": "CHAPTER VII. A Mad Tea-Party"}),
            score=1.0,
        )
    ]
    run = a_run("What is the relationship between the Hatter and the March Hare?")
    run.text = "The Hatter and the March Hare are both mad."
    withdraw_unsupported(run, used, words, "Alice's Adventures in Wonderland")
    assert run.draft is None and run.text == "The Hatter and the March Hare are both mad."
