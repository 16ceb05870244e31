"""BookRetriever on two real (shortened) books in the embedded store: book restriction, the
spoiler limit at its edges (first chapter, last chapter, across books), presets, a reranker hook,
and the same filters on LlamaIndex's QdrantVectorStore (qdrant-client's embedded mode)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from llama_index.core.bridge.pydantic import Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    VectorStoreQueryMode,
)
from test_library import library_at, short_book

from litrag.builders import build_embed_model
from litrag.ingestion.library import Library
from litrag.retrieval.retriever import (
    BookRetriever,
    RetrievalSettings,
    UnknownBookError,
    book_filters,
    loaded_books,
)
from litrag.scoring.bm25 import BM25Encoder, BM25Index
from litrag.settings import Settings
from litrag.stores.factory import make_vector_store

ALICE, WILD = "pg11", "pg215"
CHAPTERS = {ALICE: [1, 2, 3], WILD: [1, 2]}
# Every block of the selected books comes back: the result *is* the filter's extent.
EVERYTHING = RetrievalSettings(dense_top_k=1000, sparse_top_k=1000, candidates=1000, top_k=1000)


def ingested_shelf(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Alice chapters 1-3 and The Call of the Wild chapters 1-2, ingested once per test run.

    Shared by the retriever and answer tests through the session's base temp folder (each
    module opens and closes the embedded store itself: one opener at a time).
    """
    root = tmp_path_factory.getbasetemp() / "answer-shelf"
    home = root / "home"
    if (root / "done").exists():
        return home
    folder = root / "books"
    folder.mkdir(parents=True, exist_ok=True)
    short_book(books_dir / "pg11_alice_in_wonderland.txt", folder / "alice.txt", "CHAPTER IV.")
    short_book(books_dir / "pg215_call_of_the_wild.txt", folder / "wild.txt", "Chapter III.")
    lib = library_at(home)
    try:
        report = lib.ingest([folder])
    finally:
        lib.close()
    assert report.ok and sorted(report.ingested) == [ALICE, WILD], report.failed
    (root / "done").touch()
    return home


