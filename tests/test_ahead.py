"""An ending the reader has not reached: "How does the book end?" with the spoiler limit before
the book's last chapter is answered so, without the LLM, on the answer tests' real shelf (The
Call of the Wild, chapters I-II); the question goes through as usual once nothing lies past the
limit."""

from __future__ import annotations

import pytest
from scripted_llm import ScriptedLLM
from test_answer import embed, engine_for, home  # noqa: F401  (the answer tests' shelf)
from test_retriever import WILD

from litrag.answering.ahead import asks_for_ending

ENDINGS = [
    "How does the book end?",
    "how did the story end",
    "How does it all end?",
    "What happens at the end of the novel?",
    "What does Buck become at the end of the story?",
    "Tell me about the ending",
    "What's the ending?",
    "What happens in the last chapter?",
    "Describe the book's ending.",
    "What happens in the end?",
]
NOT_ENDINGS = [
    "What did Buck do to Spitz in the end?",  # the end of a quarrel, not of the book
    "How did the fight end?",
    "How does chapter 2 end?",
    "Who stole Buck from Judge Miller's place?",
    "What does Buck do at the end of the trail?",
    "Who is the last master of Buck?",
    "Which dog ends up leading the team?",
]


@pytest.mark.parametrize("question", ENDINGS)
def test_questions_on_the_ending_of_the_book_are_known(question):
    assert asks_for_ending(question)


@pytest.mark.parametrize("question", NOT_ENDINGS)
def test_other_ends_are_not_the_book_s(question):
    assert not asks_for_ending(question)


def test_the_ending_past_the_limit_is_said_to_lie_ahead_without_the_llm(engine_for):  # noqa: F811
    llm = ScriptedLLM([])  # any call would fail the test: the scripted LLM has no reply
    engine = engine_for(WILD, llm=llm, upto=1)
    engine.streaming = False
    answer = engine.ask("How does the book end?").answer()
    assert llm.requests == []
    assert answer.mode == "none" and answer.error is None
    assert "lies past chapter 1" in answer.text and "later in the book" in answer.text
    assert answer.sources and all(s.chapter_index <= 1 for s in answer.sources)
    extractive = engine_for(WILD, upto=1).ask("What happens at the end of the story?").answer()
    assert extractive.mode == "none" and "lies past chapter 1" in extractive.text


def test_with_nothing_past_the_limit_the_question_is_answered_as_usual(engine_for):  # noqa: F811
    """The shelf holds chapters I-II: at limit 2 (or none) the last passages are the reader's."""
    for upto in (2, None):
        answer = engine_for(WILD, upto=upto).ask("How does the book end?").answer()
        assert answer.mode == "extractive" and "lies past" not in answer.text
    llm = ScriptedLLM(["Buck is taken north."])
    engine = engine_for(WILD, llm=llm, upto=1)
    engine.streaming = False
    other = engine.ask("How did Buck's life at the Judge's place end?").answer()  # not the book's
    assert len(llm.requests) == 1 and other.text == "Buck is taken north."
