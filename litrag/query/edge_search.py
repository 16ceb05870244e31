"""Queries on a Qdrant Edge shard: dense, sparse (BM25) and hybrid, as LlamaIndex asks them.

Dense search scores a node by its best sentence window (MaxSim over the window multivector)
when the collection keeps window vectors, else by its one vector. Sparse search is the engine's
BM25 (its IDF over the collection, or over the points the query's filter selects); with a window
weight above 0 a wider pool of candidates is re-scored by their best window (``window_bm25``),
with the engine's own IDF of each query term read back. Hybrid runs both in one batch and fuses
them (``fusion``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import qdrant_edge as qe
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)

from litrag.query.edge_filters import match_any, metadata_filters_to_edge
from litrag.query.edge_points import (
    SENTENCE_TERMS_KEY,
    PointId,
    SparseEncoderCallable,
    floats,
    node_id_to_point_id,
    node_payload,
    points_to_result,
    sparse_vector,
)
from litrag.query.edge_schema import DOC_ID_KEY, EdgeStoreConfig
from litrag.query.window_bm25 import WindowKind, rescore

# (dense_result, sparse_result, *, alpha, top_k) -> fused result, as in QdrantVectorStore.
HybridFusionCallable = Callable[..., VectorStoreQueryResult]


def query_filter(query: VectorStoreQuery) -> qe.Filter | None:
    """The query's doc ids, node ids and metadata filters as one Edge filter (None: none)."""
    must: list[Any] = []
    if query.doc_ids:
        must.append(qe.FieldCondition(key=DOC_ID_KEY, match=match_any(query.doc_ids)))
    if query.node_ids:
        must.append(qe.HasIdCondition({node_id_to_point_id(n) for n in query.node_ids}))
    if query.filters is not None and query.filters.filters:
        must.append(metadata_filters_to_edge(query.filters))
    return qe.Filter(must=must) if must else None


