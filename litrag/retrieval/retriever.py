"""Hybrid (dense + BM25) retrieval inside the selected book(s), with a hard spoiler limit.

The spoiler limit ("I have read up to chapter N") is a ``chapter_index <= N`` condition in the
vector-store query itself, so a later block can never reach the reranker, the prompt or the
sources; a prompt instruction would only ask the LLM to keep quiet about text it has seen.
Chapter 0 (front matter) is always allowed: it comes before chapter 1.

Fusion is the vector store's own ``HYBRID`` query (LlamaIndex's relative-score fusion, ``alpha``
weighting the dense list), so it runs unchanged on the embedded Edge store and on a Qdrant server.
Two presets:

- ``embedded`` (default): the packaged MiniLM embedder is weak next to BM25 on novels (on the
  six-book question set BM25 alone beats equal-weight fusion for every chunker, as the rows
  below show), so fusion leans on BM25 (``alpha`` 0.3)
  and no reranker runs; top 5. Measured on the six-book question set (LitSeg offline blocks,
  ``litrag eval retrieval --modes bm25,hybrid --alpha 0.1,0.2,0.3,0.5``): Hit@5
  BM25 0.783, alpha 0.1 0.789, 0.2 0.789, 0.3 0.794, 0.5 0.789; MRR 0.689, 0.687, 0.679, 0.671,
  0.577. The five blocks the LLM reads are what matter here, so 0.3 (best Hit@5) is the default.
- ``paper``: the LitSeg paper's candidates, dense top 18 ∪ BM25 top 2 (``candidates`` 20 keeps the
  whole union), then a reranker (e.g. ``retrieval.rerank.Qwen3Reranker``) to the top 5.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import BaseModel, Field
from llama_index.core.callbacks import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from litrag.chunkers.children import PARENT_KEY
from litrag.retrieval.evidence import with_evidence

if TYPE_CHECKING:
    from litrag.settings import Settings
    from litrag.stores.edge_points import Hit

logger = logging.getLogger(__name__)

Preset = Literal["embedded", "paper"]
SpoilerLimit = int | Mapping[str, int] | None

_MODES = {
    "hybrid": VectorStoreQueryMode.HYBRID,
    "dense": VectorStoreQueryMode.DEFAULT,
    "sparse": VectorStoreQueryMode.SPARSE,
}


class UnknownBookError(ValueError):
    """A book id that is not (completely) in the library; the message lists the loaded books."""

    def __init__(self, missing: Sequence[str], loaded: Mapping[str, str], note: str = "") -> None:
        self.missing = list(missing)
        self.loaded = dict(loaded)
        names = ", ".join(repr(b) for b in self.missing)
        if loaded:
            have = "; ".join(f"{k} ({v})" for k, v in sorted(self.loaded.items()))
            where = f"loaded books: {have}"
        else:
            where = "the library is empty (add books with: litrag ingest BOOK.txt)"
        s = "s" if len(self.missing) > 1 else ""
        super().__init__(f"no book{s} {names} in the library{note}; {where}")


class RetrievalSettings(BaseModel):
    """How candidates are found and cut; one preset per backend, every knob overridable."""

    preset: Preset = Field(default="embedded", description="Which preset these values came from.")
    mode: Literal["hybrid", "dense", "sparse"] = Field(
        default="hybrid", description="Store query mode: dense + BM25 fused, or one of them alone."
    )
    dense_top_k: int = Field(default=10, ge=1, description="Dense (embedding) candidates.")
    sparse_top_k: int = Field(default=10, ge=1, description="BM25 candidates.")
    alpha: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="Weight of the dense list in relative-score fusion (1 - alpha for BM25).",
    )
    bm25_windows: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description=(
            "Weight of a block's best 3-sentence window in its BM25 score (0: block BM25 alone); "
            "BM25 then depends less on block length. Embedded store only (window_bm25)."
        ),
    )
    candidates: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Fused list length handed to the reranker. None: top_k without a reranker, the whole "
            "union (dense_top_k + sparse_top_k) with one."
        ),
    )
    top_k: int = Field(default=5, ge=1, description="Blocks returned (and given to the LLM).")
    rank_through: Literal["children", "blocks"] = Field(
        default="children",
        description=(
            "What is scored: each block's paragraph children (small-to-big: a block ranks where "
            "its best paragraph ranks among paragraphs), or the blocks themselves. Children need "
            "a library ingested with them; without, blocks are scored."
        ),
    )
    child_top_k: int = Field(
        default=20,
        ge=1,
        description=(
            "Children per list (dense and BM25) when ranking through children; their fused "
            "union collapses to blocks by each block's best child."
        ),
    )

    @classmethod
    def from_preset(cls, preset: str = "embedded", **overrides: Any) -> RetrievalSettings:
        if preset not in PRESETS:
            raise ValueError(f"unknown retrieval preset {preset!r}: use one of {sorted(PRESETS)}")
        values = {**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
        return cls(preset=preset, **values)  # type: ignore[arg-type]

    @classmethod
    def from_settings(
        cls, s: Settings | None = None, preset: str | None = None
    ) -> RetrievalSettings:
        """The configured retrieval: ``preset`` (else ``LITRAG_RETRIEVAL``) with the
        ``LITRAG_RETRIEVAL_<FIELD>`` overrides, as ``litrag.settings`` read and checked them."""
        if s is None:
            from litrag.settings import Settings

            s = Settings()
        return cls.from_preset(preset or s.retrieval, **s.retrieval_overrides)

    def candidate_count(self, reranking: bool) -> int:
        if self.candidates is not None:
            return max(self.candidates, self.top_k)
        return self.dense_top_k + self.sparse_top_k if reranking else self.top_k

    def describe(self, reranker: str | None = None, through_children: bool = False) -> str:
        dense_k, sparse_k = self.dense_top_k, self.sparse_top_k
        if through_children:  # the children's lists are child_top_k deep (child_query)
            dense_k = sparse_k = self.child_top_k
        if self.mode == "hybrid":
            how = f"hybrid dense top {dense_k} + BM25 top {sparse_k} (alpha {self.alpha:g})"
        elif self.mode == "dense":
            how = f"dense top {dense_k}"
        else:
            how = f"BM25 top {sparse_k}"
        if self.mode != "dense" and self.bm25_windows > 0:
            how += f", BM25 windows {self.bm25_windows:g}"
        if through_children:
            how = f"paragraph children: {how}, each block by its best child"
        rr = ", no reranker"
        if reranker:
            rr = f", {self.candidate_count(True)} candidates reranked by {reranker}"
        return f"{self.preset}: {how}{rr}, top {self.top_k}"


PRESETS: dict[str, dict[str, Any]] = {
    "embedded": {"mode": "hybrid", "dense_top_k": 10, "sparse_top_k": 10, "alpha": 0.3, "top_k": 5},
    "paper": {
        "mode": "hybrid",
        "dense_top_k": 18,
        "sparse_top_k": 2,
        "alpha": 0.5,
        "candidates": 20,
        "top_k": 5,
    },
}


def book_filters(book_ids: Sequence[str], upto_chapter: SpoilerLimit = None) -> MetadataFilters:
    """The store filter: these books only, and within each no chapter past its limit.

    ``upto_chapter`` is one limit for every book, or a ``{book_id: N}`` map (books missing from
    the map are unlimited).
    """
    if not book_ids:
        raise ValueError("choose at least one book")
    books = list(dict.fromkeys(book_ids))
    in_books = MetadataFilter(key="book_id", value=books, operator=FilterOperator.IN)
    if upto_chapter is None:
        return MetadataFilters(filters=[in_books])
    if not isinstance(upto_chapter, Mapping):
        return MetadataFilters(
            filters=[in_books, _chapter_at_most(_check_limit(upto_chapter))],
            condition=FilterCondition.AND,
        )
    limits = {b: _check_limit(n) for b, n in upto_chapter.items() if b in books}
    free = [b for b in books if b not in limits]
    parts: list[MetadataFilter | MetadataFilters] = [
        MetadataFilters(
            filters=[
                MetadataFilter(key="book_id", value=b, operator=FilterOperator.EQ),
                _chapter_at_most(n),
            ],
            condition=FilterCondition.AND,
        )
        for b, n in limits.items()
    ]
    if free:
        parts.append(MetadataFilter(key="book_id", value=free, operator=FilterOperator.IN))
    return MetadataFilters(filters=parts, condition=FilterCondition.OR)


def character_filters(
    filters: MetadataFilters, characters: Sequence[str], every: bool = False
) -> MetadataFilters:
    """``filters`` and: the block names one of ``characters`` (canonical ids of the character
    index, payload ``characters``), or each of them with ``every`` (one "any" match per id, so
    the filter means the same on the embedded store and on a Qdrant server)."""
    if not characters:
        return filters
    if every:
        named: list[MetadataFilter | MetadataFilters] = [
            MetadataFilter(key="characters", value=[c], operator=FilterOperator.IN)
            for c in dict.fromkeys(characters)
        ]
    else:
        named = [
            MetadataFilter(key="characters", value=list(characters), operator=FilterOperator.IN)
        ]
    return MetadataFilters(filters=[filters, *named], condition=FilterCondition.AND)


def _chapter_at_most(n: int) -> MetadataFilter:
    return MetadataFilter(key="chapter_index", value=n, operator=FilterOperator.LTE)


def _check_limit(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"a spoiler limit is a chapter number >= 0, got {n!r}")
    return n


def within_limit(node: Any, upto_chapter: SpoilerLimit) -> bool:
    """True when ``node`` (its metadata) is inside the spoiler limit."""
    if upto_chapter is None:
        return True
    meta = node.metadata
    limit = (
        upto_chapter.get(meta.get("book_id")) if isinstance(upto_chapter, Mapping) else upto_chapter
    )
    return limit is None or int(meta.get("chapter_index", 0)) <= limit


def loaded_books(records: Iterable[Any]) -> tuple[dict[str, str], dict[str, str]]:
    """``({id: title} complete, {id: title} still ingesting)`` from registry rows."""
    done: dict[str, str] = {}
    partial: dict[str, str] = {}
    for r in records:
        (done if getattr(r, "status", "complete") == "complete" else partial)[r.book_id] = r.title
    return done, partial


def check_books(
    book_ids: str | Sequence[str],
    books: Mapping[str, str],
    partial_books: Mapping[str, str] | None = None,
) -> None:
    """Raise ``UnknownBookError`` (listing the loaded books) unless every id is loaded."""
    ids = [book_ids] if isinstance(book_ids, str) else list(book_ids)
    partial = [b for b in ids if b in (partial_books or {})]
    if partial:
        raise UnknownBookError(partial, books, note=" yet (its ingest did not finish: rerun it)")
    missing = [b for b in ids if b not in books]
    if missing:
        raise UnknownBookError(missing, books)


class BookRetriever(BaseRetriever):
    """Blocks of the selected book(s) for a question, none past the spoiler limit.

    ``books`` (``{book_id: title}``, e.g. from ``loaded_books(Library.read_registry(home))``)
    makes unknown ids fail early with the list of loaded books; without it any id is queried.
    ``reranker`` is any LlamaIndex node postprocessor (``litrag.retrieval.rerank`` holds ours);
    it sees ``candidates``, the fused candidates already inside the spoiler limit, and its order
    is kept, cut to ``settings.top_k``.
    """

    def __init__(
        self,
        vector_store: BasePydanticVectorStore,
        embed_model: BaseEmbedding | None,
        book_ids: str | Sequence[str],
        *,
        upto_chapter: SpoilerLimit = None,
        settings: RetrievalSettings | None = None,
        reranker: BaseNodePostprocessor | None = None,
        books: Mapping[str, str] | None = None,
        partial_books: Mapping[str, str] | None = None,
        callback_manager: CallbackManager | None = None,
        characters: Sequence[str] | None = None,
        every_character: bool = False,
        children_store: BasePydanticVectorStore | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        # The blocks' paragraph children (litrag.chunkers.children), when the library has them.
        self.children_store = children_store
        self.characters = list(characters or [])  # only blocks naming one of them
        self.every_character = every_character  # ... or naming each of them
        self.vector_store = vector_store
        self.embed_model = embed_model
        self.settings = settings or RetrievalSettings.from_preset("embedded")
        self.reranker = reranker
        self.books = dict(books) if books is not None else None
        self.partial_books = dict(partial_books or {})
        if self.settings.mode != "sparse" and embed_model is None:
            raise ValueError(f"{self.settings.mode} retrieval needs an embedding model")
        self.select(book_ids, upto_chapter)

    def select(self, book_ids: str | Sequence[str], upto_chapter: SpoilerLimit = None) -> None:
        """Change the books and the spoiler limit (validated now, not at the first question)."""
        ids = [book_ids] if isinstance(book_ids, str) else list(dict.fromkeys(book_ids))
        if self.books is not None:
            check_books(ids, self.books, self.partial_books)
        self._filters = character_filters(
            book_filters(ids, upto_chapter),
            getattr(self, "characters", []),
            getattr(self, "every_character", False),
        )  # validates both arguments
        self.book_ids = ids
        self.upto_chapter = upto_chapter

    @property
    def filters(self) -> MetadataFilters:
        return self._filters

    @property
    def titles(self) -> list[str]:
        """Titles of the selected books (ids where the titles are unknown)."""
        return [(self.books or {}).get(b, b) for b in self.book_ids]

    def book_texts(self) -> list[str]:
        """The text of every block of the selected books within the spoiler limit, whatever
        characters the retriever is steered to: the vocabulary ``answering.name_check`` reads."""
        nodes = self.vector_store.get_nodes(filters=book_filters(self.book_ids, self.upto_chapter))
        return [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]

    def has_text_past_limit(self) -> bool:
        """Whether a selected book goes on past the reader's spoiler limit (its ending, then,
        is not among the passages the reader may see: ``litrag.answering.ahead``)."""
        limit = self.upto_chapter
        if limit is None:
            return False
        limits = limit if isinstance(limit, Mapping) else dict.fromkeys(self.book_ids, limit)
        for book, n in limits.items():
            if book not in self.book_ids:
                continue
            past = MetadataFilters(
                filters=[
                    MetadataFilter(key="book_id", value=book, operator=FilterOperator.EQ),
                    MetadataFilter(key="chapter_index", value=n, operator=FilterOperator.GT),
                ],
                condition=FilterCondition.AND,
            )
            count = getattr(self.vector_store, "count", None)
            if count(past) if callable(count) else len(self.vector_store.get_nodes(filters=past)):
                return True
        return False

    @property
    def through_children(self) -> bool:
        """Whether blocks are ranked through their paragraph children."""
        return self.children_store is not None and self.settings.rank_through == "children"

    def describe(self) -> str:
        name = None
        if self.reranker is not None:  # a served one names its model and server
            own = getattr(self.reranker, "describe", None)
            name = own() if callable(own) else type(self.reranker).__name__
        return self.settings.describe(name, self.through_children)

    def vector_query(self, question: str) -> VectorStoreQuery:
        """The store query for ``question``: the spoiler limit is in its ``filters``."""
        s = self.settings
        mode = _MODES[s.mode]
        first_k = s.sparse_top_k if mode == VectorStoreQueryMode.SPARSE else s.dense_top_k
        embedding = None
        if mode != VectorStoreQueryMode.SPARSE:
            assert self.embed_model is not None
            embedding = self.embed_model.get_query_embedding(question)
        return VectorStoreQuery(
            query_embedding=embedding,
            query_str=question,
            similarity_top_k=first_k,
            sparse_top_k=s.sparse_top_k,
            hybrid_top_k=s.candidate_count(self.reranker is not None),
            alpha=s.alpha,
            mode=mode,
            filters=self._filters,
        )

    def child_query(self, question: str) -> VectorStoreQuery:
        """The children's store query: ``child_top_k`` deep lists, their whole fused union."""
        k = self.settings.child_top_k
        query = self.vector_query(question)
        query.similarity_top_k = k
        query.sparse_top_k = k
        query.hybrid_top_k = 2 * k
        return query

    def _window_kwargs(self, store: BasePydanticVectorStore) -> dict[str, Any]:
        if not hasattr(store, "sparse_window_weight"):
            return {}
        return {"sparse_window_weight": self.settings.bm25_windows}  # the Edge store re-scores

    def _search(
        self, store: BasePydanticVectorStore, query: VectorStoreQuery
    ) -> list[NodeWithScore]:
        result = store.query(query, **self._window_kwargs(store))
        sims = result.similarities or [None] * len(result.nodes or [])
        return [
            NodeWithScore(node=n, score=s) for n, s in zip(result.nodes or [], sims, strict=True)
        ]

    def rank_children(self, question: str) -> list[NodeWithScore]:
        """The paragraph children for ``question``, best first, under the same filters (books,
        spoiler limit, characters) and BM25 re-scoring as blocks."""
        if self.children_store is None:
            raise ValueError("this retriever has no children's store")
        return self._search(self.children_store, self.child_query(question))

    def _through_children(self, question: str) -> list[NodeWithScore]:
        """Blocks in the order of each one's best child (small-to-big); each block carries
        that child's span as its evidence (``retrieval.evidence``)."""
        if callable(getattr(self.children_store, "query_hits", None)):
            return self._through_child_hits(question)
        best: dict[str, NodeWithScore] = {}
        for child in self.rank_children(question):  # best first: the first child per block
            best.setdefault(str(child.node.metadata.get(PARENT_KEY) or ""), child)
        best.pop("", None)  # a child without a block (never written so) ranks nothing
        found = {n.node_id: n for n in self._blocks(list(best))}
        if missing := [b for b in best if b not in found]:
            logger.error("%d ranked children have no block in the store", len(missing))
        return [
            NodeWithScore(node=with_evidence(found[parent], child.node), score=child.score)
            for parent, child in best.items()
            if parent in found
        ]

    def _through_child_hits(self, question: str) -> list[NodeWithScore]:
        """``_through_children`` on the embedded store, reading only what can be returned:
        the children come back as ids, scores and their block's id (``query_hits``); the
        first ``candidate_count`` blocks (the most ``_retrieve`` keeps) and their winning
        children are the only nodes decoded. Same blocks, order and scores."""
        store: Any = self.children_store
        best: dict[str, Hit] = {}
        query = self.child_query(question)
        for hit in store.query_hits(query, [PARENT_KEY], **self._window_kwargs(store)):
            best.setdefault(str(hit.payload.get(PARENT_KEY) or ""), hit)  # best first
        best.pop("", None)  # a child without a block (never written so) ranks nothing
        parents, want = list(best), self.settings.candidate_count(self.reranker is not None)
        found: dict[str, BaseNode] = {}
        read = missing = 0
        while read < len(parents) and len(found) < want:
            part = parents[read : read + want - len(found)]
            read += len(part)
            got = {n.node_id: n for n in self._blocks(part)}
            missing += sum(p not in got for p in part)
            found.update(got)
        if missing:
            logger.error("%d ranked children have no block in the store", missing)
        kept = [p for p in parents[:read] if p in found]
        children = store.nodes_at([best[p].id for p in kept])
        out = []
        for parent in kept:
            child = children.get(best[parent].id)
            block = found[parent] if child is None else with_evidence(found[parent], child)
            out.append(NodeWithScore(node=block, score=best[parent].score))
        return out

    def _blocks(self, node_ids: list[str]) -> list[BaseNode]:
        """Blocks by id, without their vectors where the store can leave them out (ours)."""
        if getattr(self.vector_store, "gets_nodes_without_vectors", False):
            return self.vector_store.get_nodes(node_ids=node_ids, with_vectors=False)
        return self.vector_store.get_nodes(node_ids=node_ids)

    def candidates(self, query: QueryBundle | str) -> list[NodeWithScore]:
        """The fused candidates for the question, best first, none past the spoiler limit: what
        the reranker sees (``candidate_count`` of them at most), with their retrieval scores."""
        text = query if isinstance(query, str) else query.query_str
        question = text.strip()
        if not question:
            raise ValueError("the question is empty")
        if self.through_children:
            nodes = self._through_children(question)
        else:
            nodes = self._search(self.vector_store, self.vector_query(question))
        if self.settings.mode != "hybrid" or self.through_children:
            nodes = nodes[: self.settings.candidate_count(self.reranker is not None)]
        # Defence in depth: the store already filtered; a leak here would be a store bug.
        kept = [n for n in nodes if n.node.metadata.get("book_id") in self.book_ids]
        kept = [n for n in kept if within_limit(n.node, self.upto_chapter)]
        if len(kept) != len(nodes):
            logger.error("the store returned %d blocks outside the filter", len(nodes) - len(kept))
        return kept

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The pipeline: ``candidates`` (spoiler-safe), then the reranker (any node
        postprocessor), then the first ``top_k``. The reranker runs here, not in the query
        engine's postprocessors, because every caller of the retriever (the answer engine, the
        narrative tools' steered retrievers, evaluation) must get the same reranked top_k."""
        kept = self.candidates(query_bundle)
        if self.reranker is not None and kept:
            kept = self.reranker.postprocess_nodes(kept, query_bundle=query_bundle)
        return kept[: self.settings.top_k]
