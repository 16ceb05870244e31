"""The tie check on The Call of the Wild's own paragraphs: a name the answer adds must stand in
the passages beside a word the question asks about, else the draft is withdrawn; the API's
stream stops before such a name, and a checked draft that keeps it is sent whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from litrag.answering.answer_types import AnswerRun
from litrag.answering.name_check import (
    BookWords,
    NameGate,
    question_terms,
    tied_names,
    untied_names,
    withdraw_unsupported,
)
from litrag.ingestion.gutenberg import load_book

TITLE = "The Call of the Wild"


@pytest.fixture(scope="module")
def wild(books_dir: Path) -> tuple[list[str], BookWords]:
    text = load_book(books_dir / "pg215_call_of_the_wild.txt").text
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return paragraphs, BookWords.of([text])


def holding(paragraphs: list[str], *needles: str) -> list[str]:
    """The paragraphs that hold each needle (one each), in the book's order."""
    found = [next(p for p in paragraphs if n in p) for n in needles]
    return list(dict.fromkeys(found))


def a_run(question: str) -> AnswerRun:
    return AnswerRun(
        question=question,
        sources=[],
        mode="llm",
        answered_by="a draft",
        retrieval="",
        book_ids=["pg215"],
        upto_chapter=None,
    )


def test_question_terms_leave_out_what_only_asks_for_a_kind_of_answer():
    terms = question_terms("What was the name of Judge Miller's wife?", TITLE)
    assert terms == [frozenset({"judg", "miller"}), frozenset({"wife"})]  # one person, one word
    assert not question_terms("What happens in the book?", TITLE)
    stole = question_terms("Who stole Buck from Judge Miller's place?", TITLE)
    assert stole == [frozenset(x) for x in ({"stole"}, {"buck"}, {"judg", "miller"}, {"place"})]


def test_a_name_beside_the_word_asked_about_is_tied(wild):
    paragraphs, words = wild
    sources = holding(paragraphs, "His father, Elmo", "Mollie and Alice")
    q = "What is the name of Buck's father?"
    assert (
        untied_names("Buck's father is Elmo, a huge St. Bernard.", q, sources, words, TITLE) == []
    )
    assert "elmo" in tied_names(q, sources, words, TITLE)


def test_a_name_a_sentence_after_the_word_asked_about_is_tied(wild):
    """Buck's masters in one sentence, Thornton in the next, Buck in the one before: a real
    draft of the packaged 1.5B model that the pair test (this sentence and the next) withdrew."""
    paragraphs, words = wild
    sources = holding(paragraphs, "His transient masters since he", "Mollie and Alice")
    q = "Who is Buck's last master?"
    assert untied_names("Buck's last master was John Thornton.", q, sources, words, TITLE) == []
    # held, next to "Buck" only (the Judge's daughter): still withdrawn
    assert untied_names("Buck's last master was Mollie.", q, sources, words, TITLE) == ["Mollie"]


def test_a_held_name_given_for_what_the_book_never_names_is_untied(wild):
    paragraphs, words = wild
    sources = holding(paragraphs, "Mollie and Alice", "His father, Elmo")
    q = "What was the name of Judge Miller's wife?"
    assert "Mollie" in " ".join(sources)  # the name is held: the name check lets it pass
    assert untied_names("Judge Miller's wife was named Mollie.", q, sources, words, TITLE) == [
        "Mollie"
    ]


def test_the_right_thief_is_tied_and_a_wrong_one_is_not(wild):
    paragraphs, words = wild
    sources = holding(paragraphs, "night of Manuel's treachery", "Mollie and Alice")
    q = "Who stole Buck from Judge Miller's place?"
    assert untied_names("Manuel stole him and sold him.", q, sources, words, TITLE) == []
    # Ysabel is in the sources (the Mexican hairless at Judge Miller's), never beside a word of
    # the question: the question's "Buck" is everywhere, so the pair test is what decides.
    ysabel = untied_names("Ysabel stole Buck.", q, sources, words, TITLE)
    tied = tied_names(q, sources, words, TITLE)
    assert ("ysabel" in tied) == (ysabel == [])


def test_a_question_that_asks_no_name_is_left_alone(wild):
    """A real draft of the packaged 1.5B model (reader benchmark), right: "Chinese" is named
    in passing; asked "who", the same paragraph ties neither name to "sold Buck"."""
    paragraphs, words = wild
    sources = holding(paragraphs, "He loved to play Chinese lottery")
    draft = "Manuel sold Buck because he loved to play Chinese lottery."
    assert untied_names(draft, "Why did Manuel sell Buck?", sources, words, TITLE) == []
    assert untied_names(draft, "Who sold Buck?", sources, words, TITLE) == ["Manuel", "Chinese"]


def test_an_answer_that_adds_no_name_is_left_alone(wild):
    paragraphs, words = wild
    sources = holding(paragraphs, "Mollie and Alice")
    q = "What was the name of Judge Miller's wife?"
    assert untied_names("The book does not say.", q, sources, words, TITLE) == []
    assert untied_names("Judge Miller's wife is not named.", q, sources, words, TITLE) == []


def test_an_untied_draft_is_withdrawn_and_kept(wild):
    paragraphs, words = wild

    sources = holding(paragraphs, "Mollie and Alice", "His father, Elmo")
    used = [NodeWithScore(node=TextNode(text=t), score=1.0) for t in sources]
    run = a_run("What was the name of Judge Miller's wife?")
    run.text = "Judge Miller's wife was named Mollie."
    withdraw_unsupported(run, used, words, TITLE)
    assert run.draft == "Judge Miller's wife was named Mollie." and run.withheld == ["Mollie"]
    assert "do not say" in run.text and "ties that name" in run.text
    kept = a_run("What is the name of Buck's father?")
    kept.text = "Elmo, a huge St. Bernard."
    withdraw_unsupported(kept, used, words, TITLE)
    assert kept.draft is None and kept.text == "Elmo, a huge St. Bernard."


def test_the_stream_stops_before_an_untied_name(wild):
    paragraphs, _ = wild
    sources = holding(paragraphs, "Mollie and Alice", "His father, Elmo")
    draft = "Judge Miller's wife was named Mollie, they say."
    q = "What was the name of Judge Miller's wife?"
    gate = NameGate([*sources, q], q)
    assert draft[: gate.safe_end(draft)] == "Judge Miller's wife was named "
    elmo = "Buck's father was Elmo, a St. Bernard."
    q2 = "What is the name of Buck's father?"
    assert NameGate([*sources, q2], q2).safe_end(elmo) == len(elmo)


def test_the_book_s_author_is_no_invented_name(wild):
    """A real draft of the packaged 1.5B model: the author is in the blocks' metadata, not in
    their text; the draft stands."""
    paragraphs, words = wild
    sources = holding(paragraphs, "Spitz")
    used = [
        NodeWithScore(node=TextNode(text=t, metadata={"author": "Jack London"}), score=1.0)
        for t in sources
    ]
    run = a_run("Who is Spitz?")
    run.text = "Spitz is a dog in the story The Call of the Wild by Jack London."
    withdraw_unsupported(run, used, words, TITLE)
    assert run.draft is None and run.withheld == []
    bare = [NodeWithScore(node=TextNode(text=t), score=1.0) for t in sources]
    run = a_run("Who is Spitz?")
    run.text = "Spitz is a dog in the story The Call of the Wild by Jack London."
    withdraw_unsupported(run, bare, words, TITLE)
    assert run.withheld == ["Jack", "London"]  # without the metadata: withdrawn, as before
