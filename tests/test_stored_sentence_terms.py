"""The embedded store's fast query path ranks exactly as the plain one.

The store keeps each point's sentences' BM25 term ids (packed, ``kept_terms``; as lists in the
version before) so that a query re-scores its pool of 100 candidates without splitting their
sentences again (Punkt was ~90% of a children hybrid query; ``bench_retrieval_scale.py``); the
pool is read without node text, ids are fused before any node is decoded (``query_hits``), the
retriever reads only the blocks it can return, and the IDF read back per query term is kept per
filter until the next write. These tests hold that none of it changes a ranking: on a real book
in a real Edge store, children and blocks come back with the same ids, order, scores and
evidence (with a spoiler limit) as from the text, through nodes, with nothing cached; and a write
(a book added to or deleted from the selection) drops what was cached.
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

from litrag.chunkers.children import PARENT_KEY
from litrag.retrieval.evidence import EVIDENCE_KEYS
from litrag.retrieval.retriever import BookRetriever, RetrievalSettings
from litrag.scoring import window_bm25
from litrag.scoring.bm25 import BM25Encoder
from litrag.scoring.kept_terms import unpack_terms
from litrag.scoring.window_bm25 import sentence_terms, window_terms, windows_of
from litrag.scoring.windows import SentenceWindowEncoder
from litrag.stores import edge_points, edge_search, edge_store
from litrag.stores.edge_points import SENTENCE_PACKED_KEY, SENTENCE_TERMS_KEY, node_id_to_point_id
from litrag.stores.factory import CHILD_AVG_LEN, make_vector_store

WILD_FILE = "pg215_call_of_the_wild.txt"
SPARSE = VectorStoreQueryMode.SPARSE
HYBRID = VectorStoreQueryMode.HYBRID
BOOK = MetadataFilters(filters=[MetadataFilter(key="book_id", value="pg215")])


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
        points = list(store.scan_points(payload_keys=["_node_id", SENTENCE_PACKED_KEY]))
        assert len(points) == len(nodes)
        text = {n.node_id: n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes}
        for p in points:
            want = sentence_terms(text[p.payload["_node_id"]])
            assert unpack_terms(p.payload[SENTENCE_PACKED_KEY]) == want


@pytest.mark.parametrize("before", ["nothing", "lists"])
def test_a_store_written_before_ranks_the_same(stores, wild, questions, before, tmp_path):
    """A library of an older version: no kept ids (re-scored from the text), or the nested
    lists of the version before (read as they are)."""
    with pytest.MonkeyPatch.context() as mp:
        if before == "nothing":
            mp.setattr(edge_store, "pack_terms", lambda _terms: None)
        else:
            mp.setattr(edge_store, "pack_terms", lambda terms: terms)
            mp.setattr(edge_points, "SENTENCE_PACKED_KEY", SENTENCE_TERMS_KEY)
        old = _write(tmp_path, *wild)
    try:
        point = next(iter(old[1].scan_points(limit=1, payload_keys=["_node_id"])))
        assert SENTENCE_PACKED_KEY not in point.payload
        kept = next(iter(old[1].scan_points(limit=1, payload_keys=[SENTENCE_TERMS_KEY]))).payload
        assert (SENTENCE_TERMS_KEY in kept) == (before == "lists")
        for mode in (SPARSE, HYBRID):
            with pytest.MonkeyPatch.context() as mp:
                if before == "lists":
                    _no_sentence_splitting(mp)  # the lists are read, not the text
                got = _children_results(old[1], questions, mode, 0.3, BOOK, Vectors())
            with pytest.MonkeyPatch.context() as mp:
                _from_text(mp)
                text = _children_results(old[1], questions, mode, 0.3, BOOK, Vectors())
            assert [(r.ids, r.similarities) for r in got] == [(r.ids, r.similarities) for r in text]
    finally:
        for store in old:
            store.close()


def _from_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries ignore the kept ids and cut windows from the text, as before they were kept."""
    monkeypatch.setattr(edge_search, "SENTENCE_TERMS_KEY", "_not_kept")
    monkeypatch.setattr(edge_search, "SENTENCE_PACKED_KEY", "_not_kept")


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
        store.query(_child_query(q, embed, mode, flt), sparse_window_weight=weight)
        for q in questions
    ]


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_hits_are_the_query_without_its_nodes(stores, questions, mode):
    store = stores[1]
    embed = Vectors()
    for weight in (0.0, 0.3):
        for q in questions:
            query = _child_query(q, embed, VectorStoreQueryMode(_MODES[mode]), BOOK)
            want = store.query(query, sparse_window_weight=weight)
            hits = store.query_hits(query, [PARENT_KEY], sparse_window_weight=weight)
            assert [h.id for h in hits] == [node_id_to_point_id(i) for i in want.ids or []]
            assert [h.score for h in hits] == want.similarities and hits
            parents = [n.metadata[PARENT_KEY] for n in want.nodes or []]
            assert [h.payload[PARENT_KEY] for h in hits] == parents


