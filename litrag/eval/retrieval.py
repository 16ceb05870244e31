"""GutenQA-style retrieval evaluation: every chunker, every retrieval mode, one harness.

For each chunker, every question's book is split into chapters and chunked; the chunks are
embedded (``WindowedEmbedding``, cached on disk by text hash and model) and stored in a Qdrant Edge
collection of their own, the production path: dense and BM25 vectors, ``book_id`` payload index.
Each question retrieves the top ``k`` chunks *within its own book* (``book_id`` filter; BM25 IDF
over that book's chunks) in each mode:

- ``dense``: cosine over the dense vectors;
- ``bm25``: sparse BM25 (Snowball stems), ``avg_len`` fitted to the book's chunks by default;
- ``hybrid-rsf a=A``: LlamaIndex's relative-score fusion, ``A`` weighting dense (the only
  fusion: reciprocal-rank fusion lost on every set and was deleted, docs/lab/);
- ``hybrid-… +rerank``: that hybrid list reordered by a reranker (``Qwen3Reranker``), only when
  one is given.

A chunk is relevant when it contains a gold span whole after ``spans.normalize``; metrics come
from ``metrics.py`` (ranks beyond ``k`` count as misses, so MRR is MRR@k). Questions whose span is
not in the book text at all are data errors: dropped and listed. Spans the book holds but no chunk
holds whole are misses in every mode and make up the "split" share (the recall ceiling).

``CHUNKER>aligned`` (e.g. ``litseg-offline>aligned``; the plain keys of the chunkers the library
ingests with mean it) is small-to-big: the store holds the book's paragraph children
(``chunkers.children``: the ``paragraphs`` chunker's very chunks, stored as its run stores them,
so their ranking and cached embeddings are that run's) and each query's ranked children collapse
to the blocks snapped to them (``chunkers.children.aligned_book``: each child in one block, each
block the union of its children) by each block's best child; the blocks are scored.

The chunkers by key and their cached chunkings are ``registry``'s, the questions and books
``questions``'s, the embedding cache ``embedding_cache``'s: a rerun, or a run with one new chunker,
only chunks and embeds what is new; LLM replies are cached too, so an interrupted run resumes.
"""

from __future__ import annotations

import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from litrag.chunkers.baselines import word_count
from litrag.chunkers.children import aligned_book, collapse
from litrag.eval.embedding_cache import CachedEmbedder, EmbeddingCache, harness_embedder
from litrag.eval.environment import environment
from litrag.eval.metrics import Aggregate, QuestionScore, aggregate
from litrag.eval.questions import Book, Question, load_books
from litrag.eval.registry import (
    DEFAULT_CHUNKERS,
    ChunkerLLM,
    ChunkerSpec,
    chunk_book,
    chunker_specs,
    slug,
)
from litrag.eval.spans import normalize
from litrag.scoring.window_bm25 import DEFAULT_POOL
from litrag.scoring.windows import SentenceWindowEncoder

DEFAULT_TOP_K = 20
DEFAULT_ALPHA = 0.5
DenseVectors = Literal["windows", "block"]
ONE_VECTOR_LABEL = "one vector per chunk (long chunks: windows of 254 word pieces, mean-pooled)"
WHOLE_VECTOR_LABEL = "one vector per chunk, read whole (2,048 tokens)"
Say = Callable[[str], None]


# --------------------------------------------------------------------------------- modes
@dataclass(frozen=True)
class Mode:
    """A retrieval mode: dense, bm25, or hybrid (relative-score fusion) with the dense weight
    ``alpha``; ``rerank`` is that hybrid list reordered by a reranker."""

    kind: Literal["dense", "bm25", "hybrid", "rerank"]
    alpha: float | None = None

    @property
    def name(self) -> str:
        if self.kind in ("dense", "bm25"):
            return self.kind
        hybrid = f"hybrid-rsf a={self.alpha:g}"
        return hybrid + "+rerank" if self.kind == "rerank" else hybrid


def parse_modes(kinds: Sequence[str], alphas: Sequence[float] = (DEFAULT_ALPHA,)) -> list[Mode]:
    """Modes from CLI lists; ``hybrid`` and ``hybrid+rerank`` expand to every alpha."""
    out: list[Mode] = []
    for kind in kinds:
        if kind in ("dense", "bm25"):
            out.append(Mode(kind))  # type: ignore[arg-type]
        elif kind in ("hybrid", "hybrid+rerank"):
            k = "hybrid" if kind == "hybrid" else "rerank"
            out.extend(Mode(k, float(a)) for a in alphas)  # type: ignore[arg-type]
        else:
            raise ValueError(f"unknown mode {kind!r} (dense, bm25, hybrid, hybrid+rerank)")
    return out


