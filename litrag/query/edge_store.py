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

The config and owner files are ``edge_schema``'s, filter translation is ``edge_filters``'s and
hybrid fusion is ``fusion``'s. The module stays over 500 lines because the store class (about 430)
is one LlamaIndex ``VectorStore`` whose open, write, read and query paths share one shard.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import qdrant_edge as qe
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from litrag.query.edge_filters import match_any, metadata_filters_to_edge
from litrag.query.edge_schema import (
    CONFIG_FILE,
    DOC_ID_KEY,
    PAYLOAD_SCHEMA,
    SHARD_DIR,
    EdgeStoreConfig,
    config_mismatch,
    edge_config,
    is_lock_error,
    read_config,
    read_owner,
    remove_owner,
    shard_config_path,
    shard_dense_dim,
    write_config,
    write_owner,
)
from litrag.query.fusion import reciprocal_rank_fusion, relative_score_fusion
from litrag.query.window_bm25 import DEFAULT_POOL, WindowKind, rescore

logger = logging.getLogger(__name__)

BatchSparseEncoding = tuple[list[list[int]], list[list[float]]]
# Same shape as llama-index-vector-stores-qdrant's SparseEncoderCallable.
SparseEncoderCallable = Callable[[list[str]], BatchSparseEncoding]
# texts -> per text, the vectors of its sentence windows (embeddings.SentenceWindowEncoder).
WindowEncoderCallable = Callable[[list[str]], list[Sequence[Sequence[float]]]]
WINDOW_VECTOR_NAME = "text-windows"
# (dense_result, sparse_result, *, alpha, top_k) -> fused result, as in QdrantVectorStore.
HybridFusionCallable = Callable[..., VectorStoreQueryResult]

NODE_ID_KEY = "_node_id"  # the original node id, kept flat beside the point's UUID
# What metadata_dict_to_node reads: fetching only these halves query-side payload decoding.
_NODE_KEYS = ["_node_content", "_node_type"]
_ID_NAMESPACE = uuid.UUID("6f1c9a52-3d0e-4b8a-9c55-0b7e1d2f4a10")  # for non-UUID node ids


class StoreLockedError(RuntimeError):
    """Another process (or another store object in this one) holds the shard folder.

    Edge takes an exclusive lock on a shard's WAL: one opener at a time. Concurrent writers need a
    Qdrant server (``QDRANT_URL``).
    """

    def __init__(self, folder: Path, holder: str | None = None) -> None:
        self.folder = folder
        self.holder = holder
        who = f"held by {holder}" if holder else "held by another process"
        super().__init__(
            f"Qdrant Edge store {folder} is {who}: one process may open an embedded store at a "
            "time; close it or go through that process, or use a Qdrant server for concurrent "
            "writers (set QDRANT_URL)."
        )


class StoreConfigError(ValueError):
    """``litrag_store.json`` is missing, damaged or disagrees with the shard it describes.

    Why not recreate it with defaults: a default config has no window vector name, so dense
    search would silently use the per-block vectors and cite other passages.
    """

    def __init__(self, folder: Path, problem: str) -> None:
        self.folder = folder
        super().__init__(f"{problem}: run `litrag verify --repair` (rebuilds it from the shard)")


@dataclass
class ScannedPoint:
    """One point as a scan sees it: id, (selected) payload and (selected) vectors."""

    id: Any
    payload: dict[str, Any]
    vectors: dict[str, Any]


@dataclass
class StoredPoint:
    """One point as stored: what an export to a Qdrant server needs."""

    id: str
    dense: list[float] | None
    sparse: tuple[list[int], list[float]] | None
    payload: dict[str, Any]


def _node_payload() -> Any:
    return qe.PayloadSelector.Include(_NODE_KEYS)


