"""LumberChunker: reply parsing, windows, retries and fallback (scripted LLM), the reply cache,
and one run through the real local llama.cpp server on chapters of a real book."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import BaseNode
from scripted_llm import ScriptedLLM

from litrag.chunkers.baselines import ParagraphNodeParser, dynamic_merge, word_count
from litrag.chunkers.lumberchunker import (
    FALLBACK,
    LAST,
    VALID,
    LumberChunkerNodeParser,
    parse_answer,
    window_end,
)
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.segment.llm_calls import LLMUnavailableError


@pytest.fixture(scope="module")
def alice(books_dir: Path) -> list[Document]:
    return split_chapters(load_book(books_dir / "pg11_alice_in_wonderland.txt"))


def shown_ids(messages: list[ChatMessage]) -> list[int]:
    """The IDs of the window in a request (its first user message)."""
    user = next(m.content for m in messages if m.role.value == "user")
    return [int(x) for x in re.findall(r"^ID (\d{4}):", user or "", flags=re.M)]


def pick(offset: int):
    """A scripted reply naming the window's ID at ``offset`` (clamped to the window)."""

    def reply(messages: list[ChatMessage]) -> str:
        ids = shown_ids(messages)
        return f"Answer: ID {ids[min(offset, len(ids) - 1)]:04d}"

    return reply


def assert_exact_cover(doc: Document, nodes: list[BaseNode]) -> None:
    """Nodes are exact slices, in order, without overlap, losing nothing but whitespace."""
    pos = 0
    for node in nodes:
        assert doc.text[node.start_char_idx : node.end_char_idx] == node.get_content()
        assert node.start_char_idx >= pos
        assert doc.text[pos : node.start_char_idx].strip() == ""
        pos = node.end_char_idx
    assert doc.text[pos:].strip() == ""


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Answer: ID 0005", 5),
        ("answer: id 12.", 12),
        ("**Answer:** ID 0007", 7),
        ("Answer: ID0009", 9),
        ("<think>ID 0003 looks similar to ID 0002.</think>\nAnswer: ID 0011", 11),
        ("Answer: ID 0003\nOn reflection, Answer: ID 0004", 4),
        ("ID 0004", 4),
        ("The content shifts at paragraph 0012.", 12),
        ("ID 0003 or ID 0005", None),
        ("I cannot tell.", None),
        ("", None),
    ],
)
def test_parse_answer(reply: str, expected: int | None) -> None:
    assert parse_answer(reply) == expected


def test_window_end_by_hand() -> None:
    words = [100, 200, 200, 100, 600, 10]
    assert window_end(words, 0, 550) == 3  # 100+200+200 = 500; +100 would be 600
    assert window_end(words, 3, 550) == 5  # two units at least, even past the budget
    assert window_end(words, 4, 550) == 6
    assert window_end(words, 5, 550) == 6  # one unit left
    assert window_end(words, 0, 1000) == 4


def test_valid_replies_cut_where_the_llm_says(alice: list[Document]) -> None:
    doc = alice[0]
    llm = ScriptedLLM([pick(2)] * 40)
    parser = LumberChunkerNodeParser(llm=llm)
    nodes = parser.get_nodes_from_documents([doc])
    assert_exact_cover(doc, nodes)
    units = ParagraphNodeParser().split_spans(doc.text)
    words = [word_count(doc.text[a:b]) for a, b in units]
    # the reply names the window's third unit: two units per chunk (one when the window has two)
    expected, start = [], 0
    while start < len(units):
        size = min(2, window_end(words, start) - start - 1) or 1
        expected.append(size)
        start += size
    assert [n.metadata["unit_to"] - n.metadata["unit_from"] + 1 for n in nodes] == expected
    assert {n.metadata["lumber_outcome"] for n in nodes[:-1]} == {VALID}
    assert nodes[-1].metadata["lumber_outcome"] in (VALID, LAST)
    assert parser.summary.llm_calls == len(llm.requests) == parser.summary.valid
    # the request: our system prompt, then the window, 550 words at most beyond the 2-unit floor
    first = llm.requests[0]
    assert "first paragraph" in (first[0].content or "") and "Answer: ID XXXX" in first[0].content
    ids = shown_ids(first)
    assert ids[0] == 1 and ids == list(range(1, len(ids) + 1))
    assert sum(word_count(doc.text[a:b]) for a, b in units[: len(ids)]) <= 550
    assert sum(word_count(doc.text[a:b]) for a, b in units[: len(ids) + 1]) > 550
    # bookkeeping stays out of the embedding view; the book's metadata stays in
    assert "lumber_outcome" in nodes[0].excluded_embed_metadata_keys
    assert nodes[0].metadata["book_id"] == "pg11"


def test_retries_state_the_problem_then_succeed(alice: list[Document]) -> None:
    doc = alice[0]
    garbage, first_id = "I think the text is about a rabbit.", pick(0)
    llm = ScriptedLLM([garbage, first_id, "Answer: ID 9999", pick(3)] + [pick(5)] * 40)
    parser = LumberChunkerNodeParser(llm=llm, max_retries=5)
    nodes = parser.get_nodes_from_documents([doc])
    assert_exact_cover(doc, nodes)
    assert nodes[0].metadata["lumber_attempts"] == 4
    assert (nodes[0].metadata["unit_from"], nodes[0].metadata["unit_to"]) == (1, 3)
    assert parser.summary.retries == 3
    retries = [r[-1].content or "" for r in llm.requests[1:4]]
    assert "names no paragraph ID" in retries[0]
    assert "ID 0001 is the first paragraph shown" in retries[1]
    assert "ID 9999 is not one of the paragraphs shown" in retries[2]
    assert all("from ID 0002 to ID" in r for r in retries)
    # a retry repeats the window and shows the model its own reply
    assert llm.requests[1][1].content == llm.requests[0][1].content
    assert llm.requests[1][2].content == garbage


