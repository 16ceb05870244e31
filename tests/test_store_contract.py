"""One vector-store contract, three backends: ``QdrantEdgeVectorStore`` (Qdrant engine in-process),
LlamaIndex's ``QdrantVectorStore`` and litrag's ``QdrantServerStore`` (its subclass) on
qdrant-client's embedded path (standing in for a server).

Real book paragraphs, real WordLlama sentence vectors, and a tiny deterministic BM25-ish sparse
encoder (term hashes), so dense, sparse and hybrid answers can be checked and compared.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.scoring.windows import SentenceWindowEncoder
from litrag.segment.offline import StaticVectors
from litrag.stores.edge_schema import EdgeStoreConfig
from litrag.stores.edge_store import QdrantEdgeVectorStore, StoreLockedError, node_id_to_point_id

# qdrant-client's embedded mode ignores payload indexes (QdrantVectorStore asks for one on doc_id)
pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

BOOKS = ("pg11_alice_in_wonderland.txt", "pg215_call_of_the_wild.txt", "pg84_frankenstein.txt")
CHAPTERS = 8  # first chapters of each book
PARAS = 6  # first paragraphs (of >= 12 words) of each chapter
COLLECTION = "books"
NS = uuid.UUID("0b3c5d1e-2f40-4a6b-8c7d-9e0f1a2b3c4d")

# --------------------------------------------------------------------------- sparse encoder
_STOP = frozenset(
    "a an and the of to in on at is was it he she i you that his her with as for".split()
)
_K, _B, _AVG = 1.2, 0.75, 60.0


def _terms(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z]+", text.lower()) if len(t) > 1 and t not in _STOP]


def _h(term: str) -> int:
    return zlib.crc32(term.encode()) & 0x7FFFFFFF  # stable across processes, unlike hash()


def sparse_docs(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    """BM25 term-frequency part (the engine's IDF modifier supplies the rest)."""
    idx, vals = [], []
    for text in texts:
        terms = _terms(text)
        tf = Counter(terms)
        norm = _K * (1 - _B + _B * len(terms) / _AVG)
        items = sorted((_h(t), c * (_K + 1) / (c + norm)) for t, c in tf.items())
        idx.append([i for i, _ in items])
        vals.append([v for _, v in items])
    return idx, vals


def sparse_queries(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    idx = [sorted({_h(t) for t in _terms(text)}) for text in texts]
    return idx, [[1.0] * len(i) for i in idx]


# --------------------------------------------------------------------------- corpus
@dataclass
class Corpus:
    nodes: list[TextNode]
    vectors: np.ndarray  # row i = nodes[i]
    book_text: dict[str, str]
    encode: Callable[[list[str]], np.ndarray]

    def ids(self, pred: Callable[[TextNode], bool]) -> set[str]:
        return {n.node_id for n in self.nodes if pred(n)}

    def copy_nodes(self) -> list[TextNode]:
        return [n.model_copy(deep=True) for n in self.nodes]

    @property
    def small(self) -> list[TextNode]:
        return [n for n in self.nodes if n.metadata["chapter_index"] <= 2]


@pytest.fixture(scope="session")
def corpus(books_dir: Path) -> Corpus:
    nodes: list[TextNode] = []
    book_text: dict[str, str] = {}
    for name in BOOKS:
        book = load_book(books_dir / name)
        book_text[book.book_id] = book.text
        for doc in split_chapters(book)[:CHAPTERS]:
            ch = doc.metadata["chapter_index"]
            base = doc.metadata["chapter_start_char"]
            k = 0
            for m in re.finditer(r"[^\n](?:.|\n(?!\n))*", doc.text):
                para = m.group(0)
                if len(para.split()) < 12:
                    continue
                meta = {
                    "book_id": book.book_id,
                    "title": book.title,
                    "chapter_index": ch,
                    "para_index": k,
                }
                nodes.append(
                    TextNode(
                        id_=str(uuid.uuid5(NS, f"{book.book_id}:{ch}:{k}")),
                        text=para,
                        metadata=meta,
                        excluded_embed_metadata_keys=list(meta),
                        excluded_llm_metadata_keys=["para_index"],
                        relationships={
                            NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc.doc_id)
                        },
                        start_char_idx=base + m.start(),
                        end_char_idx=base + m.end(),
                    )
                )
                k += 1
                if k == PARAS:
                    break
    sv = StaticVectors()
    vectors = sv.encode([n.text for n in nodes])
    for n, v in zip(nodes, vectors, strict=True):
        n.embedding = v.tolist()
    return Corpus(nodes, vectors, book_text, sv.encode)


# --------------------------------------------------------------------------- backends
class Backend:
    """Opens and closes one kind of store on a folder, the way an application would."""

    name = ""

    def open(self, path: Path) -> BasePydanticVectorStore:
        raise NotImplementedError

    def close(self, store: BasePydanticVectorStore) -> None:
        raise NotImplementedError


class EdgeBackend(Backend):
    name = "edge"

    def open(self, path: Path) -> BasePydanticVectorStore:
        return QdrantEdgeVectorStore(
            path, COLLECTION, sparse_doc_fn=sparse_docs, sparse_query_fn=sparse_queries
        )

    def close(self, store: BasePydanticVectorStore) -> None:
        store.close()


class ClientBackend(Backend):
    name = "qdrant-client"

    def open(self, path: Path) -> BasePydanticVectorStore:
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient, models

        return QdrantVectorStore(
            collection_name=COLLECTION,
            client=QdrantClient(path=str(path)),
            enable_hybrid=True,
            sparse_doc_fn=sparse_docs,
            sparse_query_fn=sparse_queries,
            sparse_config=models.SparseVectorParams(modifier=models.Modifier.IDF),
        )

    def close(self, store: BasePydanticVectorStore) -> None:
        store.client.close()


class ServerBackend(Backend):
    """litrag's server store (LlamaIndex's QdrantVectorStore subclassed) on local mode."""

    name = "server-store"

    def open(self, path: Path) -> BasePydanticVectorStore:
        from qdrant_client import QdrantClient

        from litrag.stores.server_store import QdrantServerStore

        return QdrantServerStore(
            COLLECTION,
            QdrantClient(path=str(path)),
            sparse_doc_fn=sparse_docs,
            sparse_query_fn=sparse_queries,
        )

    def close(self, store: BasePydanticVectorStore) -> None:
        store.client.close()


BACKENDS = [EdgeBackend(), ClientBackend(), ServerBackend()]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


@pytest.fixture(scope="module", params=BACKENDS, ids=lambda b: b.name)
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, corpus: Corpus
) -> Iterator[BasePydanticVectorStore]:
    """The whole corpus, loaded once per backend: for the tests that only read."""
    backend: Backend = request.param
    s = backend.open(tmp_path_factory.mktemp(backend.name))
    s.add(corpus.copy_nodes())
    yield s
    backend.close(s)