_MODES = {"dense": "default", "sparse": "sparse", "hybrid": "hybrid"}


@pytest.mark.parametrize("through", ["children", "blocks"])
@pytest.mark.parametrize("mode", ["hybrid", "sparse", "dense"])
def test_the_retriever_returns_the_same_blocks(stores, questions, through, mode, monkeypatch):
    """The fast path (kept ids, ids fused first, the returned blocks only, the IDF kept) against
    the plain one (windows cut from the text, nodes fused, every ranked block read, the IDF read
    back for every question), with a spoiler limit: same blocks, order, scores, evidence."""
    settings = RetrievalSettings.from_preset("embedded", rank_through=through, mode=mode)
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
    for name in ("text", "kept", "kept again"):
        with monkeypatch.context() as mp:
            if name == "text":
                _from_text(mp)
                mp.setattr(type(children_store), "query_hits", None)  # the nodes' path
            else:
                _no_sentence_splitting(mp)
            results[name] = []
            for q in questions:
                if name == "text":
                    children_store._idf_cache.clear()
                    blocks_store._idf_cache.clear()
                found = retriever.retrieve(q)
                results[name].append(
                    [
                        (n.node_id, n.score, *(n.node.metadata.get(k) for k in EVIDENCE_KEYS))
                        for n in found
                    ]
                )
    assert results["kept"] == results["text"] == results["kept again"]
    assert all(len(r) == settings.top_k for r in results["kept"])
    evidence = [e for r in results["kept"] for _, _, *e in r]
    assert all(e != [None, None] for e in evidence) == (through == "children")


def test_the_idf_kept_per_filter_is_dropped_by_a_write(wild, questions, tmp_path):
    """A second book joins the selection, then leaves it: each write changes the IDF the
    windows are scored with, and every answer equals one with nothing cached."""
    _, children = wild
    store = make_vector_store(
        tmp_path, "kids", encoder=BM25Encoder(avg_len=CHILD_AVG_LEN), window_doc_fn=_windows()
    )
    two = MetadataFilters(
        filters=[MetadataFilter(key="book_id", value=["pg215", "copy"], operator="in")]
    )
    embed = Vectors()

    def answers(fresh: bool) -> list:
        out = []
        for q in questions[:12]:
            if fresh:
                store._idf_cache.clear()
            res = store.query(_child_query(q, embed, HYBRID, two), sparse_window_weight=0.3)
            out.append((res.ids, res.similarities))
        return out

    try:
        store.add(children)
        before = answers(fresh=False)
        assert store._idf_cache and answers(fresh=False) == before == answers(fresh=True)
        store.add(_copies(children[: len(children) // 3]))
        assert not store._idf_cache
        added = answers(fresh=False)
        assert added == answers(fresh=True) and added != before
        store.delete("copy-book")
        assert not store._idf_cache
        assert answers(fresh=False) == answers(fresh=True)
        store.optimize()  # a reopen: the engine's statistics forget the deleted points
        assert answers(fresh=False) == answers(fresh=True) == before
    finally:
        store.close()


def _copies(nodes: list) -> list:
    """The nodes as another book's (new ids, one source document ``copy-book``)."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

    out = []
    for k, node in enumerate(nodes):
        new = node.model_copy(deep=True)
        new.id_ = f"copy-{k}"
        new.metadata["book_id"] = "copy"
        new.relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="copy-book")}
        out.append(new)
    return out


def _child_query(q: str, embed, mode, flt) -> VectorStoreQuery:
    return VectorStoreQuery(
        query_str=q,
        query_embedding=embed.get_query_embedding(q),
        similarity_top_k=20,
        sparse_top_k=20,
        hybrid_top_k=40,
        alpha=0.3,
        mode=mode,
        filters=flt,
    )