# --------------------------------------------------------------------------------- results
@dataclass
class ChunkerResult:
    """One chunker over all books: sizes, the split share, metrics per mode, timings."""

    key: str
    label: str
    chunks: int
    words: list[int]
    split_spans: float  # share of gold spans no chunk contains whole
    modes: dict[str, Aggregate]
    scores: dict[str, list[QuestionScore]]
    seconds: dict[str, float]
    seconds_per_book: dict[str, dict[str, float]]
    intrinsic: dict[str, Any] | None = None
    outcomes: dict[str, int] = field(default_factory=dict)  # LLM chunkers: chunks per outcome

    @property
    def mean_words(self) -> float:
        return statistics.fmean(self.words) if self.words else 0.0

    @property
    def median_words(self) -> float:
        return float(statistics.median(self.words)) if self.words else 0.0


@dataclass
class RetrievalRun:
    """A whole evaluation: its settings, the question set, every chunker's results."""

    config: dict[str, Any]
    questions: int
    books: dict[str, int]  # book file -> questions
    dropped: list[str]  # question ids whose span is not in the book text at all
    chunkers: list[ChunkerResult]
    embeddings_computed: int = 0
    embeddings_cached: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    environment: dict[str, str] = field(default_factory=dict)

    def row(self, key: str) -> ChunkerResult:
        return next(c for c in self.chunkers if c.key == key)

    def to_json(self) -> dict[str, Any]:
        chunkers = []
        for c in self.chunkers:
            chunkers.append(
                {
                    "key": c.key,
                    "label": c.label,
                    "chunks": c.chunks,
                    "mean_words": round(c.mean_words, 1),
                    "median_words": c.median_words,
                    "split_spans": c.split_spans,
                    "words": c.words,
                    "seconds": c.seconds,
                    "seconds_per_book": c.seconds_per_book,
                    "intrinsic": c.intrinsic,
                    "outcomes": c.outcomes,
                    "modes": {m: asdict(a) for m, a in c.modes.items()},
                    "ranks": {
                        m: {s.question_id: s.rank for s in scores} for m, scores in c.scores.items()
                    },
                }
            )
        return {
            "config": self.config,
            "questions": self.questions,
            "books": self.books,
            "dropped": self.dropped,
            "embeddings_computed": self.embeddings_computed,
            "embeddings_cached": self.embeddings_cached,
            "seconds": round(self.seconds, 1),
            "peak_rss_mb": round(self.peak_rss_mb),
            "environment": self.environment,
            "chunkers": chunkers,
        }


# --------------------------------------------------------------------------------- harness
def _bm25_windows(weight: float | None) -> float:
    """The window weight of BM25 scores: the library's (RetrievalSettings) unless given."""
    from litrag.retrieval.retriever import RetrievalSettings

    return RetrievalSettings().bm25_windows if weight is None else weight


def _book_filter(book_id: str) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key="book_id", value=book_id)])


def _query(
    mode: Mode, q: str, qvec: list[float], book_id: str, k: int, cand: int
) -> VectorStoreQuery:
    flt = _book_filter(book_id)
    if mode.kind == "dense":
        return VectorStoreQuery(query_embedding=qvec, similarity_top_k=k, filters=flt)
    if mode.kind == "bm25":
        return VectorStoreQuery(
            query_str=q, similarity_top_k=k, filters=flt, mode=VectorStoreQueryMode.SPARSE
        )
    return VectorStoreQuery(
        query_embedding=qvec,
        query_str=q,
        similarity_top_k=cand,
        sparse_top_k=cand,
        hybrid_top_k=k,
        alpha=mode.alpha,
        filters=flt,
        mode=VectorStoreQueryMode.HYBRID,
    )


def _child_query(query: VectorStoreQuery, mode: Mode, cand: int) -> VectorStoreQuery:
    """A block query as asked of the children (``CHUNKER>aligned``): bm25 and dense go
    ``DEFAULT_POOL`` deep (no deeper than the BM25 window pool, so the first children come in
    the paragraph run's order); hybrid fuses the same ``cand``-deep lists as the paragraph run
    and keeps their whole union. Blocks are then ranked by their best child."""
    if mode.kind in ("dense", "bm25"):
        return replace(query, similarity_top_k=max(DEFAULT_POOL, query.similarity_top_k))
    return replace(query, hybrid_top_k=2 * cand)