@pytest.fixture
def fresh(backend: Backend, tmp_path: Path, corpus: Corpus) -> Iterator[BasePydanticVectorStore]:
    """The first two chapters of each book in a new store, for the tests that write.

    (qdrant-client's embedded mode commits to sqlite once per point: ~20 ms each on this disk.)
    """
    s = backend.open(tmp_path)
    s.add([n.model_copy(deep=True) for n in corpus.small])
    yield s
    backend.close(s)


def _all_ids(store: BasePydanticVectorStore) -> set[str]:
    return {n.node_id for n in store.get_nodes()}


def _f(key: str, value: Any, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)


def _book_of(store: BasePydanticVectorStore, node_ids: list[str]) -> set[str]:
    return {n.metadata["book_id"] for n in store.get_nodes(node_ids=node_ids)}


# --------------------------------------------------------------------------- the contract
def test_corpus_is_real_text(corpus: Corpus) -> None:
    assert len(corpus.nodes) > 100
    assert {n.metadata["book_id"] for n in corpus.nodes} == {"pg11", "pg215", "pg84"}
    for n in corpus.nodes[:20]:
        assert corpus.book_text[n.metadata["book_id"]][n.start_char_idx : n.end_char_idx] == n.text


def test_add_then_upsert_same_id_keeps_one(fresh: BasePydanticVectorStore, corpus: Corpus) -> None:
    assert _all_ids(fresh) == {n.node_id for n in corpus.small}
    again = corpus.small[3].model_copy(deep=True)
    again.text = "Replaced text about a white rabbit."
    again.embedding = corpus.encode([again.text])[0].tolist()
    fresh.add([again])
    assert len(fresh.get_nodes()) == len(corpus.small)
    (got,) = fresh.get_nodes(node_ids=[again.node_id])
    assert got.get_content() == "Replaced text about a white rabbit."
    res = fresh.query(VectorStoreQuery(query_embedding=again.embedding, similarity_top_k=1))
    assert res.ids == [again.node_id]


