"""Question-focused excerpts with the real packaged MiniLM on a real passage of The Call of the
Wild (chapter I, Manuel sells Buck at the flag station)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from litrag.answering.focus import GAP, PassageFocus
from litrag.models.embedders import WindowedEmbedding
from litrag.segment.sentences import split_sentences

BOOK = Path(__file__).resolve().parents[1] / "litrag" / "data" / "pg215_call_of_the_wild.txt"


@pytest.fixture(scope="module")
def embed() -> WindowedEmbedding:
    return WindowedEmbedding(embed_batch_size=32)


@pytest.fixture(scope="module")
def passage() -> str:
    text = BOOK.read_text(encoding="utf-8-sig")
    start = text.index("And this was the manner of dog Buck was")
    end = text.index("flagged and the two men threw him into the baggage car.")
    return (
        " ".join(text[start:end].split())
        + " flagged and the two men threw him into the baggage car."
    )


def test_excerpt_keeps_the_sentence_that_answers(embed, passage):
    focus = PassageFocus(embed, max_words=60)
    (ex,) = focus("Who was paid money by the stranger at the flag station?", [passage])
    assert "money chinked between them" in ex.text
    assert not ex.is_whole and GAP in ex.text
    assert len(ex.text.replace(GAP, "").split()) < len(passage.split()) / 2


def test_excerpt_is_sentences_of_the_passage_in_text_order(embed, passage):
    sents = [s.flat for s in split_sentences(passage)]
    focus = PassageFocus(embed, max_words=50, neighbors=1)
    (ex,) = focus("What did Manuel love to play?", [passage])
    assert list(ex.kept) == sorted(ex.kept) and ex.total == len(sents)
    pieces = [p.strip() for p in ex.text.split(GAP) if p.strip()]
    # each run of kept sentences is contiguous text of the passage, runs in passage order
    pos = -1
    for piece in pieces:
        at = " ".join(sents).find(piece)
        assert at > pos
        pos = at
    # gaps exactly where kept indices jump, and at the ends when the ends were dropped
    jumps = sum(1 for a, b in zip(ex.kept, ex.kept[1:], strict=False) if b != a + 1)
    ends = (ex.kept[0] > 0) + (ex.kept[-1] < ex.total - 1)
    assert ex.text.count(GAP) == jumps + ends
    assert any("Chinese lottery" in sents[i] for i in ex.kept)


def test_budget_holds_except_for_the_first_span(embed, passage):
    sents = [s.flat for s in split_sentences(passage)]
    for budget in (1, 40, 90):
        (ex,) = PassageFocus(embed, max_words=budget, neighbors=1)("Buck's anger", [passage])
        words = sum(len(sents[i].split()) for i in ex.kept)
        assert words <= budget or len(ex.kept) <= 3, (budget, words)
        assert len(ex.kept) >= 1


def test_short_passages_stay_whole_and_empty_ones_pass_through(embed):
    short = "Buck lived at a big house. It stood in the sun-kissed Santa Clara Valley."
    whole, empty = PassageFocus(embed, max_words=200)("Where did Buck live?", [short, ""])
    assert whole.is_whole and GAP not in whole.text
    assert re.sub(r"\s+", " ", whole.text) == short
    assert empty.text == "" and empty.total == 0


def test_the_bm25_share_finds_a_rare_name(embed, passage):
    """With lexical weight 0 the small embedder may miss a name; with the default it may not."""
    (ex,) = PassageFocus(embed, max_words=1, neighbors=0)("Raisin Growers' Association", [passage])
    assert "Raisin Growers' Association" in ex.text


def test_bad_settings_are_refused(embed):
    with pytest.raises(ValueError):
        PassageFocus(embed, max_words=0)
    with pytest.raises(ValueError):
        PassageFocus(embed, neighbors=-1)