@pytest.mark.parametrize(("mode", "units"), [("first", 1), ("window", None)])
def test_fallback_after_retries(alice: list[Document], mode: str, units: int | None) -> None:
    doc = alice[0]
    llm = ScriptedLLM(["no idea"] * 3 + [pick(1)] * 40)
    parser = LumberChunkerNodeParser(llm=llm, max_retries=2, fallback=mode)
    nodes = parser.get_nodes_from_documents([doc])
    assert_exact_cover(doc, nodes)
    head = nodes[0].metadata
    assert head["lumber_outcome"] == FALLBACK and head["lumber_attempts"] == 3
    window = len(shown_ids(llm.requests[0]))
    assert head["unit_to"] == (units or window)
    assert parser.summary.fallback == 1 and parser.summary.valid == len(nodes) - 1 - (
        nodes[-1].metadata["lumber_outcome"] == LAST
    )


def test_failed_calls_are_attempts_and_an_unreachable_llm_is_an_error(
    alice: list[Document],
) -> None:
    doc = alice[0]
    llm = ScriptedLLM([RuntimeError("500 from the server"), pick(1)] + [pick(1)] * 40)
    nodes = LumberChunkerNodeParser(llm=llm).get_nodes_from_documents([doc])
    assert nodes[0].metadata["lumber_attempts"] == 2
    with pytest.raises(LLMUnavailableError):
        down = ScriptedLLM([ConnectionError("refused")])
        LumberChunkerNodeParser(llm=down).get_nodes_from_documents([doc])


def test_reply_cache_replays_a_rerun(alice: list[Document], tmp_path: Path) -> None:
    docs = alice[:2]
    first = LumberChunkerNodeParser(llm=ScriptedLLM([pick(3)] * 80), cache_dir=tmp_path)
    nodes = first.get_nodes_from_documents(docs)
    assert first.summary.cached_calls == 0 and first.summary.llm_calls > 4
    again = LumberChunkerNodeParser(llm=ScriptedLLM([]), cache_dir=tmp_path)  # no replies left
    nodes2 = again.get_nodes_from_documents(docs)
    assert again.summary.cached_calls == again.summary.llm_calls == first.summary.llm_calls
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes2] == [
        (n.start_char_idx, n.end_char_idx) for n in nodes
    ]
    for doc in docs:
        assert_exact_cover(doc, [n for n in nodes if n.ref_doc_id == doc.id_])


def test_sentence_units_and_dynamic_merge(alice: list[Document]) -> None:
    doc = alice[2]
    parser = LumberChunkerNodeParser(llm=ScriptedLLM([pick(1)] * 400), unit="sentence")
    nodes = parser.get_nodes_from_documents([doc])
    assert_exact_cover(doc, nodes)
    assert all(n.metadata["unit_to"] == n.metadata["unit_from"] for n in nodes)  # one sentence
    merged = dynamic_merge(
        LumberChunkerNodeParser(llm=ScriptedLLM([pick(1)] * 400), unit="sentence")
    ).get_nodes_from_documents([doc])
    assert_exact_cover(doc, merged)
    assert len(merged) < len(nodes) / 4
    assert all(word_count(n.get_content()) <= 200 for n in merged if "merged_nodes" in n.metadata)


def chapter_openings(docs: list[Document], paragraphs: int) -> list[Document]:
    """The first paragraphs of each chapter, as documents with the chapter's metadata."""
    out = []
    for doc in docs:
        end = ParagraphNodeParser().split_spans(doc.text)[paragraphs - 1][1]
        out.append(Document(text=doc.text[:end], metadata=dict(doc.metadata)))
    return out


@pytest.mark.llm
def test_lumberchunker_through_llama_cpp_server(llama_server, alice: list[Document], tmp_path):
    """SmolLM2 picks cuts (or fails and falls back); the chapters come out covered exactly.

    The openings of three chapters (about 600 words each, two windows) keep the calls few on a
    shared 2-core machine; fallback "window" bounds them when the tiny model fails.
    """
    from litrag.models.llama_server import openai_like

    llm = openai_like(llama_server.api_base, llama_server.model, context_window=8192)
    docs = chapter_openings(alice[:3], paragraphs=8)
    parser = LumberChunkerNodeParser(
        llm=llm, max_retries=1, fallback="window", cache_dir=tmp_path, num_workers=1
    )
    assert parser.llm_identity.startswith("OpenAILike:local@http://127.0.0.1:")
    nodes = parser.get_nodes_from_documents(docs)
    for doc in docs:
        assert_exact_cover(doc, [n for n in nodes if n.ref_doc_id == doc.id_])
    s = parser.summary
    assert s.llm_calls >= s.decisions >= len(docs) and s.prompt_tokens > 300 * s.llm_calls
    assert s.valid + s.fallback == s.decisions
    assert {n.metadata["lumber_outcome"] for n in nodes} <= {VALID, FALLBACK, LAST}
    # the rerun replays every reply from the cache
    again = LumberChunkerNodeParser(
        llm=llm, max_retries=1, fallback="window", cache_dir=tmp_path, num_workers=1
    )
    assert [n.get_content() for n in again.get_nodes_from_documents(docs)] == [
        n.get_content() for n in nodes
    ]
    assert again.summary.cached_calls == again.summary.llm_calls == s.llm_calls