def _children_note(parents: dict[str, list[str]]) -> str:
    return f", {len(parents)} paragraph children"


def evaluate_chunker(
    spec: ChunkerSpec,
    books: Sequence[Book],
    modes: Sequence[Mode],
    embedder: CachedEmbedder,
    store_dir: Path,
    *,
    top_k: int = DEFAULT_TOP_K,
    candidates: int | None = None,
    dense_vectors: DenseVectors = "windows",
    bm25_avg_len: float | None = None,
    bm25_windows: float | None = None,
    chunk_cache: Path | None = None,
    intrinsic: bool = True,
    reranker: Any = None,
    say: Say = print,
) -> ChunkerResult:
    """Chunk, embed, store and query one chunker over every book.

    ``reranker`` (an object with ``score(query, texts) -> list[float]``, e.g. ``Qwen3Reranker``)
    is needed by ``rerank`` modes: it reorders the hybrid list, reading each chunk's stored view
    (its ``metadata_mode``, LLM by default).
    """
    from litrag.scoring.bm25 import BM25Encoder, BM25Index, tokenize
    from litrag.stores.edge_store import QdrantEdgeVectorStore

    cand = max(candidates or top_k, top_k)
    per_book: dict[str, dict[str, float]] = {}
    all_nodes: dict[str, list[BaseNode]] = {}
    parents: dict[str, dict[str, list[str]]] = {}  # children runs: child id -> its blocks
    words: list[int] = []
    t = dict.fromkeys(("chunk", "embed", "store", "query", "rerank", "intrinsic"), 0.0)
    if any(m.kind == "rerank" for m in modes) and reranker is None:
        raise ValueError("rerank modes need a reranker")
    windows = None
    if dense_vectors == "windows":  # as the library stores blocks: MaxSim over sentence windows
        windows = SentenceWindowEncoder(embedder.embed)
    name = slug(spec.key) + ("-windows" if windows is not None else "")
    # A fresh collection each run, config and all: chunks may have changed, and so may the
    # embedder's dimension (a MiniLM run then a nomic run share the cache folder).
    shutil.rmtree(Path(store_dir) / name, ignore_errors=True)
    store = QdrantEdgeVectorStore(
        path=store_dir,
        collection_name=name,
        sparse_idf_scope="filter",
        window_doc_fn=windows,
        sparse_window_weight=_bm25_windows(bm25_windows),
    )
    try:
        for book in books:
            t0 = time.perf_counter()
            nodes, hit = chunk_book(spec, book.docs, book.key, chunk_cache)
            searched = nodes  # what the store holds: the chunks, or their paragraph children
            if spec.children:  # the blocks scored are the ones snapped to the children
                n_chunked = len(nodes)
                nodes, searched, parents[book.file] = aligned_book(nodes, book.docs)
                say(f"  {spec.key} {book.book_id}: {n_chunked - len(nodes)} blocks absorbed")
            t1 = time.perf_counter()
            texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in searched]
            before = embedder.seconds
            vecs = embedder.embed(texts)
            t2 = time.perf_counter()
            for node, vec in zip(searched, vecs, strict=True):
                node.embedding = vec.tolist()
            avg = bm25_avg_len or BM25Index.fit_avg_len(len(tokenize(x)) for x in texts)
            enc = BM25Encoder(avg_len=avg)
            store.set_query_functions(enc.doc_fn, enc.query_fn)
            store.add(searched)
            t3 = time.perf_counter()
            per_book[book.file] = {
                "chunk": round(t1 - t0, 2),
                "chunk_cached": float(hit),
                "embed": round(embedder.seconds - before, 2),
                "store": round(t3 - t2, 2),
            }
            t["chunk"] += t1 - t0
            t["embed"] += t2 - t1
            t["store"] += t3 - t2
            all_nodes[book.file] = nodes
            words += [word_count(n.get_content(metadata_mode=MetadataMode.NONE)) for n in nodes]
            say(
                f"  {spec.key} {book.book_id}: {len(nodes)} chunks"
                + (_children_note(parents[book.file]) if spec.children else "")
                + f"{' (cached)' if hit else ''}, chunk {t1 - t0:.1f}s, embed {t2 - t1:.1f}s"
            )

        t0 = time.perf_counter()
        scores: dict[str, list[QuestionScore]] = {m.name: [] for m in modes}
        spans_total = spans_split = 0
        for book in books:
            nodes = all_nodes[book.file]
            index = {n.node_id: i for i, n in enumerate(nodes)}
            norm = [normalize(n.get_content(metadata_mode=MetadataMode.NONE)) for n in nodes]
            qvecs = embedder.embed([q.question for q in book.questions], kind="query")
            for q, qvec in zip(book.questions, qvecs, strict=True):
                needles = [normalize(s) for s in q.spans]
                spans_total += len(needles)
                spans_split += sum(not any(nd in c for c in norm) for nd in needles)
                for mode in modes:
                    asked = _query(mode, q.question, qvec.tolist(), book.book_id, top_k, cand)
                    if spec.children:  # rank the children, collapse them to their blocks
                        res = store.query(_child_query(asked, mode, cand))
                        found = collapse(res.ids or [], parents[book.file])
                    else:
                        found = store.query(asked).ids or []
                    ids = [index[i] for i in found][:top_k]
                    if mode.kind == "rerank":
                        t_r = time.perf_counter()
                        ids = _rerank(reranker, q.question, [nodes[i] for i in ids], ids)
                        t["rerank"] += time.perf_counter() - t_r
                    ranked = [[nd in norm[i] for nd in needles] for i in ids]
                    scores[mode.name].append(QuestionScore.from_relevance(q.id, book.file, ranked))
        t["query"] = time.perf_counter() - t0 - t["rerank"]
    finally:
        store.close()

    boundary = None
    if intrinsic:
        from litrag.eval.intrinsic import boundary_similarity

        t0 = time.perf_counter()
        nodes_flat = [n for b in books for n in all_nodes[b.file]]
        boundary = boundary_similarity(nodes_flat, embedder).as_dict()
        t["intrinsic"] = time.perf_counter() - t0

    return ChunkerResult(
        key=spec.key,
        label=spec.label,
        chunks=len(words),
        words=words,
        split_spans=spans_split / spans_total if spans_total else 0.0,
        modes={m: aggregate(s) for m, s in scores.items()},
        scores=scores,
        seconds={k: round(v, 2) for k, v in t.items()},
        seconds_per_book=per_book,
        intrinsic=boundary,
        outcomes=_outcomes(n for b in books for n in all_nodes[b.file]),
    )