def node_id_to_point_id(node_id: str) -> uuid.UUID:
    """Edge ids are UUIDs (or ints): a UUID-shaped node id is used as is, others map by uuid5."""
    try:
        return uuid.UUID(node_id)
    except (ValueError, TypeError, AttributeError):
        return uuid.uuid5(_ID_NAMESPACE, str(node_id))


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
    hybrid_fusion: Literal["relative_score", "rrf"] = Field(
        default="relative_score",
        description="Hybrid fusion: LlamaIndex's relative-score fusion, or reciprocal-rank fusion.",
    )
    rrf_k: int = Field(default=60, description="k of reciprocal-rank fusion.")
    sparse_idf_scope: Literal["collection", "filter"] = Field(
        default="collection",
        description=(
            "IDF statistics over the whole collection (as a Qdrant server), or over the points the "
            "query's filter selects (per-book BM25 when filtering by book)."
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
    sparse_window_kind: WindowKind = Field(
        default="sentences",
        description=(
            "What a candidate's best piece is: a 3-sentence window, or a paragraph child (the "
            "paragraph chunker's <= 200-word pieces of the block). A query may override it "
            "(kwargs sparse_window_kind)."
        ),
    )
    sparse_window_pool: int = Field(
        default=DEFAULT_POOL,
        ge=1,
        description="BM25 candidates re-scored by their windows when the window weight is > 0.",
    )

    _shard: Any = PrivateAttr(default=None)
    _sparse_doc_fn: SparseEncoderCallable | None = PrivateAttr(default=None)
    _sparse_query_fn: SparseEncoderCallable | None = PrivateAttr(default=None)
    _fusion_fn: HybridFusionCallable | None = PrivateAttr(default=None)
    _window_doc_fn: WindowEncoderCallable | None = PrivateAttr(default=None)

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
        **kwargs: Any,
    ) -> None:
        folder = Path(path) / collection_name
        try:
            saved = read_config(folder)
        except ValueError:
            raise StoreConfigError(
                folder, f"the store config {folder / CONFIG_FILE} is damaged"
            ) from None
        if saved is None and shard_config_path(folder).exists():
            raise StoreConfigError(folder, f"the store config {folder / CONFIG_FILE} is missing")
        wrong = config_mismatch(folder, saved) if saved is not None else None
        if wrong:
            raise StoreConfigError(folder, f"{folder}: {wrong}")
        if saved is not None:
            if config is not None and config.model_dump(exclude={"dense_dim"}) != saved.model_dump(
                exclude={"dense_dim"}
            ):
                raise ValueError(f"{folder}: config differs from the one saved in {CONFIG_FILE}")
            if dense_dim is not None and saved.dense_dim not in (None, dense_dim):
                raise ValueError(f"{folder}: dense_dim {dense_dim} != saved {saved.dense_dim}")
            cfg = saved
        else:
            cfg = config.model_copy() if config is not None else EdgeStoreConfig()
            if window_doc_fn is not None and cfg.window_vector_name is None:
                cfg.window_vector_name = WINDOW_VECTOR_NAME
        if cfg.dense_dim is None and dense_dim is not None:
            cfg.dense_dim = dense_dim
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
    def client(self) -> Any:
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
        """Load or create the shard, translating Edge's lock failure into ``StoreLockedError``."""
        self.folder.mkdir(parents=True, exist_ok=True)
        existing = self._shard_dir.joinpath("edge_config.json").exists()
        try:
            if existing:
                shard = qe.EdgeShard.load(str(self._shard_dir))
            else:
                shard = qe.EdgeShard.create(str(self._shard_dir), edge_config(self.config))
        except Exception as e:
            if is_lock_error(e):
                raise StoreLockedError(self.folder, read_owner(self.folder)) from e
            raise
        self._shard = shard
        write_owner(self.folder)
        if self.config.dense_dim is None:  # reopened without our JSON: take it from the shard
            self.config.dense_dim = shard_dense_dim(shard, self.config.dense_vector_name)
        write_config(self.folder, self.config)
        have = set(shard.info().payload_schema)
        for field, kind in self.config.payload_indexes.items():
            if field not in have:
                shard.update(qe.UpdateOperation.create_field_index(field, PAYLOAD_SCHEMA[kind]))

    def close(self) -> None:
        """Flush and release the shard (and its lock). Safe to call twice."""
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

    def persist(self, persist_path: str, fs: Any = None) -> None:
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
        dim = self.config.dense_dim
        windowed = self.config.window_vector_name
        if windowed and self._window_doc_fn is None:
            raise ValueError(
                f"{self.folder} keeps sentence-window vectors: pass window_doc_fn (e.g. "
                "litrag.embeddings.SentenceWindowEncoder) to add nodes"
            )
        ids: list[str] = []
        for start in range(0, len(nodes), self.batch_size):
            batch = nodes[start : start + self.batch_size]
            sparse: BatchSparseEncoding | None = None
            if self._sparse_doc_fn is not None:
                sparse = self._sparse_doc_fn(
                    [n.get_content(metadata_mode=MetadataMode.EMBED) for n in batch]
                )
            windows = None
            if windowed:
                assert self._window_doc_fn is not None  # checked above
                windows = self._window_doc_fn(
                    [n.get_content(metadata_mode=MetadataMode.NONE) for n in batch]
                )
            points = []
            for i, node in enumerate(batch):
                emb = node.get_embedding()
                if len(emb) != dim:
                    raise ValueError(f"node {node.node_id}: embedding size {len(emb)} != {dim}")
                vector: dict[str, Any] = {self.config.dense_vector_name: _floats(emb)}
                if sparse is not None:
                    vector[self.config.sparse_vector_name] = _sparse(sparse[0][i], sparse[1][i])
                if windowed and windows is not None:
                    if not windows[i] or any(len(w) != dim for w in windows[i]):
                        raise ValueError(f"node {node.node_id}: window vectors must be {dim}-d")
                    vector[windowed] = [_floats(w) for w in windows[i]]
                payload = node_to_metadata_dict(
                    node, remove_text=False, flat_metadata=self.flat_metadata
                )
                payload[NODE_ID_KEY] = node.node_id
                points.append(
                    qe.Point(id=node_id_to_point_id(node.node_id), vector=vector, payload=payload)
                )
                ids.append(node.node_id)
            self._shard.update(qe.UpdateOperation.upsert_points(points))
        return ids

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of one source document (payload ``doc_id``)."""
        if self._shard is None:
            return
        cond = qe.FieldCondition(key=DOC_ID_KEY, match=qe.MatchValue(ref_doc_id))
        self._shard.update(qe.UpdateOperation.delete_points_by_filter(qe.Filter(must=[cond])))

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete nodes matching ids AND filters; with neither, every node (as LlamaIndex does)."""
        if self._shard is None or node_ids == []:
            return
        flt = self._ids_and_filters(node_ids, filters)
        self._shard.update(qe.UpdateOperation.delete_points_by_filter(flt or qe.Filter()))

    def clear(self) -> None:
        """Drop every point: the shard folder is deleted and made again (config is kept)."""
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
        """Nodes by id (in the order asked) and/or filter, with their dense embeddings."""
        if self._shard is None or node_ids == []:
            return []
        dense = self.config.dense_vector_name
        if node_ids is not None and filters is None:
            pids = [node_id_to_point_id(n) for n in node_ids]
            recs = self._shard.retrieve(pids, with_payload=_node_payload(), with_vector=[dense])
            by_id = {r.id: r for r in recs}
            out = [_record_to_node(by_id[p], dense) for p in dict.fromkeys(pids) if p in by_id]
            return out[:limit] if limit is not None else out
        flt = self._ids_and_filters(node_ids, filters)
        recs = self._scroll(
            flt, limit=limit, with_vector=[dense], page=1024, with_payload=_node_payload()
        )
        return [_record_to_node(r, dense) for r in recs]

    def iter_points(self, batch_size: int = 512) -> Iterator[StoredPoint]:
        """Every point with its vectors and payload, in id order: the input of an export."""
        if self._shard is None:
            return
        for r in self._scroll(
            None, limit=None, with_vector=True, page=batch_size, with_payload=True
        ):
            vec = r.vector or {}
            sp = vec.get(self.config.sparse_vector_name)
            yield StoredPoint(
                id=str(r.id),
                dense=vec.get(self.config.dense_vector_name),
                sparse=(list(sp.indices), list(sp.values)) if sp is not None else None,
                payload=r.payload or {},
            )

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
            yield ScannedPoint(
                r.id, r.payload or {}, r.vector if isinstance(r.vector, dict) else {}
            )

    def _scroll(
        self, flt: Any, *, limit: int | None, with_vector: Any, page: int, with_payload: Any
    ) -> Iterator[Any]:
        offset = None
        seen = 0
        while True:
            n = page if limit is None else min(page, limit - seen)
            if n <= 0:
                return
            recs, offset = self._shard.scroll(
                qe.ScrollRequest(
                    offset=offset,
                    limit=n,
                    filter=flt,
                    with_payload=with_payload,
                    with_vector=with_vector,
                )
            )
            yield from recs
            seen += len(recs)
            if offset is None or not recs:
                return

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """DEFAULT (dense), SPARSE (or TEXT_SEARCH) and HYBRID queries, with metadata filters.

        kwargs: ``search_params={"hnsw_ef": int, "exact": bool}`` overrides the dense search.
        """
        if self._shard is None:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        flt = self._query_filter(query)
        mode = query.mode
        if mode == VectorStoreQueryMode.DEFAULT:
            return self._parse(self._shard.query(self._dense_request(query, flt, kwargs)))
        weight = float(kwargs.get("sparse_window_weight", self.sparse_window_weight))
        kind = kwargs.get("sparse_window_kind", self.sparse_window_kind)
        if mode in (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH):
            req = self._sparse_request(query, flt, weight)
            return self._parse(*self._windowed(query, flt, weight, self._shard.query(req), kind))
        if mode == VectorStoreQueryMode.HYBRID:
            dense_req = self._dense_request(query, flt, kwargs)
            sparse_req = self._sparse_request(query, flt, weight)
            dense_pts, sparse_pts = self._shard.query_batch(
                qe.QueryBatchRequest([dense_req, sparse_req])
            )
            alpha = query.alpha if query.alpha is not None else 0.5
            top_k = query.hybrid_top_k or query.similarity_top_k
            seen: dict[Any, BaseNode] = {}  # a point in both lists is decoded once
            dense_res = self._parse(dense_pts, seen=seen)
            windowed = self._windowed(query, flt, weight, sparse_pts, kind)
            sparse_res = self._parse(*windowed, seen=seen)
            if self._fusion_fn is not None:
                return self._fusion_fn(dense_res, sparse_res, alpha=alpha, top_k=top_k)
            if self.hybrid_fusion == "rrf":
                return reciprocal_rank_fusion(
                    dense_res, sparse_res, alpha=alpha, top_k=top_k, k=self.rrf_k
                )
            return relative_score_fusion(dense_res, sparse_res, alpha=alpha, top_k=top_k)
        raise NotImplementedError(f"query mode {mode.value!r} is not supported by this store")

    def _dense_request(self, query: VectorStoreQuery, flt: Any, kwargs: dict[str, Any]) -> Any:
        if query.query_embedding is None:
            raise ValueError("dense and hybrid queries need query.query_embedding")
        sp = kwargs.get("search_params") or {}
        params = qe.SearchParams(
            hnsw_ef=int(sp.get("hnsw_ef", self.hnsw_ef)), exact=bool(sp.get("exact", False))
        )
        # A query vector against the window multivector scores each node by its best window.
        using = self.config.window_vector_name or self.config.dense_vector_name
        return qe.QueryRequest(
            limit=query.similarity_top_k,
            query=qe.Query.Nearest(_floats(query.query_embedding), using=using),
            filter=flt,
            with_payload=_node_payload(),
            params=params,
        )

    def _windowed(
        self,
        query: VectorStoreQuery,
        flt: Any,
        weight: float,
        points: Sequence[Any],
        kind: WindowKind = "sentences",
    ) -> tuple[list[Any], list[float] | None]:
        """The sparse candidates re-scored by their best sentence window and cut to the asked
        length, with their new scores (see window_bm25); as they came when the weight is 0.
        Only the text is read from the pool's payloads: whole nodes are decoded for the kept."""
        if weight <= 0 or not points:
            return list(points), None
        limit = query.sparse_top_k or query.similarity_top_k
        idf = self._query_idf(query, flt)
        texts = [json.loads(p.payload["_node_content"]).get("text", "") for p in points]
        ranked = rescore(texts, [float(p.score) for p in points], idf, weight, kind=kind)[:limit]
        return [points[i] for i, _ in ranked], [score for _, score in ranked]

    def _query_idf(self, query: VectorStoreQuery, flt: Any) -> dict[int, float]:
        """The engine's IDF of each query term, under the query's IDF scope: one single-term
        query per term (limit 1, in one batch); its top point's score over its stored BM25
        weight for the term is the term's IDF. Terms no point holds are left out."""
        assert self._sparse_query_fn is not None and query.query_str
        ids = [int(i) for i in self._sparse_query_fn([query.query_str])[0][0]]
        if not ids:
            return {}
        name = self.config.sparse_vector_name
        params = None
        if self.sparse_idf_scope == "filter" and flt is not None:
            params = qe.SearchParams(idf=qe.IdfParams(corpus=flt))
        reqs = [
            qe.QueryRequest(
                limit=1,
                query=qe.Query.Nearest(qe.SparseVector([t], [1.0]), using=name),
                filter=flt,
                with_vector=[name],
                params=params,
            )
            for t in ids
        ]
        idf: dict[int, float] = {}
        for term, points in zip(
            ids, self._shard.query_batch(qe.QueryBatchRequest(reqs)), strict=True
        ):
            if not points:
                continue
            vec = (points[0].vector or {}).get(name)
            weights = dict(zip(vec.indices, vec.values, strict=True)) if vec is not None else {}
            if weights.get(term):
                idf[term] = float(points[0].score) / float(weights[term])
        return idf

    def _sparse_request(self, query: VectorStoreQuery, flt: Any, window_weight: float = 0.0) -> Any:
        if self._sparse_query_fn is None:
            raise ValueError(
                "sparse and hybrid queries need sparse_query_fn (pass it to the store or call "
                "set_query_functions)"
            )
        if not query.query_str:
            raise ValueError("sparse and hybrid queries need query.query_str")
        indices, values = self._sparse_query_fn([query.query_str])
        vec = _sparse(indices[0], values[0])
        params = None
        if self.sparse_idf_scope == "filter" and flt is not None:
            params = qe.SearchParams(idf=qe.IdfParams(corpus=flt))
        limit = query.sparse_top_k or query.similarity_top_k
        if window_weight > 0:  # a wider pool, re-scored by windows and cut back in _windowed
            limit = max(limit, self.sparse_window_pool)
        return qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vec, using=self.config.sparse_vector_name),
            filter=flt,
            with_payload=_node_payload(),
            params=params,
        )

    def _query_filter(self, query: VectorStoreQuery) -> Any:
        must: list[Any] = []
        if query.doc_ids:
            must.append(qe.FieldCondition(key=DOC_ID_KEY, match=match_any(query.doc_ids)))
        if query.node_ids:
            must.append(qe.HasIdCondition({node_id_to_point_id(n) for n in query.node_ids}))
        if query.filters is not None and query.filters.filters:
            must.append(metadata_filters_to_edge(query.filters))
        return qe.Filter(must=must) if must else None

    def _ids_and_filters(self, node_ids: list[str] | None, filters: MetadataFilters | None) -> Any:
        must: list[Any] = []
        if node_ids is not None:
            must.append(qe.HasIdCondition({node_id_to_point_id(n) for n in node_ids}))
        if filters is not None and filters.filters:
            must.append(metadata_filters_to_edge(filters))
        return qe.Filter(must=must) if must else None

    def _parse(
        self,
        points: Iterable[Any],
        scores: Sequence[float] | None = None,
        seen: dict[Any, BaseNode] | None = None,
    ) -> VectorStoreQueryResult:
        """Nodes, scores (the points' own unless given) and ids of ``points``."""
        nodes, sims, ids = [], [], []
        seen = {} if seen is None else seen
        for k, p in enumerate(points):
            node = seen.get(p.id)
            if node is None:
                node = seen[p.id] = metadata_dict_to_node(p.payload)
            nodes.append(node)
            sims.append(float(p.score) if scores is None else scores[k])
            ids.append(node.node_id)
        return VectorStoreQueryResult(nodes=nodes, similarities=sims, ids=ids)


