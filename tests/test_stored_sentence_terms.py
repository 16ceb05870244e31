"""BM25 over sentence windows from the sentences' term ids kept in the store.

The store keeps each point's sentences' BM25 term ids (``_sentence_terms``) so that a query
re-scores its pool of 100 candidates without splitting their sentences again (Punkt was ~90% of
a children hybrid query; ``benchmarks/bench_retrieval_scale.py``). These tests hold that the
ranking does not change: on a real book, the windows cut from the kept ids equal the windows cut
from the text, and a real Edge store written with them ranks children and blocks exactly (ids
and scores) as one written without them, without splitting a sentence at query time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores.types import (
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from litrag.query import edge_search, edge_store, window_bm25
from litrag.query.bm25 import BM25Encoder
from litrag.query.edge_points import SENTENCE_TERMS_KEY
from litrag.query.retriever import BookRetriever, RetrievalSettings
from litrag.query.stores import CHILD_AVG_LEN, make_vector_store
from litrag.query.window_bm25 import sentence_terms, window_terms, windows_of
from litrag.query.windows import SentenceWindowEncoder

WILD_FILE = "pg215_call_of_the_wild.txt"
SPARSE = VectorStoreQueryMode.SPARSE


@pytest.fixture(scope="module")
def wild(books_dir: Path) -> tuple[list, list]:
    """The Call of the Wild's aligned blocks and their children, as an ingest cuts them, with
    WordLlama vectors (packaged, fast) standing in for the embedder."""
    from litrag.builders import build_parser
    from litrag.chunkers.children import ParagraphAligner, block_children
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book
    from litrag.segment.offline import StaticVectors
    from litrag.settings import Settings

    docs = split_chapters(load_book(books_dir / WILD_FILE))
    blocks = ParagraphAligner().for_chapters(docs)(build_parser(Settings(), None)(docs))
    children = block_children(blocks, docs)
    vectors = StaticVectors()
    for nodes in (blocks, children):
        for node, vec in zip(nodes, vectors.encode([n.text for n in nodes]), strict=True):
            node.embedding = vec.tolist()
    return blocks, children


@pytest.fixture(scope="module")
def questions(data_dir: Path) -> list[str]:
    rows = (data_dir / "gutenqa" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(r)["question"] for r in rows if WILD_FILE in r]


class Vectors(BaseEmbedding):
    """WordLlama for questions, as the stored vectors."""

    def _get_query_embedding(self, query: str) -> list[float]:
        from litrag.segment.offline import StaticVectors

        return StaticVectors().encode([query])[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_query_embedding(text)


def _windows() -> SentenceWindowEncoder:
    from litrag.segment.offline import StaticVectors

    return SentenceWindowEncoder(lambda texts: StaticVectors().encode(texts))


def _write(home: Path, blocks: list, children: list) -> tuple:
    blocks_store = make_vector_store(home, "litrag", new_windowed=False)
    children_store = make_vector_store(
        home,
        "litrag-children",
        encoder=BM25Encoder(avg_len=CHILD_AVG_LEN),
        window_doc_fn=_windows(),
    )
    blocks_store.add(blocks)
    children_store.add(children)
    return blocks_store, children_store


@pytest.fixture(scope="module")
def stores(wild, tmp_path_factory) -> Iterator[tuple]:
    """The blocks' and the children's collections of the book, written as an ingest writes them."""
    pair = _write(tmp_path_factory.mktemp("kept"), *wild)
    yield pair
    for store in pair:
        store.close()


def test_kept_term_ids_cut_the_same_windows_as_the_text(wild):
    blocks, children = wild
    texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in blocks + children]
    assert len(texts) > 300
    for text in texts:
        assert windows_of(sentence_terms(text)) == window_terms(text)
    for text in ("", "   ", "No full stop here", "One. Two. Three. Four. Five. Six. Seven."):
        assert windows_of(sentence_terms(text)) == window_terms(text)


def test_the_store_keeps_them_beside_every_point(stores, wild):
    for store, nodes in zip(stores, wild, strict=True):
        points = list(store.scan_points(payload_keys=["_node_id", SENTENCE_TERMS_KEY]))
        assert len(points) == len(nodes)
        text = {n.node_id: n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes}
        for p in points[:50]:
            assert p.payload[SENTENCE_TERMS_KEY] == sentence_terms(text[p.payload["_node_id"]])


def test_a_store_written_before_keeps_none_and_still_rescores(wild, tmp_path, monkeypatch):
    monkeypatch.setattr(edge_store, "sentence_terms", lambda _text: None)
    blocks_store, children_store = _write(tmp_path, *wild)
    try:
        point = next(iter(children_store.scan_points(limit=1, payload_keys=["_node_id"])))
        assert SENTENCE_TERMS_KEY not in point.payload
        q = VectorStoreQuery(query_str="Who stole Buck?", sparse_top_k=5, mode=SPARSE)
        assert len(children_store.query(q, sparse_window_weight=0.3).ids or []) == 5
    finally:
        blocks_store.close()
        children_store.close()


def _from_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries ignore the kept ids and cut windows from the text, as before they were kept."""
    monkeypatch.setattr(edge_search, "SENTENCE_TERMS_KEY", "_not_kept")


def _no_sentence_splitting(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("a query split sentences")

    window_bm25.window_terms.cache_clear()
    monkeypatch.setattr("litrag.segment.sentences.split_sentences", refuse)


@pytest.mark.parametrize("mode", [VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.HYBRID])
@pytest.mark.parametrize("weight", [0.3, 1.0])
def test_children_rank_exactly_as_from_the_text(stores, questions, mode, weight, monkeypatch):
    flt = MetadataFilters(filters=[MetadataFilter(key="book_id", value="pg215")])
    embed = Vectors()
    results = {}
    for name in ("text", "kept"):
        with monkeypatch.context() as mp:
            (_from_text if name == "text" else _no_sentence_splitting)(mp)
            results[name] = _children_results(stores[1], questions, mode, weight, flt, embed)
    assert len(questions) >= 20
    for text, kept in zip(results["text"], results["kept"], strict=True):
        assert kept.ids == text.ids and kept.ids
        assert kept.similarities == text.similarities


def _children_results(store, questions, mode, weight, flt, embed) -> list:
    return [
        store.query(
            VectorStoreQuery(
                query_str=q,
                query_embedding=embed.get_query_embedding(q),
                similarity_top_k=20,
                sparse_top_k=20,
                hybrid_top_k=40,
                alpha=0.3,
                mode=mode,
                filters=flt,
            ),
            sparse_window_weight=weight,
        )
        for q in questions
    ]


@pytest.mark.parametrize("through", ["children", "blocks"])
def test_the_retriever_returns_the_same_blocks(stores, questions, through, monkeypatch):
    settings = RetrievalSettings.from_preset("embedded", rank_through=through)
    results = {}
    blocks_store, children_store = stores
    retriever = BookRetriever(
        blocks_store,
        Vectors(),
        "pg215",
        upto_chapter=4,
        settings=settings,
        children_store=children_store,
    )
    for name in ("text", "kept"):
        with monkeypatch.context() as mp:
            (_from_text if name == "text" else _no_sentence_splitting)(mp)
            results[name] = [
                [(n.node_id, n.score) for n in retriever.retrieve(q)] for q in questions
            ]
    assert results["kept"] == results["text"]
    assert all(len(r) == settings.top_k for r in results["kept"])