def _rerank(reranker: Any, query: str, nodes: Sequence[BaseNode], ids: list[int]) -> list[int]:
    """``ids`` reordered by the reranker's score of each node (ties keep the hybrid order)."""
    mode = getattr(reranker, "metadata_mode", MetadataMode.LLM)
    scores = reranker.score(query, [n.get_content(metadata_mode=mode) for n in nodes])
    order = sorted(range(len(ids)), key=lambda j: -scores[j])
    return [ids[j] for j in order]


def _outcomes(nodes: Iterable[BaseNode]) -> dict[str, int]:
    """Chunks per LLM outcome (valid, repaired, fallback, ...), from the nodes' metadata."""
    out: dict[str, int] = {}
    for node in nodes:
        outcome = node.metadata.get("segmentation_outcome") or node.metadata.get("lumber_outcome")
        if outcome is not None:
            out[str(outcome)] = out.get(str(outcome), 0) + 1
    return out


def evaluate_retrieval(
    questions: Sequence[Question],
    books_dir: Path,
    chunkers: Sequence[str] = DEFAULT_CHUNKERS,
    modes: Sequence[Mode] | None = None,
    *,
    cache_dir: Path,
    embedder: CachedEmbedder | None = None,
    embed_model: str = "minilm",
    top_k: int = DEFAULT_TOP_K,
    candidates: int | None = None,
    dense_vectors: DenseVectors = "windows",
    bm25_avg_len: float | None = None,
    bm25_windows: float | None = None,
    intrinsic: bool = True,
    llm: ChunkerLLM | None = None,
    reranker: Any = None,
    max_chapters: int | None = None,
    say: Say = print,
    on_chunker: Callable[[RetrievalRun], None] | None = None,
) -> RetrievalRun:
    """Run every chunker over the question set; see the module docstring for the protocol.

    ``llm`` makes the LLM chunkers available (its replies cached under ``cache_dir/llm`` unless
    it names its own folder); ``reranker`` enables the ``rerank`` modes, which are skipped with a
    line said when it is None. ``on_chunker`` gets the partial run after each chunker but the last
    (the CLI writes partial reports with it, so a long run stopped midway still leaves its
    finished rows). ``embed_model`` names the embedder built when ``embedder`` is None:
    ``minilm`` (windowed), ``nomic`` or a sentence-transformers folder.
    """
    t_start = time.perf_counter()
    if llm is not None and llm.cache_dir is None:
        llm = replace(llm, cache_dir=cache_dir / "llm")
    chunker_specs(chunkers, llm)  # unknown keys, or an LLM chunker without an LLM: fail first
    modes = list(modes or parse_modes(["dense", "bm25", "hybrid"]))
    if reranker is None and any(m.kind == "rerank" for m in modes):
        skipped = [m.name for m in modes if m.kind == "rerank"]
        say(
            f"skipping {', '.join(skipped)}: no reranker configured "
            "(--reranker PATH to a local Qwen3-Reranker checkpoint)"
        )
        modes = [m for m in modes if m.kind != "rerank"]
    books, dropped = load_books(questions, books_dir, max_chapters)
    n_q = sum(len(b.questions) for b in books)
    where = "the book" if max_chapters is None else f"the first {max_chapters} chapters"
    say(f"{n_q} questions over {len(books)} books; span not in {where}: {dropped or 'none'}")
    cache = None
    if embedder is None:
        cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
        embedder = harness_embedder(cache, embed_model, say=say)
    specs = chunker_specs(chunkers, llm, embedder)
    comp0, cached0 = embedder.computed, embedder.cached
    results: list[ChunkerResult] = []
    config = {
        "chunkers": [s.key for s in specs],
        "modes": [m.name for m in modes],
        "top_k": top_k,
        "fusion_candidates": max(candidates or top_k, top_k),
        "dense_vectors": (
            SentenceWindowEncoder(embedder.embed).describe() + " (the library's default)"
            if dense_vectors == "windows"
            else (WHOLE_VECTOR_LABEL if embed_model == "nomic" else ONE_VECTOR_LABEL)
        ),
        "bm25_avg_len": bm25_avg_len or "fitted per book",
        "bm25_windows": _bm25_windows(bm25_windows),
        "embedding_model": embedder.model_key,
        "store": "Qdrant Edge (qdrant-edge-py), one collection per chunker, book_id filter",
        "sparse_idf": "per book (Edge IDF over the filtered points)",
    }
    if max_chapters is not None:
        config["max_chapters"] = max_chapters
    if llm is not None:
        config["llm"] = llm.name
        config["llm_settings"] = {
            "max_unit_words": llm.max_unit_words,
            "max_retries": llm.max_retries,
            "workers": llm.workers,
        }
    if reranker is not None:
        name = getattr(reranker, "model_path", None) or type(reranker).__name__
        config["reranker"] = Path(str(name)).name

    def snapshot() -> RetrievalRun:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB (bytes on macOS)
        return RetrievalRun(
            config={**config, "chunkers": [r.key for r in results]},
            questions=n_q,
            books={b.file: len(b.questions) for b in books},
            dropped=dropped,
            chunkers=list(results),
            embeddings_computed=embedder.computed - comp0,
            embeddings_cached=embedder.cached - cached0,
            seconds=time.perf_counter() - t_start,
            peak_rss_mb=peak / 1024 / (1024 if sys.platform == "darwin" else 1),
            environment=environment(),
        )

    try:
        for spec in specs:
            t0 = time.perf_counter()
            results.append(
                evaluate_chunker(
                    spec,
                    books,
                    modes,
                    embedder,
                    cache_dir / "edge",
                    top_k=top_k,
                    candidates=candidates,
                    dense_vectors=dense_vectors,
                    bm25_avg_len=bm25_avg_len,
                    bm25_windows=bm25_windows,
                    chunk_cache=cache_dir,
                    intrinsic=intrinsic,
                    reranker=reranker,
                    say=say,
                )
            )
            say(f"done {spec.key} in {time.perf_counter() - t0:.0f}s")
            if on_chunker is not None and len(results) < len(specs):
                on_chunker(snapshot())
    finally:
        if cache is not None:
            cache.close()
    return snapshot()