@pytest.fixture(scope="module")
def home(books_dir, tmp_path_factory) -> Path:
    return ingested_shelf(books_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def embed(home):
    return build_embed_model(Settings(home=home))


@pytest.fixture(scope="module")
def store(home) -> Iterator:
    s = make_vector_store(home, "litrag")
    yield s
    s.close()


@pytest.fixture(scope="module")
def books(home) -> dict[str, str]:
    return loaded_books(Library.read_registry(home))[0]


@pytest.fixture(scope="module")
def chapters_of(store) -> dict[str, dict[str, int]]:
    """{book_id: {node_id: chapter_index}} straight from the store."""
    out: dict[str, dict[str, int]] = {}
    for n in store.get_nodes():
        out.setdefault(n.metadata["book_id"], {})[n.node_id] = n.metadata["chapter_index"]
    return out


def retriever(store, embed, books, book_ids, upto=None, settings=EVERYTHING, **kw):
    return BookRetriever(
        store, embed, book_ids, upto_chapter=upto, settings=settings, books=books, **kw
    )


def test_the_shelf_has_the_chapters_the_tests_assume(chapters_of):
    assert {b: sorted(set(c.values())) for b, c in chapters_of.items()} == CHAPTERS


def test_filter_shapes():
    f = book_filters([WILD], 3)
    assert f.condition == FilterCondition.AND
    assert [(x.key, x.operator, x.value) for x in f.filters] == [
        ("book_id", FilterOperator.IN, [WILD]),
        ("chapter_index", FilterOperator.LTE, 3),
    ]
    per_book = book_filters([ALICE, WILD], {ALICE: 2})
    assert per_book.condition == FilterCondition.OR
    limited, free = per_book.filters
    assert [(x.key, x.value) for x in limited.filters] == [("book_id", ALICE), ("chapter_index", 2)]
    assert (free.key, free.operator, free.value) == ("book_id", FilterOperator.IN, [WILD])
    for bad in (-1, True, "3", 2.5):
        with pytest.raises(ValueError, match="spoiler limit"):
            book_filters([WILD], bad)
    with pytest.raises(ValueError, match="at least one book"):
        book_filters([], None)


@pytest.mark.parametrize(
    ("book", "upto"),
    [(ALICE, 1), (ALICE, 2), (ALICE, 3), (WILD, 1), (WILD, 2), (ALICE, None), (WILD, 99)],
)
def test_spoiler_limit_is_exact_at_every_chapter(store, embed, books, chapters_of, book, upto):
    """The retrieved set is exactly the book's blocks of chapters <= N: N itself is in (no
    off-by-one at the first chapter) and N + 1 is out (none at the last)."""
    r = retriever(store, embed, books, book, upto)
    got = {n.node.node_id for n in r.retrieve("Alice and Buck run, fall and fight")}
    limit = upto if upto is not None else 10**6
    want = {nid for nid, ch in chapters_of[book].items() if ch <= limit}
    assert got == want
    assert max(chapters_of[book][nid] for nid in got) == min(limit, CHAPTERS[book][-1])


def test_limit_zero_keeps_only_front_matter(store, embed, books):
    # these books have no front-matter unit (chapter 0), so nothing at all may come back
    assert retriever(store, embed, books, [ALICE, WILD], 0).retrieve("Alice") == []


@pytest.mark.quick
def test_spoiler_limit_across_books(store, embed, books, chapters_of):
    both = [ALICE, WILD]
    got = retriever(store, embed, books, both, 1).retrieve("a dog and a girl")
    seen = {(n.node.metadata["book_id"], n.node.metadata["chapter_index"]) for n in got}
    assert seen == {(ALICE, 1), (WILD, 1)}
    # one limit per book; a book left out of the map is unlimited
    got = retriever(store, embed, books, both, {ALICE: 2, WILD: 1}).retrieve("a dog and a girl")
    seen = {(n.node.metadata["book_id"], n.node.metadata["chapter_index"]) for n in got}
    assert seen == {(ALICE, 1), (ALICE, 2), (WILD, 1)}
    got = retriever(store, embed, books, both, {WILD: 1}).retrieve("a dog and a girl")
    seen = {(n.node.metadata["book_id"], n.node.metadata["chapter_index"]) for n in got}
    assert seen == {(ALICE, 1), (ALICE, 2), (ALICE, 3), (WILD, 1)}
    # a limit for a book that is not selected selects nothing extra
    got = retriever(store, embed, books, [WILD], {ALICE: 1}).retrieve("a dog")
    assert {n.node.metadata["book_id"] for n in got} == {WILD}
    assert len(got) == len(chapters_of[WILD])


def test_bm25_idf_is_over_the_selected_book(store, embed, books):
    """The library store scores BM25 with the IDF of the selected book alone: a book ranks the
    same in a library as on its own (Alice's words do not change Buck's rare terms)."""
    question = "Who stole Buck from Judge Miller's place and sold him?"
    sparse = RetrievalSettings(mode="sparse", sparse_top_k=1000, top_k=1000, bm25_windows=0)
    got = {
        n.node.node_id: n.score
        for n in retriever(store, embed, books, WILD, None, sparse).retrieve(question)
    }
    nodes = store.get_nodes()
    view = {n.node_id: n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes}
    wild = [n.node_id for n in nodes if n.metadata["book_id"] == WILD]
    per_book = BM25Index([view[i] for i in wild], avg_len=BM25Encoder().avg_len)
    want = {i: s for i, s in zip(wild, per_book.scores(question), strict=True) if s > 0}
    assert got.keys() == want.keys()
    assert got == pytest.approx(want, rel=1e-4)
    # what a collection-wide IDF would give instead (so this test can tell the two apart)
    everyone = BM25Index(list(view.values()), avg_len=BM25Encoder().avg_len)
    wide = dict(zip(view, everyone.scores(question), strict=True))
    assert any(abs(wide[i] - want[i]) > 1e-3 * want[i] for i in want)


@pytest.mark.quick
def test_late_chapter_question_with_an_early_limit(store, embed, books):
    question = "What is a Caucus-race and how is it run?"  # Alice, chapter III
    default = RetrievalSettings.from_preset("embedded")
    free = retriever(store, embed, books, ALICE, None, default).retrieve(question)
    assert free[0].node.metadata["chapter_index"] == 3  # sanity: the question is about ch. 3
    limited = retriever(store, embed, books, ALICE, 2, default)
    got = limited.retrieve(question)
    assert len(got) == default.top_k
    assert all(n.node.metadata["chapter_index"] <= 2 for n in got)
    # the store query itself carries the limit (not a filter applied afterwards)
    raw = store.query(limited.vector_query(question))
    assert raw.nodes and all(n.metadata["chapter_index"] <= 2 for n in raw.nodes)


def test_results_stay_in_the_selected_book(store, embed, books):
    r = retriever(store, embed, books, WILD, None, RetrievalSettings.from_preset("embedded"))
    got = r.retrieve("Alice fell down the rabbit-hole after the White Rabbit")
    assert len(got) == 5 and {n.node.metadata["book_id"] for n in got} == {WILD}


def test_unknown_book_lists_the_loaded_books(store, embed, books):
    with pytest.raises(UnknownBookError) as err:
        retriever(store, embed, books, [WILD, "pg999"])
    msg = str(err.value)
    assert "'pg999'" in msg and "pg215 (The Call of the Wild)" in msg and "pg11 (Alice" in msg
    assert err.value.missing == ["pg999"]
    with pytest.raises(UnknownBookError, match="did not finish"):
        retriever(store, embed, {}, "pg7", partial_books={"pg7": "Half Done"})
    with pytest.raises(UnknownBookError, match="library is empty"):
        retriever(store, embed, {}, "pg7")
    r = retriever(store, embed, books, WILD)
    with pytest.raises(UnknownBookError):
        r.select("pg999")
    assert r.book_ids == [WILD]  # a failed select changes nothing


def test_empty_question_is_refused(store, embed, books):
    with pytest.raises(ValueError, match="empty"):
        retriever(store, embed, books, WILD).retrieve("   ")


def test_presets_and_environment(monkeypatch):
    paper = RetrievalSettings.from_preset("paper")
    assert (paper.dense_top_k, paper.sparse_top_k, paper.top_k) == (18, 2, 5)
    assert paper.candidate_count(reranking=True) == 20
    embedded = RetrievalSettings.from_preset("embedded")
    assert embedded.alpha < 0.5 and embedded.top_k == 5
    assert embedded.candidate_count(reranking=False) == 5
    monkeypatch.setenv("LITRAG_RETRIEVAL", "paper")
    monkeypatch.setenv("LITRAG_RETRIEVAL_ALPHA", "0.25")
    monkeypatch.setenv("LITRAG_RETRIEVAL_TOP_K", "3")
    s = RetrievalSettings.from_settings()
    assert (s.preset, s.alpha, s.top_k, s.dense_top_k) == ("paper", 0.25, 3, 18)
    with pytest.raises(ValueError, match="unknown retrieval preset"):
        RetrievalSettings.from_preset("best")


class RecordingReranker(BaseNodePostprocessor):
    """Keeps the candidates it saw and orders them by text length: a visible, checkable order."""

    seen: list = Field(default_factory=list)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        self.seen = list(nodes)
        ranked = sorted(nodes, key=lambda n: len(n.node.get_content()))
        return [NodeWithScore(node=n.node, score=-float(i)) for i, n in enumerate(ranked)]


def test_paper_preset_reranks_the_union(store, embed, books):
    rr = RecordingReranker()
    r = retriever(
        store, embed, books, WILD, None, RetrievalSettings.from_preset("paper"), reranker=rr
    )
    q = "Buck is stolen and sold by the gardener Manuel"
    got = r.retrieve(q)
    query = r.vector_query(q)
    dense = store.query(replace(query, mode=VectorStoreQueryMode.DEFAULT, similarity_top_k=18))
    sparse = store.query(replace(query, mode=VectorStoreQueryMode.SPARSE, sparse_top_k=2))
    union = {n.node_id for n in dense.nodes} | {n.node_id for n in sparse.nodes}
    assert {n.node.node_id for n in rr.seen} == union and 18 <= len(union) <= 20
    by_length = sorted(rr.seen, key=lambda n: len(n.node.get_content()))
    assert [n.node.node_id for n in got] == [n.node.node_id for n in by_length[:5]]
    assert "reranked by RecordingReranker" in r.describe()


def test_a_users_postprocessor_sees_only_spoiler_safe_candidates(store, embed, books, chapters_of):
    """Any LlamaIndex node postprocessor plugs in as ``reranker``: it is handed ``candidates``
    (the fused list already inside the spoiler limit, with its order and retrieval scores), and
    its own order, cut to ``top_k``, is the retrieval."""
    q = QueryBundle("Curly is killed by the huskies and Spitz laughs")  # chapter 2 of the Wild
    paper = RetrievalSettings.from_preset("paper")

    def chapters(nodes: list[NodeWithScore]) -> set[tuple[str, int]]:
        books_of = [n.node.metadata["book_id"] for n in nodes]
        return {(b, chapters_of[b][n.node.node_id]) for b, n in zip(books_of, nodes, strict=True)}

    unlimited = retriever(
        store, embed, books, [ALICE, WILD], None, paper, reranker=RecordingReranker()
    )
    assert (WILD, 2) in chapters(unlimited.candidates(q))  # the limit below has work to do
    rr = RecordingReranker()
    r = retriever(store, embed, books, [ALICE, WILD], {WILD: 1, ALICE: 1}, paper, reranker=rr)
    got = r.retrieve(q)
    assert rr.seen and chapters(rr.seen) <= {(ALICE, 1), (WILD, 1)}
    assert [(n.node.node_id, n.score) for n in rr.seen] == [
        (n.node.node_id, n.score) for n in r.candidates(q)
    ]
    by_length = sorted(rr.seen, key=lambda n: len(n.node.get_content()))
    assert [n.node.node_id for n in got] == [n.node.node_id for n in by_length[: paper.top_k]]
    assert [n.score for n in got] == [-float(i) for i in range(paper.top_k)]  # the reranker's


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_same_limits_on_a_qdrant_server_store(store, embed, books, chapters_of, tmp_path):
    """LlamaIndex's QdrantVectorStore (what QDRANT_URL gives) obeys the same nested filters."""
    server = make_vector_store(tmp_path, "litrag", url=f"path:{tmp_path / 'qdrant'}")
    server.add(store.get_nodes())
    for upto, want in [
        (1, {(ALICE, 1), (WILD, 1)}),
        ({ALICE: 2}, {(ALICE, 1), (ALICE, 2), (WILD, 1), (WILD, 2)}),
    ]:
        got = retriever(server, embed, books, [ALICE, WILD], upto).retrieve("a dog and a girl")
        seen = {(n.node.metadata["book_id"], n.node.metadata["chapter_index"]) for n in got}
        assert seen == want
    server.client.close()
