"""The question router on real character indexes (The Call of the Wild, whole book; Pride and
Prejudice, chapters 1-8; NER with the packaged spaCy pipeline): varied phrasings of each kind of
question, names by alias, accent and case, possessives that make a question about someone else,
chapter numbers in digits, words, ordinals and roman numerals, and the spoiler limit (a character
first met later is not recognised)."""

from __future__ import annotations

import pytest
from test_narrative_characters import chapters_of, pride  # noqa: F401  (a fixture)

from litrag.narrative.index import build_book_index
from litrag.narrative.router import mentions, route


@pytest.fixture(scope="module")
def wild(books_dir):
    return build_book_index("pg215", chapters_of(books_dir / "pg215_call_of_the_wild.txt", 1, 7))


def routed(question, index, upto=None, chapters=7):
    r = route(question, index, upto_chapter=upto, chapters=chapters)
    return r.tool, {k: v for k, v in r.kwargs.items() if v is not None and k != "query"}


@pytest.mark.parametrize(
    "question",
    [
        "Who is Buck?",
        "who is buck",
        "Who exactly was Buck?",
        "Tell me about Buck.",
        "Tell me more about Buck",
        "What do we know about Buck so far?",
        "What do I know of Buck?",
        "Describe Buck",
        "What kind of dog is Buck?",
        "What sort of animal was Buck?",
        "What is Buck like?",
        "Give me Buck's profile",
        "Buck's personality?",
        "Could you tell me who Buck is?",
        "Remind me who Buck was",
    ],
)
def test_profile_questions(wild, question):
    assert routed(question, wild) == ("character_profile", {"name": "Buck"})


@pytest.mark.parametrize(
    "question",
    [
        "What kind of dog was Buck's father?",  # about the father, not Buck
        "Who is Buck's mother?",
        "Who sold Buck?",
        "How did Curly die?",
        "Where does Buck sleep the first night in camp?",
        "Did Buck kill Spitz?",
        "What does Buck do when Francois and Perrault leave?",  # three names, no relation cue
        "Who is the man in the red sweater?",  # names nobody
        "What is the law of club and fang?",
        "Where did Buck live before he was stolen?",
        "Why does Buck howl at the end?",
        "Does Buck miss Judge Miller in chapter 3?",
    ],
)
def test_detail_questions_search_passages(wild, question):
    assert routed(question, wild)[0] == "search_passages"


@pytest.mark.parametrize(
    ("question", "pair"),
    [
        ("What is the relationship between Buck and Spitz?", ("Buck", "Spitz")),
        ("Buck and Spitz", ("Buck", "Spitz")),
        ("How does Buck's attitude to Thornton change?", ("Buck", "Thornton")),
        ("How do Buck's feelings for John Thornton change over the story?", ("Buck", "Thornton")),
        ("How does Spitz treat Buck?", ("Spitz", "Buck")),
        ("What does Buck think of Spitz?", ("Buck", "Spitz")),
        ("Are Buck and Spitz rivals?", ("Buck", "Spitz")),
        ("Buck & Thornton", ("Buck", "Thornton")),
        ("What is the story of Buck and Thornton?", ("Buck", "Thornton")),
        ("How do Buck and Spitz get along?", ("Buck", "Spitz")),
    ],
)
def test_two_characters_are_a_plotline(wild, question, pair):
    tool, kwargs = routed(question, wild)
    assert tool == "plotline" and (kwargs["name_a"], kwargs["name_b"]) == pair


@pytest.mark.parametrize(
    ("question", "chapter"),
    [
        ("What happens in chapter 3?", 3),
        ("what happened in chapter III", 3),
        ("Summarise chapter two", 2),
        ("Summarize Chapter 4 for me", 4),
        ("Can you give me a summary of chapter 5?", 5),
        ("What is chapter 1 about?", 1),
        ("what happened in the third chapter", 3),
        ("Outline of ch. 6", 6),
        ("What are the main events of chapter seven?", 7),
        ("Recap the last chapter", 4),  # the reader's chapter
        ("What's going on in chapter 2?", 2),
        ("Chapter 3 summary please", 3),
        ("What did I miss in chapter four?", 4),
    ],
)
def test_chapter_questions_are_an_outline(wild, question, chapter):
    assert routed(question, wild, upto=4) == ("chapter_outline", {"chapter": chapter})


@pytest.mark.parametrize(
    ("question", "span"),
    [
        ("What happens between chapters 2 and 4?", (2, 4)),
        ("What happened from chapter 1 to chapter 3?", (1, 3)),
        ("Summarise chapters 2-5", (2, 5)),
        ("What happens between chapter five and chapter two?", (2, 5)),
        ("Tell me about chapters 3 through 6", (3, 6)),
    ],
)
def test_chapter_spans_are_events_between(wild, question, span):
    tool, kwargs = routed(question, wild)
    assert tool == "events_between" and (kwargs["chapter_from"], kwargs["chapter_to"]) == span