def test_get_nodes_round_trip(store: BasePydanticVectorStore, corpus: Corpus) -> None:
    want = [corpus.nodes[i] for i in (0, 57, len(corpus.nodes) - 1)]
    got = {n.node_id: n for n in store.get_nodes(node_ids=[n.node_id for n in want])}
    assert set(got) == {n.node_id for n in want}
    for w in want:
        g = got[w.node_id]
        assert g.get_content() == w.text
        assert g.metadata == w.metadata
        assert (g.start_char_idx, g.end_char_idx) == (w.start_char_idx, w.end_char_idx)
        assert g.ref_doc_id == w.ref_doc_id
        assert g.excluded_embed_metadata_keys == w.excluded_embed_metadata_keys
        assert corpus.book_text[g.metadata["book_id"]][g.start_char_idx : g.end_char_idx] == w.text
        np.testing.assert_allclose(g.embedding, w.embedding, atol=1e-5)  # unit vectors
    if not getattr(store, "gets_nodes_without_vectors", False):
        return  # LlamaIndex's own store, the reference: no such option
    # ours, for a retriever's blocks: the same nodes, in the order asked, without their vectors
    ids = [n.node_id for n in reversed(want)]
    bare = store.get_nodes(node_ids=ids, with_vectors=False)
    assert [n.node_id for n in bare] == ids and all(n.embedding is None for n in bare)
    assert [n.get_content() for n in bare] == [got[i].get_content() for i in ids]


def test_delete_by_ref_doc_id(fresh: BasePydanticVectorStore, corpus: Corpus) -> None:
    ref = corpus.small[10].ref_doc_id
    gone = {n.node_id for n in corpus.small if n.ref_doc_id == ref}
    assert len(gone) == PARAS
    fresh.delete(ref)
    assert _all_ids(fresh) == {n.node_id for n in corpus.small} - gone


def test_delete_nodes_by_ids_and_by_filter(fresh: BasePydanticVectorStore, corpus: Corpus) -> None:
    ids = [corpus.small[i].node_id for i in (1, 2, 3)]
    fresh.delete_nodes(node_ids=ids)
    left = {n.node_id for n in corpus.small} - set(ids)
    assert _all_ids(fresh) == left
    fresh.delete_nodes(filters=MetadataFilters(filters=[_f("book_id", "pg215")]))
    pg215 = {n.node_id for n in corpus.small if n.metadata["book_id"] == "pg215"}
    assert pg215 and _all_ids(fresh) == left - pg215


