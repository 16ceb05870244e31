"""Sentence indexing over the real books: exact spans, 1-based contiguous indices, markers."""

from __future__ import annotations

import itertools

import pytest

from litrag.segment.sentences import split_sentences

BOOK_FILES = [
    "pg11_alice_in_wonderland.txt",
    "pg84_frankenstein.txt",
    "pg158_emma.txt",
    "pg215_call_of_the_wild.txt",
    "pg1342_pride_and_prejudice.txt",
    "pg1661_adventures_of_sherlock_holmes.txt",
]


@pytest.mark.parametrize("name", BOOK_FILES)
def test_spans_slice_the_source_exactly(books_dir, name):
    raw = (books_dir / name).read_bytes().decode("utf-8-sig", errors="replace")
    text = raw.replace("\r\n", "\n")
    sentences = split_sentences(text)
    assert len(sentences) > 500
    assert [s.index for s in sentences] == list(range(1, len(sentences) + 1))
    for s in sentences:
        assert text[s.start : s.end] == s.text
        assert s.text == s.text.strip() and s.text
    starts = [s.start for s in sentences]
    assert starts == sorted(starts)
    assert all(a.end <= b.start for a, b in itertools.pairwise(sentences))
    # nothing but whitespace and scene-break ornaments lies between sentences
    for a, b in itertools.pairwise(sentences):
        gap = text[a.end : b.start]
        assert not gap.strip() or set(gap.strip()) <= set("*#~=_-·• \n"), repr(gap[:80])


def test_paragraph_starts_and_scene_breaks():
    text = "First one. Second one.\n\nNew paragraph here.\n\n* * *\n\nAfter the break. Again."
    s = split_sentences(text)
    assert [x.text for x in s] == [
        "First one.",
        "Second one.",
        "New paragraph here.",
        "After the break.",
        "Again.",
    ]
    assert [x.paragraph_start for x in s] == [True, False, True, True, False]
    assert [x.scene_break for x in s] == [False, False, False, True, False]
    assert [x.paragraph for x in s] == [0, 0, 1, 2, 2]


def test_long_blank_run_is_a_scene_break():
    s = split_sentences("One.\n\nTwo.\n\n\n\n\nThree.")
    assert [x.scene_break for x in s] == [False, False, True]


def test_over_long_sentences_are_cut_at_clauses():
    clause = "and then the dog ran along the river bank in the cold morning light, "
    text = "It began " + clause * 30 + "and it ended."
    s = split_sentences(text, max_sentence_words=50)
    assert len(s) > 5
    assert all(x.words <= 50 for x in s)
    assert all(x.text.endswith(",") for x in s[:-1])
    assert all(text[x.start : x.end] == x.text for x in s)


def test_empty_text():
    assert split_sentences("") == []
    assert split_sentences("\n\n   \n") == []