@dataclass(frozen=True)
class EdgeSearch:
    """One open shard with the store's query settings (see ``QdrantEdgeVectorStore``'s fields)."""

    shard: qe.EdgeShard
    config: EdgeStoreConfig
    sparse_query_fn: SparseEncoderCallable | None
    fuse: HybridFusionCallable
    hnsw_ef: int
    idf_scope: Literal["collection", "filter"]
    window_weight: float
    window_kind: WindowKind
    window_pool: int

    def run(self, query: VectorStoreQuery, kwargs: Mapping[str, Any]) -> VectorStoreQueryResult:
        """DEFAULT (dense), SPARSE (or TEXT_SEARCH) and HYBRID queries, with metadata filters.

        kwargs: ``search_params={"hnsw_ef": int, "exact": bool}`` overrides the dense search;
        ``sparse_window_weight`` and ``sparse_window_kind`` the store's window settings.
        """
        flt = query_filter(query)
        mode = query.mode
        if mode == VectorStoreQueryMode.DEFAULT:
            return points_to_result(self.shard.query(self.dense_request(query, flt, kwargs)))
        weight = float(kwargs.get("sparse_window_weight", self.window_weight))
        kind = kwargs.get("sparse_window_kind", self.window_kind)
        if mode in (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH):
            req = self.sparse_request(query, flt, weight)
            return points_to_result(*self.windowed(query, flt, weight, self.shard.query(req), kind))
        if mode == VectorStoreQueryMode.HYBRID:
            dense_req = self.dense_request(query, flt, kwargs)
            sparse_req = self.sparse_request(query, flt, weight)
            dense_pts, sparse_pts = self.shard.query_batch(
                qe.QueryBatchRequest([dense_req, sparse_req])
            )
            alpha = query.alpha if query.alpha is not None else 0.5
            top_k = query.hybrid_top_k or query.similarity_top_k
            seen: dict[PointId, BaseNode] = {}  # a point in both lists is decoded once
            dense_res = points_to_result(dense_pts, seen=seen)
            windowed = self.windowed(query, flt, weight, sparse_pts, kind)
            sparse_res = points_to_result(*windowed, seen=seen)
            return self.fuse(dense_res, sparse_res, alpha=alpha, top_k=top_k)
        raise NotImplementedError(f"query mode {mode.value!r} is not supported by this store")

    def dense_request(
        self, query: VectorStoreQuery, flt: qe.Filter | None, kwargs: Mapping[str, Any]
    ) -> qe.QueryRequest:
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
            query=qe.Query.Nearest(floats(query.query_embedding), using=using),
            filter=flt,
            with_payload=node_payload(),
            params=params,
        )

    def sparse_request(
        self, query: VectorStoreQuery, flt: qe.Filter | None, window_weight: float = 0.0
    ) -> qe.QueryRequest:
        if self.sparse_query_fn is None:
            raise ValueError(
                "sparse and hybrid queries need sparse_query_fn (pass it to the store or call "
                "set_query_functions)"
            )
        if not query.query_str:
            raise ValueError("sparse and hybrid queries need query.query_str")
        indices, values = self.sparse_query_fn([query.query_str])
        vec = sparse_vector(indices[0], values[0])
        limit = query.sparse_top_k or query.similarity_top_k
        if window_weight > 0:  # a wider pool, re-scored by windows and cut back in windowed()
            limit = max(limit, self.window_pool)
        return qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vec, using=self.config.sparse_vector_name),
            filter=flt,
            with_payload=node_payload(sentence_terms=window_weight > 0),
            params=self._idf_params(flt),
        )

    def windowed(
        self,
        query: VectorStoreQuery,
        flt: qe.Filter | None,
        weight: float,
        points: Sequence[qe.ScoredPoint],
        kind: WindowKind = "sentences",
    ) -> tuple[list[qe.ScoredPoint], list[float] | None]:
        """The sparse candidates re-scored by their best sentence window and cut to the asked
        length, with their new scores (see window_bm25); as they came when the weight is 0.
        Only the text (or the sentences' term ids, where the point keeps them) is read from the
        pool's payloads: whole nodes are decoded for the kept."""
        if weight <= 0 or not points:
            return list(points), None
        limit = query.sparse_top_k or query.similarity_top_k
        idf = self.query_idf(query, flt)
        stored = [p.payload.get(SENTENCE_TERMS_KEY) for p in points]
        texts = [
            "" if kept is not None and kind == "sentences" else _text(p)
            for p, kept in zip(points, stored, strict=True)
        ]
        scores = [float(p.score) for p in points]
        ranked = rescore(texts, scores, idf, weight, kind=kind, stored=stored)[:limit]
        return [points[i] for i, _ in ranked], [score for _, score in ranked]

    def query_idf(self, query: VectorStoreQuery, flt: qe.Filter | None) -> dict[int, float]:
        """The engine's IDF of each query term, under the query's IDF scope: one single-term
        query per term (limit 1, in one batch); its top point's score over its stored BM25
        weight for the term is the term's IDF. Terms no point holds are left out."""
        assert self.sparse_query_fn is not None and query.query_str
        ids = [int(i) for i in self.sparse_query_fn([query.query_str])[0][0]]
        if not ids:
            return {}
        name = self.config.sparse_vector_name
        params = self._idf_params(flt)
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
            ids, self.shard.query_batch(qe.QueryBatchRequest(reqs)), strict=True
        ):
            if not points:
                continue
            vec = (points[0].vector or {}).get(name)
            weights = dict(zip(vec.indices, vec.values, strict=True)) if vec is not None else {}
            if weights.get(term):
                idf[term] = float(points[0].score) / float(weights[term])
        return idf

    def _idf_params(self, flt: qe.Filter | None) -> qe.SearchParams | None:
        """IDF over the filter's points under the "filter" scope; the engine's default else."""
        if self.idf_scope == "filter" and flt is not None:
            return qe.SearchParams(idf=qe.IdfParams(corpus=flt))
        return None


def _text(point: qe.ScoredPoint) -> str:
    return json.loads(point.payload["_node_content"]).get("text", "")