FILTER_CASES: dict[str, tuple[MetadataFilters, Callable[[TextNode], bool]]] = {
    "eq": (
        MetadataFilters(filters=[_f("book_id", "pg84")]),
        lambda n: n.metadata["book_id"] == "pg84",
    ),
    "ne": (
        MetadataFilters(filters=[_f("book_id", "pg84", FilterOperator.NE)]),
        lambda n: n.metadata["book_id"] != "pg84",
    ),
    "in": (
        MetadataFilters(filters=[_f("book_id", ["pg11", "pg215"], FilterOperator.IN)]),
        lambda n: n.metadata["book_id"] in ("pg11", "pg215"),
    ),
    "nin": (
        MetadataFilters(filters=[_f("book_id", ["pg11", "pg215"], FilterOperator.NIN)]),
        lambda n: n.metadata["book_id"] not in ("pg11", "pg215"),
    ),
    "int-in": (
        MetadataFilters(filters=[_f("chapter_index", [2, 5], FilterOperator.IN)]),
        lambda n: n.metadata["chapter_index"] in (2, 5),
    ),
    "range": (
        MetadataFilters(
            filters=[
                _f("chapter_index", 3, FilterOperator.GTE),
                _f("chapter_index", 6, FilterOperator.LT),
            ]
        ),
        lambda n: 3 <= n.metadata["chapter_index"] < 6,
    ),
    "gt-lte": (
        MetadataFilters(
            filters=[
                _f("chapter_index", 6, FilterOperator.GT),
                _f("para_index", 1, FilterOperator.LTE),
            ]
        ),
        lambda n: n.metadata["chapter_index"] > 6 and n.metadata["para_index"] <= 1,
    ),
    "nested-and-or": (
        MetadataFilters(
            filters=[
                _f("book_id", "pg11"),
                MetadataFilters(
                    filters=[
                        _f("chapter_index", 2, FilterOperator.LT),
                        _f("chapter_index", 7, FilterOperator.GTE),
                    ],
                    condition=FilterCondition.OR,
                ),
            ]
        ),
        lambda n: (
            n.metadata["book_id"] == "pg11"
            and (n.metadata["chapter_index"] < 2 or n.metadata["chapter_index"] >= 7)
        ),
    ),
    "nested-not": (
        MetadataFilters(
            filters=[
                _f("book_id", "pg215"),
                MetadataFilters(
                    filters=[_f("chapter_index", 1), _f("para_index", 0)],
                    condition=FilterCondition.NOT,
                ),
            ]
        ),
        lambda n: (
            n.metadata["book_id"] == "pg215"
            and n.metadata["chapter_index"] != 1
            and n.metadata["para_index"] != 0
        ),
    ),
}


@pytest.mark.parametrize("case", list(FILTER_CASES))
def test_filters(store: BasePydanticVectorStore, corpus: Corpus, case: str) -> None:
    filters, pred = FILTER_CASES[case]
    want = corpus.ids(pred)
    assert want and want != {n.node_id for n in corpus.nodes}
    assert {n.node_id for n in store.get_nodes(filters=filters)} == want
    q = VectorStoreQuery(
        query_embedding=corpus.nodes[0].embedding, similarity_top_k=1000, filters=filters
    )
    assert set(store.query(q).ids) == want  # the same filter on the query path


def _query(corpus: Corpus, text: str, mode: VectorStoreQueryMode, **kw: Any) -> VectorStoreQuery:
    return VectorStoreQuery(
        query_str=text,
        query_embedding=corpus.encode([text])[0].tolist(),
        mode=mode,
        similarity_top_k=kw.pop("top_k", 5),
        **kw,
    )