# --------------------------------------------------------------------------------- BM25
def edge_bm25_encoders(
    config: Any = None,
) -> tuple[SparseEncoderCallable, SparseEncoderCallable]:
    """``(sparse_doc_fn, sparse_query_fn)`` from Edge's offline ``Bm25`` (pair it with IDF).

    Documents get BM25 term-frequency weights, queries weight 1 per unique term; the engine's IDF
    modifier completes BM25. Works for both backends (qdrant-client takes the same callables).
    """
    model = qe.Bm25(config)

    def encode(embed: Callable[[str], Any], texts: list[str]) -> BatchSparseEncoding:
        idx, vals = [], []
        for t in texts:
            v = embed(t)
            idx.append(v.indices)
            vals.append(v.values)
        return idx, vals

    def docs(texts: list[str]) -> BatchSparseEncoding:
        return encode(model.embed_document, texts)

    def queries(texts: list[str]) -> BatchSparseEncoding:
        return encode(model.embed_query, texts)

    return docs, queries


# --------------------------------------------------------------------------------- helpers
def _floats(v: Any) -> list[float]:
    if isinstance(v, list):
        return v
    return v.tolist() if hasattr(v, "tolist") else [float(x) for x in v]


def _sparse(indices: Any, values: Any) -> Any:
    """A ``qe.SparseVector`` from lists (fast path) or arrays / other sequences."""
    if not isinstance(indices, list):
        indices = indices.tolist() if hasattr(indices, "tolist") else [int(x) for x in indices]
    if not isinstance(values, list):
        values = values.tolist() if hasattr(values, "tolist") else [float(x) for x in values]
    return qe.SparseVector(indices, values)


def _record_to_node(rec: Any, dense_name: str) -> BaseNode:
    node = metadata_dict_to_node(rec.payload)
    vec = rec.vector
    if isinstance(vec, dict) and vec.get(dense_name) is not None:
        node.embedding = list(vec[dense_name])
    return node