def test_a_span_about_a_character_keeps_the_name(wild):
    tool, kwargs = routed("What happens to Buck between chapters 2 and 4?", wild)
    assert tool == "events_between" and kwargs == {
        "chapter_from": 2,
        "chapter_to": 4,
        "name": "Buck",
    }


@pytest.mark.parametrize(
    "question",
    [
        "What is the book about?",
        "What's this story about?",
        "Summarise the story so far",
        "Give me a summary of the novel",
        "What has happened so far?",
        "Catch me up",
        "recap please",
        "so what's the plot?",
    ],
)
def test_the_story_so_far_is_events_from_chapter_one_to_the_limit(wild, question):
    assert routed(question, wild, upto=3) == (
        "events_between",
        {"chapter_from": 1, "chapter_to": 3},
    )
    assert routed(question, wild)[1]["chapter_to"] == 7  # no limit: the whole book


@pytest.mark.parametrize(
    "question",
    [
        "When does Spitz first appear?",
        "When is Spitz first mentioned?",
        "When do we first meet Spitz?",
        "Where is Spitz introduced?",
        "Tell me Spitz's story",
        "What is Spitz's arc?",
        "What happens to Spitz?",
        "How does Spitz change?",
        "When did Spitz show up?",
        "What becomes of Spitz?",
        "What has Spitz been through so far?",
    ],
)
def test_arc_and_first_appearance_are_a_timeline(wild, question):
    assert routed(question, wild) == ("character_timeline", {"name": "Spitz"})


def test_names_by_alias_accent_and_case(wild, pride):  # noqa: F811
    assert routed("Who is François?", wild)[1] == {"name": "Francois"}  # the text has no accent
    assert routed("who is john thornton", wild)[1] == {"name": "Thornton"}
    assert routed("Tell me about Sol-leks", wild)[1] == {"name": "Sol-leks"}
    darcy = pride.resolve("Mr. Darcy").name
    lizzy = pride.resolve("Lizzy").name
    assert routed("Who is Mr. Darcy?", pride, chapters=8)[1] == {"name": darcy}
    assert routed("Who is Darcy?", pride, chapters=8)[1] == {"name": darcy}
    tool, kwargs = routed("How does Lizzy feel about Mr. Darcy?", pride, chapters=8)
    assert tool == "plotline" and (kwargs["name_a"], kwargs["name_b"]) == (lizzy, darcy)
    # "Mr. Bennet" is one name, not "Bennet" of another family member
    (m,) = mentions("What is Mr. Bennet like?", pride)
    assert m.text == "Mr. Bennet" and m.character.id == pride.resolve("Mr. Bennet").id


def test_a_character_met_later_is_not_recognised(wild):
    spitz = wild.by_id("spitz")
    before = spitz.first_chapter - 1
    assert routed("Who is Spitz?", wild, upto=before)[0] == "search_passages"
    assert routed("Who is Spitz?", wild, upto=spitz.first_chapter)[0] == "character_profile"
    r = route("Buck and Spitz", wild, upto_chapter=before, chapters=7)
    assert r.tool == "search_passages" and "names no character" not in r.reason
    thornton = wild.by_id("thornton")
    assert mentions("Who is John Thornton?", wild, thornton.first_chapter - 1) == []


def test_without_an_index_only_chapter_questions_route():
    assert routed("Who is Buck?", None)[0] == "search_passages"
    assert routed("What happens in chapter 2?", None) == ("chapter_outline", {"chapter": 2})
    assert routed("What is the book about?", None, upto=2)[1] == {
        "chapter_from": 1,
        "chapter_to": 2,
    }
    r = route("What happened?", None, upto_chapter=None, chapters=None)
    assert r.tool == "search_passages"


@pytest.mark.parametrize(
    ("question", "tool"),
    [("Who is Buck?", "character_profile"), ("Tell me Buck's story so far", "character_timeline")],
)
def test_a_routed_character_question_carries_the_spoiler_limit(wild, question, tool):
    """The route (what `litrag ask --json` shows) said ``upto_chapter: None`` while a limit
    applied; it shows the limit the tool runs with."""
    limited = route(question, wild, upto_chapter=2, chapters=7)
    assert (limited.tool, limited.kwargs) == (tool, {"name": "Buck", "upto_chapter": 2})
    whole = route(question, wild, upto_chapter=None, chapters=7)
    assert whole.kwargs == {"name": "Buck", "upto_chapter": None}
