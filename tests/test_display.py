"""What a reader is shown of a block (``litrag.app.display``): a phrase of the book, not keywords,
on the real blocks of two books the phrase picker was not written from."""

from __future__ import annotations

import re

import pytest

from litrag import LitSegNodeParser
from litrag.app.display import PHRASE_WORDS, display_subtitle, is_keyword_subtitle
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book


@pytest.fixture(scope="module")
def blocks(books_dir):
    """The offline blocks of Alice's first two chapters and Frankenstein's first two letters."""
    out = []
    for name, count in (("pg11_alice_in_wonderland.txt", 2), ("pg84_frankenstein.txt", 2)):
        chapters = split_chapters(load_book(books_dir / name))[:count]
        out += LitSegNodeParser().get_nodes_from_documents(chapters)
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[\w']+", text.lower().replace("\u2019", "'"))


def test_a_keyword_subtitle_is_told_from_a_phrase():
    assert is_keyword_subtitle("Miller, Arctic: cool, house, strong")
    assert is_keyword_subtitle("Alice: rabbit, watch") and is_keyword_subtitle("Buck")
    assert not is_keyword_subtitle("Buck is stolen from Judge Miller's place")
    assert not is_keyword_subtitle("The fight with Spitz.")


def test_every_block_gets_a_phrase_of_its_own_text(blocks):
    assert len(blocks) > 20
    for node in blocks:
        subtitle = node.metadata["subtitle"]
        assert is_keyword_subtitle(subtitle), subtitle  # what the offline segmenter writes
        shown = display_subtitle(subtitle, node.text)
        assert shown != subtitle and not is_keyword_subtitle(shown), (subtitle, shown)
        assert 3 <= len(shown.replace("…", "").split()) <= PHRASE_WORDS, shown
        # the phrase is the book's own words, in the block's order
        assert " ".join(_words(shown)) in " ".join(_words(node.text)), (shown, node.text[:200])


def test_the_phrase_holds_what_the_subtitle_names(blocks):
    """Most phrases hold a name or word of the subtitle: the telling sentence, not the first."""
    holding = 0
    for node in blocks:
        subtitle = node.metadata["subtitle"]
        terms = set(_words(subtitle))
        holding += bool(terms & set(_words(display_subtitle(subtitle, node.text))))
    assert holding >= 0.8 * len(blocks), f"{holding} of {len(blocks)}"


def test_a_phrase_subtitle_is_shown_as_written():
    text = "Buck did not read the newspapers. Trouble was brewing."
    assert display_subtitle("Trouble brewing for Buck.", text) == "Trouble brewing for Buck."
    # a block too short for any sentence keeps its subtitle
    assert display_subtitle("Buck: dog", "Buck ran.") == "Buck: dog"
