"""The perplexity chunker: hand-computed boundary rules and loss bookkeeping, then real runs of
SmolLM2 through llama.cpp, in a child process (and what a fault there does to the caller)."""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.schema import BaseNode

from litrag.chunkers.baselines import ParagraphNodeParser
from litrag.chunkers.perplexity import PerplexityNodeParser, perplexity_boundaries, sentence_losses
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.segment.sentences import split_sentences


@pytest.fixture(scope="module")
def opening(books_dir: Path) -> Document:
    """The first eight paragraphs of Alice, chapter I (about 630 words)."""
    doc = split_chapters(load_book(books_dir / "pg11_alice_in_wonderland.txt"))[0]
    end = ParagraphNodeParser().split_spans(doc.text)[7][1]
    return Document(text=doc.text[:end], metadata=dict(doc.metadata))


def assert_exact_slices(doc: Document, nodes: list[BaseNode], overlap_ok: bool) -> None:
    pos = 0
    for node in nodes:
        assert doc.text[node.start_char_idx : node.end_char_idx] == node.get_content()
        assert node.start_char_idx >= (0 if overlap_ok else pos)
        assert doc.text[min(pos, node.start_char_idx) : node.start_char_idx].strip() == ""
        pos = max(pos, node.end_char_idx)
    assert nodes[0].start_char_idx == 0 or doc.text[: nodes[0].start_char_idx].strip() == ""
    assert doc.text[pos:].strip() == ""


def test_perplexity_boundaries_by_hand() -> None:
    # minima at 2 (drop 1.0 on the left) and 5 (drops 0.3 and 0.4: under tau 0.5, not a cut)
    losses = [3.0, 3.0, 2.0, 2.2, 2.4, 2.1, 2.5, math.nan, 1.0, 2.0]
    assert perplexity_boundaries(losses, 0.5) == [2]
    assert perplexity_boundaries(losses, 0.3) == [2, 5]
    assert perplexity_boundaries([1.0, 0.0], 0.5) == []  # no neighbour on the right


def test_sentence_losses_windows_and_context() -> None:
    """Each token's loss goes to the sentence it lies in; context is scored but not counted."""
    text = "Aa bb. Cc dd ee. Ff gg. Hh."
    sentences = split_sentences(text)
    assert len(sentences) == 4
    windows: list[str] = []

    def score(piece: str) -> list[tuple[int, float]]:
        """Each word after the first is a token with log-prob -(its length)."""
        windows.append(piece)
        out, pos = [], 0
        for word in piece.split(" "):
            if pos:
                out.append((pos - 1, -float(len(word))))  # tokens carry their leading space
            pos += len(word) + 1
        return out

    # sizes (words + 1): 3, 4, 3, 2; windows of 7 "tokens", up to 4 of them context
    losses = sentence_losses(
        text, sentences, score, lambda t: len(t.split()), window_tokens=7, context_tokens=4
    )
    assert windows == ["Aa bb. Cc dd ee.", "Cc dd ee. Ff gg.", "Ff gg. Hh."]
    # "Aa" opens the text: only "bb." (3); "Cc dd ee." (2 + 2 + 3) / 3, scored in window 1 only;
    # "Ff gg." (2 + 3) / 2 after its context; "Hh." 3
    assert losses == pytest.approx([3.0, 7 / 3, 2.5, 3.0])


@pytest.mark.llm
def test_perplexity_chunker_with_llama_cpp(opening: Document, tmp_path: Path) -> None:
    from litrag.models.llama_server import smollm2_path

    parser = PerplexityNodeParser.from_model_path(
        smollm2_path(), window_tokens=512, context_tokens=128, cache_dir=tmp_path
    )
    nodes = parser.get_nodes_from_documents([opening])
    assert len(nodes) >= 2
    assert_exact_slices(opening, nodes, overlap_ok=True)
    sentences = split_sentences(opening.text)
    losses = parser.losses(opening.text, sentences)  # from the cache now
    assert all(0.0 < x < 20.0 for x in losses[1:])  # nats per token of a real model
    # every chunk but the first starts with the minimum sentence that ended the one before
    for a, b in pairwise(nodes):
        assert a.get_content().endswith(opening.text[b.start_char_idx : a.end_char_idx])
        assert b.start_char_idx < a.end_char_idx
    # a rerun with no model at all reads the cached losses
    again = PerplexityNodeParser(
        lambda: pytest.fail("the model must not load"),
        scorer_name=parser.scorer_name,
        lazy=True,
        window_tokens=512,
        context_tokens=128,
        cache_dir=tmp_path,
    )
    assert [n.get_content() for n in again.get_nodes_from_documents([opening])] == [
        n.get_content() for n in nodes
    ]


@pytest.mark.llm
def test_perplexity_scorer_fault_ends_the_child_not_the_caller(opening: Document) -> None:
    """llama.cpp runs in a child: a fault there (SIGILL here) is a clear error in the caller."""
    import os
    import signal

    from litrag.chunkers.perplexity import ChildTokenLogprobs
    from litrag.models.llama_server import LocalModelError, smollm2_path

    scorer = ChildTokenLogprobs(smollm2_path(), n_ctx=512)
    try:
        scored = scorer(opening.text[:400])
        ids = scorer.tokens(opening.text[:400])
        assert len(scored) == len(ids) - 1 and all(lp <= 0.0 for _, lp in scored)
        assert scorer.pid is not None
        os.kill(scorer.pid, signal.SIGILL)
        with pytest.raises(LocalModelError) as err:
            scorer(opening.text[:400])
        message = str(err.value)
        assert f"the llama.cpp scorer (pid {scorer.pid}) crashed: killed by SIGILL" in message
        assert "illegal instruction" in message
    finally:
        scorer.close()
