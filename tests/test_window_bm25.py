"""BM25 with each block's best sentence window mixed in (window_bm25), through the real embedded
store on a real library: the engine's IDF read back per term, the mixed scores against an
independent computation, the weight reaching the store from the retriever and the settings."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores.types import (
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from test_retriever import WILD, ingested_shelf

from litrag.ingestion.library import Library
from litrag.retrieval.retriever import BookRetriever, RetrievalSettings, loaded_books
from litrag.scoring.bm25 import BM25Encoder, saturation, term_id, tokenize
from litrag.scoring.window_bm25 import mix_scores, rescore
from litrag.segment.sentences import sentence_windows
from litrag.settings import Settings, SettingsError
from litrag.stores.edge_search import query_filter
from litrag.stores.factory import make_vector_store

QUESTION = "Who stole Buck from Judge Miller's place and sold him?"


@pytest.fixture(scope="module")
def home(books_dir, tmp_path_factory) -> Path:
    return ingested_shelf(books_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def store(home) -> Iterator:
    s = make_vector_store(home, "litrag")
    yield s
    s.close()


@pytest.fixture(scope="module")
def wild_nodes(store) -> list:
    return [n for n in store.get_nodes() if n.metadata["book_id"] == WILD]


def _sparse_query(k: int) -> VectorStoreQuery:
    flt = MetadataFilters(filters=[MetadataFilter(key="book_id", value=WILD)])
    return VectorStoreQuery(
        query_str=QUESTION, similarity_top_k=k, mode=VectorStoreQueryMode.SPARSE, filters=flt
    )


def _reference_idf(nodes: list) -> dict[str, float]:
    """Lucene idf of each question stem over the book's blocks, counted here from the texts."""
    docs = [set(tokenize(n.get_content(metadata_mode=MetadataMode.EMBED))) for n in nodes]
    out = {}
    for term in set(tokenize(QUESTION)):
        df = sum(term in d for d in docs)
        if df:
            out[term] = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
    return out


def test_engine_idf_is_read_back_per_term(store, wild_nodes):
    q = _sparse_query(10)
    got = store._search().query_idf(q, query_filter(q))
    want = {term_id(t): v for t, v in _reference_idf(wild_nodes).items()}
    assert got.keys() == want.keys() and len(got) >= 4
    assert got == pytest.approx(want, rel=1e-4)


def test_mixed_scores_match_an_independent_computation(store, wild_nodes):
    pool = 40
    plain = store.query(_sparse_query(pool), sparse_window_weight=0.0)
    mixed = store.query(_sparse_query(pool), sparse_window_weight=0.3)
    assert set(mixed.ids) == set(plain.ids)  # the same candidates, re-ordered
    idf = _reference_idf(wild_nodes)
    text = {n.node_id: n.get_content(metadata_mode=MetadataMode.NONE) for n in plain.nodes}
    windows = {i: [Counter(tokenize(w)) for w in sentence_windows(text[i])] for i in plain.ids}
    avg = sum(sum(c.values()) for ws in windows.values() for c in ws) / sum(
        len(ws) for ws in windows.values()
    )
    enc = BM25Encoder()

    def best(i: str) -> float:
        return max(
            sum(
                v * saturation(c[t], sum(c.values()), avg, enc.k1, enc.b)
                for t, v in idf.items()
                if c[t]
            )
            for c in windows[i]
        )

    block = dict(zip(plain.ids, plain.similarities, strict=True))
    top_w = max(best(i) for i in plain.ids)
    top_b = max(block.values())
    want = {i: 0.3 * best(i) / top_w + 0.7 * block[i] / top_b for i in plain.ids}
    assert dict(zip(mixed.ids, mixed.similarities, strict=True)) == pytest.approx(want, rel=1e-4)
    assert mixed.ids == sorted(want, key=lambda i: -want[i])
    assert mixed.ids != plain.ids  # the windows do re-order this book's candidates


def test_window_weight_widens_the_pool_then_cuts_back(store):
    few = store.query(_sparse_query(3), sparse_window_weight=0.3)
    wide = store.query(_sparse_query(100), sparse_window_weight=0.3)
    assert len(few.ids) == 3
    assert few.ids == wide.ids[:3]  # the same 100-candidate pool re-scored either way


def test_a_window_dense_with_the_question_lifts_a_long_block():
    """A long block with the question's words together in one window beats a shorter block
    where they are spread, once windows count; the block score alone says the opposite."""
    long_block = (
        "The sled went north. " * 6
        + "Buck pulled the heavy sled over the ice. "
        + ("Snow fell on the camp. " * 6)
    )
    spread = "Buck slept. The camp woke. A sled stood. Ice cracked. Pulled ropes hung. Heavy air."
    idf = {term_id(t): 1.0 for t in tokenize("Buck pulled the heavy sled over ice")}
    texts = [spread, long_block]
    assert [i for i, _ in rescore(texts, [1.0, 0.8], idf, 0.0)] == [0, 1]
    assert [i for i, _ in rescore(texts, [1.0, 0.8], idf, 0.7)] == [1, 0]


def test_mix_scores_scales_by_the_best_and_checks_the_weight():
    assert mix_scores([2.0, 1.0], [0.0, 4.0], 0.5) == pytest.approx([0.5, 0.75])
    assert mix_scores([0.0], [0.0], 0.3) == [0.0]
    with pytest.raises(ValueError, match="within"):
        mix_scores([1.0], [1.0], 1.5)


def test_retriever_passes_its_weight_and_the_setting_is_checked(
    home, store, monkeypatch, wild_nodes
):
    books = loaded_books(Library.read_registry(home))[0]
    on = RetrievalSettings(mode="sparse", sparse_top_k=40, top_k=40)
    off = on.model_copy(update={"bm25_windows": 0.0})
    assert on.bm25_windows == 0.3 and "BM25 windows 0.3" in on.describe()
    got_on = [
        n.node.node_id
        for n in BookRetriever(store, None, WILD, settings=on, books=books).retrieve(QUESTION)
    ]
    got_off = [
        n.node.node_id
        for n in BookRetriever(store, None, WILD, settings=off, books=books).retrieve(QUESTION)
    ]
    assert got_off == store.query(_sparse_query(40), sparse_window_weight=0.0).ids
    assert got_on == store.query(_sparse_query(40), sparse_window_weight=0.3).ids
    assert got_on != got_off
    monkeypatch.setenv("LITRAG_RETRIEVAL_BM25_WINDOWS", "0")
    assert RetrievalSettings.from_settings().bm25_windows == 0.0
    monkeypatch.setenv("LITRAG_RETRIEVAL_BM25_WINDOWS", "1.5")
    with pytest.raises(SettingsError, match="LITRAG_RETRIEVAL_BM25_WINDOWS must be between"):
        Settings()