def test_dense_query_finds_a_paragraph_by_its_own_vector(
    store: BasePydanticVectorStore, corpus: Corpus
) -> None:
    for i in (0, len(corpus.nodes) // 2, len(corpus.nodes) - 1):
        n = corpus.nodes[i]
        res = store.query(VectorStoreQuery(query_embedding=n.embedding, similarity_top_k=3))
        assert res.ids[0] == n.node_id and res.nodes[0].node_id == n.node_id
        assert res.similarities[0] == pytest.approx(1.0, abs=1e-4)
        assert res.similarities == sorted(res.similarities, reverse=True)


@pytest.mark.parametrize("mode", [VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.HYBRID])
def test_sparse_and_hybrid_find_a_paragraph_by_its_words(
    store: BasePydanticVectorStore, corpus: Corpus, mode: VectorStoreQueryMode
) -> None:
    for i in (5, len(corpus.nodes) // 2, len(corpus.nodes) - 3):
        n = corpus.nodes[i]
        words = " ".join(n.text.split()[:25])
        res = store.query(_query(corpus, words, mode))
        assert res.ids[0] == n.node_id, (mode, words)
        assert len(res.ids) <= 5


def test_hybrid_top_k_sizes(store: BasePydanticVectorStore, corpus: Corpus) -> None:
    q = _query(
        corpus,
        "the dogs pulled the sled across the snow",
        VectorStoreQueryMode.HYBRID,
        top_k=4,
        sparse_top_k=6,
        hybrid_top_k=3,
        alpha=0.3,
    )
    res = store.query(q)
    assert len(res.ids) == 3 and len(set(res.ids)) == 3
    assert res.similarities == sorted(res.similarities, reverse=True)
    assert _book_of(store, res.ids) == {"pg215"}  # Call of the Wild


@pytest.mark.parametrize(
    "mode",
    [VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.HYBRID],
)
def test_book_filter_returns_only_that_book(
    store: BasePydanticVectorStore, corpus: Corpus, mode: VectorStoreQueryMode
) -> None:
    # an Alice question asked inside Frankenstein: every answer must still come from Frankenstein
    flt = MetadataFilters(filters=[_f("book_id", "pg84")])
    res = store.query(_query(corpus, "the white rabbit ran down the hole", mode, filters=flt))
    assert res.ids
    assert all(n.metadata["book_id"] == "pg84" for n in res.nodes)
    assert _book_of(store, res.ids) == {"pg84"}


def test_reopen_keeps_everything(backend: Backend, tmp_path: Path, corpus: Corpus) -> None:
    s = backend.open(tmp_path)
    s.add([n.model_copy(deep=True) for n in corpus.small])
    q = _query(corpus, "a monster made by a scientist", VectorStoreQueryMode.HYBRID)
    before = s.query(q)
    backend.close(s)

    s = backend.open(tmp_path)
    try:
        assert _all_ids(s) == {n.node_id for n in corpus.small}
        after = s.query(q)
        assert after.ids == before.ids
        np.testing.assert_allclose(after.similarities, before.similarities, rtol=1e-5)
        (n,) = s.get_nodes(node_ids=[corpus.small[-1].node_id])
        assert n.get_content() == corpus.small[-1].text
        assert n.metadata == corpus.small[-1].metadata
        s.delete(corpus.small[0].ref_doc_id)  # and writes after a reopen stick
    finally:
        backend.close(s)
    s = backend.open(tmp_path)
    try:
        ref = corpus.small[0].ref_doc_id
        assert _all_ids(s) == {n.node_id for n in corpus.small if n.ref_doc_id != ref}
    finally:
        backend.close(s)


def test_clear_then_add_again(fresh: BasePydanticVectorStore, corpus: Corpus) -> None:
    fresh.clear()
    fresh.add([n.model_copy(deep=True) for n in corpus.small[:10]])
    assert _all_ids(fresh) == {n.node_id for n in corpus.small[:10]}


# --------------------------------------------------------------------------- same answers
def test_both_backends_give_the_same_answers(tmp_path: Path, corpus: Corpus) -> None:
    stores = [b.open(tmp_path / b.name) for b in (EdgeBackend(), ClientBackend())]
    try:
        for s in stores:
            s.add(corpus.copy_nodes())
        flt = MetadataFilters(filters=[_f("book_id", "pg11")])
        for text in ("Alice fell down a very deep well", "Buck was stolen from the ranch"):
            for mode in VectorStoreQueryMode.DEFAULT, "sparse", "hybrid":
                for filters in None, flt:
                    q = _query(corpus, text, VectorStoreQueryMode(mode), top_k=8, filters=filters)
                    edge, client = (s.query(q) for s in stores)
                    assert len(edge.ids) == 8 or (mode == "sparse" and filters is not None)
                    assert edge.ids == client.ids, (text, mode, filters)
                    np.testing.assert_allclose(edge.similarities, client.similarities, rtol=1e-4)
    finally:
        stores[0].close()
        stores[1].client.close()


def test_our_two_stores_fuse_alike(tmp_path: Path, corpus: Corpus) -> None:
    """The in-process and the server store fuse a hybrid query alike (relative-score fusion)."""
    stores = [b.open(tmp_path / b.name) for b in (EdgeBackend(), ServerBackend())]
    try:
        for s in stores:
            s.add(corpus.copy_nodes())
        q = _query(corpus, "Buck was stolen from the ranch", VectorStoreQueryMode.HYBRID, top_k=8)
        edge, server = (s.query(q) for s in stores)
        assert len(edge.ids) == 8 and edge.ids == server.ids
        np.testing.assert_allclose(edge.similarities, server.similarities, rtol=1e-4)
    finally:
        stores[0].close()
        stores[1].client.close()


# --------------------------------------------------------------------------- Edge only
def test_edge_lock_names_the_folder_and_the_way_out(tmp_path: Path, corpus: Corpus) -> None:
    s = QdrantEdgeVectorStore(tmp_path, COLLECTION)
    s.add(corpus.copy_nodes()[:5])
    code = textwrap.dedent(
        f"""
        import sys
        from litrag.stores.edge_store import QdrantEdgeVectorStore, StoreLockedError
        try:
            s = QdrantEdgeVectorStore({str(tmp_path)!r}, {COLLECTION!r})
        except StoreLockedError as e:
            print(e)
            sys.exit(3)
        print("count", s.count())
        s.close()
        """
    )
    run = [sys.executable, "-c", code]
    out = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    msg = out.stdout.strip()
    assert "\n" not in msg
    assert str(tmp_path / COLLECTION) in msg and "QDRANT_URL" in msg
    assert f"pid {os.getpid()}" in msg  # says who holds it
    with pytest.raises(StoreLockedError, match="this process"):
        QdrantEdgeVectorStore(tmp_path, COLLECTION)  # a second object in the same process too
    s.close()
    out = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "count 5" in out.stdout, out.stderr


def test_edge_reopens_from_path_alone_with_its_config(tmp_path: Path, corpus: Corpus) -> None:
    cfg = EdgeStoreConfig(
        hnsw_m=12, payload_indexes={"book_id": "keyword", "para_index": "integer"}
    )
    s = QdrantEdgeVectorStore(tmp_path, "c", config=cfg, sparse_doc_fn=sparse_docs)
    s.add(corpus.copy_nodes())
    s.close()
    s = QdrantEdgeVectorStore(tmp_path, "c")
    try:
        assert s.config.dense_dim == corpus.vectors.shape[1]
        assert s.config.hnsw_m == 12
        assert set(s.client.info().payload_schema) == {"book_id", "para_index"}
        with pytest.raises(ValueError, match="sparse_query_fn"):
            s.query(_query(corpus, "rabbit", VectorStoreQueryMode.SPARSE))
        s.set_query_functions(sparse_queries, sparse_queries)
        assert s.query(_query(corpus, "rabbit", VectorStoreQueryMode.SPARSE)).ids
        with pytest.raises(ValueError, match="dense_dim"):
            QdrantEdgeVectorStore(tmp_path, "c", dense_dim=7)
    finally:
        s.close()


def test_edge_default_payload_indexes(tmp_path: Path, corpus: Corpus) -> None:
    with QdrantEdgeVectorStore(tmp_path, "c", dense_dim=corpus.vectors.shape[1]) as s:
        schema = s.client.info().payload_schema
        assert {"book_id", "chapter_index", "doc_id", "ref_doc_id"} <= set(schema)


def test_edge_maps_non_uuid_ids(tmp_path: Path, corpus: Corpus) -> None:
    nodes = corpus.copy_nodes()[:6]
    for i, n in enumerate(nodes):
        n.id_ = f"pg11:ch1:p{i}"
    with QdrantEdgeVectorStore(tmp_path, "c") as s:
        assert s.add(nodes) == [n.node_id for n in nodes]
        assert node_id_to_point_id("pg11:ch1:p0") == node_id_to_point_id("pg11:ch1:p0")
        res = s.query(VectorStoreQuery(query_embedding=nodes[2].embedding, similarity_top_k=2))
        assert res.ids[0] == "pg11:ch1:p2"
        assert [n.node_id for n in s.get_nodes(["pg11:ch1:p4", "pg11:ch1:p1"])] == [
            "pg11:ch1:p4",
            "pg11:ch1:p1",
        ]
        s.delete_nodes(["pg11:ch1:p0"])
        assert s.count() == 5
        assert {p.payload["_node_id"] for p in s.iter_points()} == {n.node_id for n in nodes[1:]}


def _recall(store: QdrantEdgeVectorStore, corpus: Corpus, book: str | None, **kw: Any) -> float:
    """recall@10 of dense search against numpy brute force, over 40 real sentence queries."""
    rng = np.random.default_rng(1)
    mask = np.array([book is None or n.metadata["book_id"] == book for n in corpus.nodes])
    flt = MetadataFilters(filters=[_f("book_id", book)]) if book else None
    hits = []
    for i in rng.choice(len(corpus.nodes), 40, replace=False):
        words = corpus.nodes[i].text.split()
        q = corpus.encode([" ".join(words[len(words) // 2 :])])[0]  # half a paragraph
        truth = np.argsort(-np.where(mask, corpus.vectors @ q, -9))[:10]
        want = {corpus.nodes[j].node_id for j in truth}
        res = store.query(
            VectorStoreQuery(query_embedding=q.tolist(), similarity_top_k=10, filters=flt), **kw
        )
        hits.append(len(want & set(res.ids)) / 10)
    return float(np.mean(hits))


def test_edge_hnsw_keeps_recall_on_real_vectors(tmp_path: Path, corpus: Corpus) -> None:
    # Force HNSW on this small collection (full scan only below 1 KB), then check it still finds
    # what brute force finds; filtered search by book must stay exact.
    hnsw = EdgeStoreConfig(full_scan_threshold_kb=1, indexing_threshold_kb=1, hnsw_ef_construct=64)
    with QdrantEdgeVectorStore(tmp_path, "hnsw", config=hnsw) as s:
        s.add(corpus.copy_nodes())
        s.optimize()
        assert s.client.info().indexed_vectors_count == len(corpus.nodes)
        assert _recall(s, corpus, None) >= 0.95
        assert _recall(s, corpus, None, search_params={"exact": True}) == 1.0
    with QdrantEdgeVectorStore(tmp_path, "default") as s:  # defaults: exact below ~20k vectors
        s.add(corpus.copy_nodes())
        s.optimize()
        assert _recall(s, corpus, None) == 1.0
        assert _recall(s, corpus, "pg84") == 1.0


def test_get_nodes_by_ids_and_filter_is_an_and(
    store: BasePydanticVectorStore, corpus: Corpus
) -> None:
    a = next(n for n in corpus.nodes if n.metadata["book_id"] == "pg11")
    b = next(n for n in corpus.nodes if n.metadata["book_id"] == "pg84")
    flt = MetadataFilters(filters=[_f("book_id", "pg11")])
    got = store.get_nodes(node_ids=[a.node_id, b.node_id], filters=flt)
    assert [n.node_id for n in got] == [a.node_id]


def _sparse_answer(s: QdrantEdgeVectorStore, corpus: Corpus, filters: Any = None) -> Any:
    text = "the old man looked into the dark night with tears in his eyes"
    q = _query(corpus, text, VectorStoreQueryMode.SPARSE, top_k=8)
    q.filters = filters
    res = s.query(q)
    assert len(res.ids) == 8
    return res


def test_edge_bm25_after_deletes_and_optimize_matches_a_fresh_store(
    tmp_path: Path, corpus: Corpus
) -> None:
    live = [n for n in corpus.nodes if n.metadata["book_id"] != "pg215"]
    kw = {"sparse_doc_fn": sparse_docs, "sparse_query_fn": sparse_queries}
    with QdrantEdgeVectorStore(tmp_path, "reference", **kw) as ref:
        ref.add([n.model_copy(deep=True) for n in live])
        want = _sparse_answer(ref, corpus)
    with QdrantEdgeVectorStore(tmp_path, "reingested", **kw) as s:
        s.add(corpus.copy_nodes())
        s.add([n.model_copy(deep=True) for n in live])  # re-ingest: every point overwritten
        s.delete_nodes(filters=MetadataFilters(filters=[_f("book_id", "pg215")]))
        s.optimize()  # Edge's IDF counts dead points until the shard reloads; optimize reloads
        got = _sparse_answer(s, corpus)
    assert got.ids == want.ids
    np.testing.assert_allclose(got.similarities, want.similarities, rtol=1e-5)


def test_edge_idf_over_the_filter_is_per_book_bm25(tmp_path: Path, corpus: Corpus) -> None:
    kw = {"sparse_doc_fn": sparse_docs, "sparse_query_fn": sparse_queries}
    book = [n for n in corpus.nodes if n.metadata["book_id"] == "pg84"]
    with QdrantEdgeVectorStore(tmp_path, "one-book", **kw) as one:
        one.add([n.model_copy(deep=True) for n in book])
        want = _sparse_answer(one, corpus)
    with QdrantEdgeVectorStore(tmp_path, "all", sparse_idf_scope="filter", **kw) as s:
        s.add(corpus.copy_nodes())
        got = _sparse_answer(s, corpus, MetadataFilters(filters=[_f("book_id", "pg84")]))
    assert got.ids == want.ids
    np.testing.assert_allclose(got.similarities, want.similarities, rtol=1e-5)


# --------------------------------------------------------------------------- sentence windows
def test_edge_window_vectors_score_a_node_by_its_best_window(
    tmp_path: Path, corpus: Corpus
) -> None:
    """A dense query against the window multivector scores each node by MaxSim over its
    sentence windows: a query that is one window of a long paragraph finds that paragraph."""
    windows = SentenceWindowEncoder(lambda texts: corpus.encode(texts).tolist())
    long = [n for n in corpus.nodes if len(windows.windows(n.text)) >= 3]
    assert len(long) >= 5, "the corpus should hold paragraphs of several sentences"
    with QdrantEdgeVectorStore(tmp_path, "windows", window_doc_fn=windows) as s:
        s.add(corpus.copy_nodes())
        assert s.config.window_vector_name
        with QdrantEdgeVectorStore(tmp_path, "blocks") as plain:
            plain.add(corpus.copy_nodes())
            for node in long[:5]:
                probe = windows.windows(node.text)[1]  # a middle window, not the whole node
                qv = corpus.encode([probe])[0]
                res = s.query(VectorStoreQuery(query_embedding=qv.tolist(), similarity_top_k=5))
                own = np.array(windows([node.text])[0])
                cos = own @ qv / (np.linalg.norm(own, axis=1) * np.linalg.norm(qv))
                assert res.ids[0] == node.node_id
                assert res.similarities[0] == pytest.approx(float(cos.max()), abs=1e-4)  # MaxSim
                ref = plain.query(VectorStoreQuery(query_embedding=qv.tolist(), similarity_top_k=5))
                assert node.node_id in ref.ids  # the one-vector store scores the whole node
                assert ref.similarities[ref.ids.index(node.node_id)] < res.similarities[0] - 0.01


def test_edge_window_store_reopens_with_windows_and_refuses_nodes_without(
    tmp_path: Path, corpus: Corpus
) -> None:
    windows = SentenceWindowEncoder(lambda texts: corpus.encode(texts).tolist())
    nodes = corpus.small
    with QdrantEdgeVectorStore(tmp_path, "w", window_doc_fn=windows) as s:
        s.add([n.model_copy(deep=True) for n in nodes])
    probe = windows.windows(nodes[3].text)[-1]
    qv = corpus.encode([probe])[0].tolist()
    with QdrantEdgeVectorStore(tmp_path, "w") as again:  # a reader: no encoder needed
        assert again.config.window_vector_name
        assert again.query(VectorStoreQuery(query_embedding=qv, similarity_top_k=1)).ids == [
            nodes[3].node_id
        ]
        with pytest.raises(ValueError, match="window_doc_fn"):
            again.add([nodes[0].model_copy(deep=True)])
        again.set_window_fn(windows)
        assert again.add([nodes[0].model_copy(deep=True)]) == [nodes[0].node_id]


def test_sentence_windows_cover_the_text() -> None:
    enc = SentenceWindowEncoder(lambda texts: [[float(len(t)), 1.0] for t in texts])
    text = " ".join(f"Sentence {i} ends here." for i in range(7))
    wins = enc.windows(text)
    assert [w.split()[1] for w in wins] == ["0", "2", "4"]
    assert wins[-1].endswith("Sentence 6 ends here.")  # the tail is never dropped
    assert enc.windows("One sentence only.") == ["One sentence only."]
    vecs = enc([text, "Short one."])
    assert [len(v) for v in vecs] == [3, 1] and vecs[1][0] == [10.0, 1.0]
    with pytest.raises(ValueError):
        SentenceWindowEncoder(lambda t: [], size=0)
