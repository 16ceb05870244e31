"""A LlamaIndex vector store on the Qdrant engine running in-process (``qdrant-edge-py``).

Why: qdrant-client's embedded mode (``QdrantClient(path=...)``) is a pure-Python engine that checks
filters point by point (~100 ms per filtered query at 10k points); Edge is Qdrant's own Rust engine
(HNSW, payload indexes, sparse vectors with IDF, WAL) in the process, with no server. The payload
layout, vector names and hybrid semantics mirror LlamaIndex's ``QdrantVectorStore`` so a library can
move to a Qdrant server (``QDRANT_URL``) without re-ingesting and the rest of litrag never knows
which store it has.

On disk, one folder per collection::

    <path>/<collection_name>/shard/             the Edge shard (segments, WAL, edge_config.json)
    <path>/<collection_name>/litrag_store.json  our config, so a reopen needs no arguments
    <path>/<collection_name>/owner.json         which process holds the shard (for lock errors)

This module is the store class: its settings and its open, write, read and query paths over one
shard. The parts are elsewhere: config and owner files in ``edge_schema``, the config check, lock
and open in ``edge_open``, nodes as points in ``edge_points``, filter translation in
``edge_filters``, the query requests (window MaxSim, BM25 with its IDF scope, window BM25) in
``edge_search`` and hybrid fusion in ``fusion``.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import qdrant_edge as qe
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from litrag.scoring.fusion import relative_score_fusion
from litrag.scoring.kept_terms import pack_terms
from litrag.scoring.window_bm25 import DEFAULT_POOL, sentence_terms
from litrag.stores.edge_filters import metadata_filters_to_edge
from litrag.stores.edge_open import (
    StoreConfigError,
    StoreDamagedError,
    StoreLockedError,
    StoreReadOnlyError,
    open_shard,
    resolve_config,
    settle_shard,
    warm_in_background,
)
from litrag.stores.edge_points import (
    BatchSparseEncoding,
    Hit,
    PointId,
    ScannedPoint,
    SparseEncoderCallable,
    StoredPoint,
    WindowEncoderCallable,
    node_id_to_point_id,
    node_payload,
    node_to_point,
    paged,
    record_to_node,
    scanned_point,
    stored_point,
)
from litrag.stores.edge_schema import DOC_ID_KEY, SHARD_DIR, EdgeStoreConfig, remove_owner
from litrag.stores.edge_search import EdgeSearch, HybridFusionCallable, IdfCache

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = [
    "Hit",
    "PointId",
    "QdrantEdgeVectorStore",
    "ScannedPoint",
    "StoreConfigError",
    "StoreDamagedError",
    "StoreLockedError",
    "StoreReadOnlyError",
    "StoredPoint",
    "node_id_to_point_id",
]

logger = logging.getLogger(__name__)


class QdrantEdgeVectorStore(BasePydanticVectorStore):
    """LlamaIndex vector store over one ``qdrant_edge.EdgeShard`` per collection.

    Dense (``DEFAULT``), ``SPARSE`` and ``HYBRID`` queries; ``HYBRID`` runs dense top
    ``similarity_top_k`` and sparse top ``sparse_top_k`` in one batch and fuses them to
    ``hybrid_top_k`` with relative-score fusion (``alpha`` weights dense), as LlamaIndex's
    ``QdrantVectorStore`` does. Sparse vectors come from ``sparse_doc_fn`` / ``sparse_query_fn``.
    One process owns a shard: a second opener gets ``StoreLockedError``.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    flat_metadata: bool = False
    gets_nodes_without_vectors: ClassVar[bool] = True  # get_nodes(..., with_vectors=False)

    path: str = Field(description="Data directory; the collection lives in path/collection_name.")
    collection_name: str = Field(description="Collection (one Edge shard) name.")
    config: EdgeStoreConfig = Field(description="Structural settings, persisted beside the shard.")
    batch_size: int = Field(default=512, description="Points per upsert call.")
    hnsw_ef: int = Field(
        default=128,
        description=(
            "HNSW search beam (HNSW is only used above full_scan_threshold_kb). Measured on 27k "
            "WordLlama sentence vectors, m=16, ef_construct=100: recall@10 0.97 at 64, 0.98 at "
            "128, 0.99 at 256, 0.999 exact. Per query: search_params={'hnsw_ef'|'exact': ...}."
        ),
    )
    sparse_idf_scope: Literal["collection", "filter"] = Field(
        default="collection",
        description=(
            "IDF statistics over the whole collection (as a Qdrant server), or over the points the "
            "query's filter selects (per-book BM25 when filtering by book)."
        ),
    )

    warm_on_open: bool = Field(
        default=True,
        description=(
            "Read the payloads and the sparse index into the page cache on a background thread "
            "when the shard opens (edge_open.warm_shard): the first question about a book then "
            "finds them in memory instead of paging them in from disk."
        ),
    )
    sparse_window_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description=(
            "Weight of each candidate's best 3-sentence window in its BM25 score (window_bm25); "
            "0: the engine's block BM25 alone. A query may override it (kwargs "
            "sparse_window_weight). Needs litrag's BM25Encoder as the sparse functions."
        ),
    )
    sparse_window_pool: int = Field(
        default=DEFAULT_POOL,
        ge=1,
        description="BM25 candidates re-scored by their windows when the window weight is > 0.",
    )

    _shard: qe.EdgeShard | None = PrivateAttr(default=None)
    _sparse_doc_fn: SparseEncoderCallable | None = PrivateAttr(default=None)
    _sparse_query_fn: SparseEncoderCallable | None = PrivateAttr(default=None)
    _fusion_fn: HybridFusionCallable | None = PrivateAttr(default=None)
    _window_doc_fn: WindowEncoderCallable | None = PrivateAttr(default=None)
    # The engine's IDF per query term and filter, read back for window BM25; emptied by every
    # write and reopen (the only writer is this object: the shard is locked to one opener).
    _idf_cache: IdfCache = PrivateAttr(default_factory=dict)
    _warming: threading.Thread | None = PrivateAttr(default=None)
    _warm_stop: threading.Event = PrivateAttr(default_factory=threading.Event)

    def __init__(
        self,
        path: str | os.PathLike[str],
        collection_name: str = "litrag",
        *,
        dense_dim: int | None = None,
        config: EdgeStoreConfig | None = None,
        sparse_doc_fn: SparseEncoderCallable | None = None,
        sparse_query_fn: SparseEncoderCallable | None = None,
        hybrid_fusion_fn: HybridFusionCallable | None = None,
        window_doc_fn: WindowEncoderCallable | None = None,
        new_windowed: bool | None = None,
        **kwargs: Any,
    ) -> None:
        folder = Path(path) / collection_name
        # A new collection keeps window vectors when asked (``new_windowed``), else when an
        # encoder is given; a saved collection keeps what it was made with either way.
        windowed = window_doc_fn is not None if new_windowed is None else new_windowed
        cfg = resolve_config(folder, config, dense_dim, windowed=windowed)
        super().__init__(path=str(path), collection_name=collection_name, config=cfg, **kwargs)
        self._sparse_doc_fn = sparse_doc_fn
        self._sparse_query_fn = sparse_query_fn
        self._fusion_fn = hybrid_fusion_fn
        self._window_doc_fn = window_doc_fn
        if self._shard_dir.joinpath("edge_config.json").exists() or cfg.dense_dim is not None:
            self._open()

    # ----------------------------------------------------------------------------- lifecycle
    @classmethod
    def class_name(cls) -> str:
        return "QdrantEdgeVectorStore"

    @property
    def client(self) -> qe.EdgeShard | None:
        """The underlying ``qdrant_edge.EdgeShard`` (None until the dense size is known)."""
        return self._shard

    @property
    def folder(self) -> Path:
        return Path(self.path) / self.collection_name

    @property
    def _shard_dir(self) -> Path:
        return self.folder / SHARD_DIR

    def set_query_functions(
        self,
        sparse_doc_fn: SparseEncoderCallable | None = None,
        sparse_query_fn: SparseEncoderCallable | None = None,
        hybrid_fusion_fn: HybridFusionCallable | None = None,
    ) -> None:
        """Swap the sparse encoders (they are code, so they are not persisted)."""
        self._sparse_doc_fn = sparse_doc_fn
        self._sparse_query_fn = sparse_query_fn
        self._fusion_fn = hybrid_fusion_fn

    def set_window_fn(self, window_doc_fn: WindowEncoderCallable | None) -> None:
        """Set the sentence-window encoder (code, so not persisted); needed to add nodes to a
        collection that keeps window vectors."""
        self._window_doc_fn = window_doc_fn

    def _open(self) -> None:
        """Load or create the shard (``StoreLockedError`` when another opener holds it), then
        own it, save the config and create missing payload indexes."""
        self._idf_cache.clear()
        self._shard = shard = open_shard(self.folder, self.config)
        settle_shard(shard, self.folder, self.config)
        if self.warm_on_open:
            self._warm_stop = threading.Event()
            self._warming = warm_in_background(self._shard_dir, self._warm_stop)

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Wait for the open's page-cache warm-up (``warm_on_open``) to finish; True when it has
        (or none ran). Queries need not wait: they are only slower until it is done."""
        if self._warming is not None:
            self._warming.join(timeout)
            return not self._warming.is_alive()
        return True

    def close(self) -> None:
        """Stop the warm-up thread, flush and release the shard (and its lock). Safe to call
        twice. The thread is joined: one left reading while the interpreter shut down was a
        suspect of a segfault at the exit of an ingest (issue 50, bug 14)."""
        self._idf_cache.clear()
        if self._warming is not None:
            self._warm_stop.set()
            self._warming.join()
            self._warming = None
        if self._shard is None:
            return
        try:
            self._shard.flush()
        finally:
            self._shard.close()
            self._shard = None
            remove_owner(self.folder)

    def __enter__(self) -> QdrantEdgeVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def persist(self, persist_path: str, fs: AbstractFileSystem | None = None) -> None:
        """Edge persists on its own (WAL); ``persist`` just flushes, wherever it is asked to."""
        if self._shard is not None:
            self._shard.flush()

    def optimize(self) -> float:
        """Build HNSW and merge segments; call once at the end of an ingest. Returns seconds.

        Blocking and CPU-heavy (measured ~106 s for 100k 384-d points on 2 cores) but it is what
        makes large unfiltered searches fast; queries work (exactly, slower) without it. The shard
        is then reopened: Edge 0.9.0's sparse IDF statistics keep counting deleted points until a
        reload, so BM25 scores after a re-ingest would drift from a fresh store's.
        """
        if self._shard is None:
            return 0.0
        t0 = time.perf_counter()
        logger.info("optimizing %s (%d points) ...", self.folder, self.count())
        self._shard.optimize()
        self.close()
        self._open()
        dt = time.perf_counter() - t0
        logger.info("optimized %s in %.1f s", self.folder, dt)
        return dt

    # ----------------------------------------------------------------------------- writes
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Upsert nodes (same id again replaces the point); returns their node ids."""
        if not nodes:
            return []
        if self._shard is None:
            if self.config.dense_dim is None:
                self.config.dense_dim = len(nodes[0].get_embedding())
            self._open()
        assert self._shard is not None
        windowed = self.config.window_vector_name
        if windowed and self._window_doc_fn is None:
            raise ValueError(
                f"{self.folder} keeps sentence-window vectors: pass window_doc_fn (e.g. "
                "litrag.scoring.windows.SentenceWindowEncoder) to add nodes"
            )
        ids: list[str] = []
        for start in range(0, len(nodes), self.batch_size):
            batch = nodes[start : start + self.batch_size]
            sparse: BatchSparseEncoding | None = None
            if self._sparse_doc_fn is not None:
                sparse = self._sparse_doc_fn(
                    [n.get_content(metadata_mode=MetadataMode.EMBED) for n in batch]
                )
            terms = None
            if self._sparse_doc_fn is not None:  # BM25 over windows re-scores from these
                terms = [
                    pack_terms(sentence_terms(n.get_content(metadata_mode=MetadataMode.NONE)))
                    for n in batch
                ]
            windows = None
            if windowed:
                assert self._window_doc_fn is not None  # checked above
                windows = self._window_doc_fn(
                    [n.get_content(metadata_mode=MetadataMode.NONE) for n in batch]
                )
            points = []
            for i, node in enumerate(batch):
                points.append(
                    node_to_point(
                        node,
                        self.config,
                        (sparse[0][i], sparse[1][i]) if sparse is not None else None,
                        windows[i] if windows is not None else None,
                        self.flat_metadata,
                        terms[i] if terms is not None else None,
                    )
                )
                ids.append(node.node_id)
            self._write(qe.UpdateOperation.upsert_points(points))
        return ids

    def forget_reads(self) -> None:
        """Drop what queries keep between writes (the IDF read back per filter and term):
        the next query reads it again, as a process's first question about a book does."""
        self._idf_cache.clear()

    def _write(self, operation: qe.UpdateOperation) -> None:
        """Apply one write; what was read back about the collection (IDF) is then stale."""
        assert self._shard is not None
        try:
            self._shard.update(operation)
        finally:
            self._idf_cache.clear()

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of one source document (payload ``doc_id``)."""
        if self._shard is None:
            return
        cond = qe.FieldCondition(key=DOC_ID_KEY, match=qe.MatchValue(ref_doc_id))
        self._write(qe.UpdateOperation.delete_points_by_filter(qe.Filter(must=[cond])))

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete nodes matching ids AND filters; with neither, every node (as LlamaIndex does)."""
        if self._shard is None or node_ids == []:
            return
        flt = _ids_and_filters(node_ids, filters)
        self._write(qe.UpdateOperation.delete_points_by_filter(flt or qe.Filter()))

    def clear(self) -> None:
        """Drop every point: the shard folder is deleted and made again (config is kept)."""
        self._idf_cache.clear()
        if self._shard is not None:
            self._shard.close()
            self._shard = None
        shutil.rmtree(self._shard_dir, ignore_errors=True)
        remove_owner(self.folder)
        if self.config.dense_dim is not None:
            self._open()

    # ----------------------------------------------------------------------------- reads
    def count(self, filters: MetadataFilters | None = None) -> int:
        """Exact number of points (matching ``filters``)."""
        if self._shard is None:
            return 0
        flt = metadata_filters_to_edge(filters) if filters is not None else None
        return self._shard.count(qe.CountRequest(exact=True, filter=flt))

    def get_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> list[BaseNode]:
        """Nodes by id (in the order asked) and/or filter, with their dense embeddings unless
        ``with_vectors=False`` (a retriever's blocks: reading and listing the vectors was
        ~0.1 ms a question at 100k blocks, and nothing downstream reads them)."""
        if self._shard is None or node_ids == []:
            return []
        dense = self.config.dense_vector_name
        if node_ids is not None and filters is None:
            pids = [node_id_to_point_id(n) for n in node_ids]
            vectors = [dense] if kwargs.get("with_vectors", True) else False
            recs = self._shard.retrieve(pids, with_payload=node_payload(), with_vector=vectors)
            by_id = {r.id: r for r in recs}
            out = [record_to_node(by_id[p], dense) for p in dict.fromkeys(pids) if p in by_id]
            return out[:limit] if limit is not None else out
        flt = _ids_and_filters(node_ids, filters)
        recs = self._scroll(
            flt, limit=limit, with_vector=[dense], page=1024, with_payload=node_payload()
        )
        return [record_to_node(r, dense) for r in recs]

    def nodes_at(self, point_ids: Sequence[PointId]) -> dict[PointId, BaseNode]:
        """The nodes of those of these points (``Hit.id``) that exist, without vectors."""
        if self._shard is None or not point_ids:
            return {}
        recs = self._shard.retrieve(list(point_ids), with_payload=node_payload(), with_vector=False)
        return {r.id: metadata_dict_to_node(r.payload) for r in recs}

    def iter_points(self, batch_size: int = 512) -> Iterator[StoredPoint]:
        """Every point with its vectors and payload, in id order: the input of an export."""
        if self._shard is None:
            return
        for r in self._scroll(
            None, limit=None, with_vector=True, page=batch_size, with_payload=True
        ):
            yield stored_point(r, self.config)

    def scan_points(
        self,
        book_id: str | None = None,
        limit: int | None = None,
        vectors: Sequence[str] = (),
        payload_keys: Sequence[str] = (
            "book_id",
            "doc_id",
            "chapter_index",
            "_node_id",
            "title",
            "author",
            "segmenter",
        ),
    ) -> Iterator[ScannedPoint]:
        """Points (of one book) with the named vectors and a few payload keys: what an
        integrity check reads, without decoding whole nodes."""
        if self._shard is None:
            return
        flt = None
        if book_id is not None:
            flt = qe.Filter(must=[qe.FieldCondition(key="book_id", match=qe.MatchValue(book_id))])
        for r in self._scroll(
            flt,
            limit=limit,
            with_vector=list(vectors) if vectors else False,
            page=256,
            with_payload=qe.PayloadSelector.Include(list(payload_keys)),
        ):
            yield scanned_point(r)

    def _scroll(
        self,
        flt: qe.Filter | None,
        *,
        limit: int | None,
        with_vector: bool | list[str],
        page: int,
        with_payload: bool | qe.PayloadSelector,
    ) -> Iterator[qe.Record]:
        shard = self._shard
        assert shard is not None
        return paged(
            lambda offset, n: shard.scroll(
                qe.ScrollRequest(
                    offset=offset,
                    limit=n,
                    filter=flt,
                    with_payload=with_payload,
                    with_vector=with_vector,
                )
            ),
            page,
            limit,
        )

    # ----------------------------------------------------------------------------- queries
    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """DEFAULT (dense), SPARSE (or TEXT_SEARCH) and HYBRID queries, with metadata filters.

        kwargs: ``search_params={"hnsw_ef": int, "exact": bool}`` overrides the dense search;
        ``sparse_window_weight`` overrides the store's for this query.
        """
        if self._shard is None:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        return self._search().run(query, kwargs)

    def query_hits(
        self, query: VectorStoreQuery, keys: Sequence[str] = (), **kwargs: Any
    ) -> list[Hit]:
        """``query``'s answer as point ids, scores and the payload ``keys``, decoding no node:
        the same order and scores as ``query`` (``nodes_at`` decodes the ones a caller keeps).
        Why: decoding a node (JSON, then pydantic) costs more than finding it, and a ranking
        through children keeps a handful of the forty it fuses."""
        if self._shard is None:
            return []
        return self._search().hits(query, kwargs, list(keys))

    def _search(self) -> EdgeSearch:
        """The open shard with this store's query settings as they are now."""
        assert self._shard is not None
        return EdgeSearch(
            shard=self._shard,
            config=self.config,
            sparse_query_fn=self._sparse_query_fn,
            fuse=self._fusion_fn or relative_score_fusion,
            hnsw_ef=self.hnsw_ef,
            idf_scope=self.sparse_idf_scope,
            window_weight=self.sparse_window_weight,
            window_pool=self.sparse_window_pool,
            own_fusion=self._fusion_fn is None,
            idf_cache=self._idf_cache,
        )


def _ids_and_filters(
    node_ids: list[str] | None, filters: MetadataFilters | None
) -> qe.Filter | None:
    """Node ids AND metadata filters as one Edge filter (None: neither)."""
    must: list[Any] = []
    if node_ids is not None:
        must.append(qe.HasIdCondition({node_id_to_point_id(n) for n in node_ids}))
    if filters is not None and filters.filters:
        must.append(metadata_filters_to_edge(filters))
    return qe.Filter(must=must) if must else None
