"""Queries on a Qdrant Edge shard: dense, sparse (BM25) and hybrid, as LlamaIndex asks them.

Dense search scores a node by its best sentence window (MaxSim over the window multivector)
when the collection keeps window vectors, else by its one vector. Sparse search is the engine's
BM25 (its IDF over the collection, or over the points the query's filter selects); with a window
weight above 0 a wider pool of candidates is re-scored by their best window (``window_bm25``),
with the engine's own IDF of each query term read back. Hybrid runs both in one batch and fuses
them (``fusion``).

Cost (``benchmarks/bench_retrieval_scale.py``): a point's payload costs per point read, and a
node's decoding (JSON, then pydantic) more, so the BM25 pool is read with its kept sentence
term ids only and a node is decoded only for what a query returns; ``hits`` returns ids, scores
and a few payload keys, and decodes nothing. The IDF read back per term is kept per filter until
the store is next written (``IdfCache``), so a reader's next question about a book skips it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import qdrant_edge as qe
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from litrag.scoring.fusion import fuse_ranked
from litrag.scoring.window_bm25 import rescore
from litrag.stores.edge_filters import match_any, metadata_filters_to_edge
from litrag.stores.edge_points import (
    KEPT_TERM_KEYS,
    NODE_KEYS,
    SENTENCE_PACKED_KEY,
    SENTENCE_TERMS_KEY,
    Hit,
    PointId,
    SparseEncoderCallable,
    floats,
    hits_to_result,
    node_id_to_point_id,
    node_payload,
    points_to_result,
    sparse_vector,
)
from litrag.stores.edge_schema import DOC_ID_KEY, EdgeStoreConfig

# (dense_result, sparse_result, *, alpha, top_k) -> fused result, as in QdrantVectorStore.
HybridFusionCallable = Callable[..., VectorStoreQueryResult]
# (IDF scope, the query's filter) -> {term id: the engine's IDF, None where no point holds it}.
IdfCache = dict[Hashable, dict[int, float | None]]
IDF_CACHE_FILTERS = 4096  # filters remembered before the cache starts again

_SPARSE_MODES = (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH)


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


def filter_key(query: VectorStoreQuery) -> Hashable:
    """What ``query_filter`` builds from, as a dictionary key."""
    flt = query.filters.model_dump_json() if query.filters is not None else None
    return (tuple(query.doc_ids or ()), tuple(query.node_ids or ()), flt)


@dataclass(frozen=True)
class EdgeSearch:
    """One open shard with the store's query settings (see ``QdrantEdgeVectorStore``'s fields).
    ``own_fusion``: ``fuse`` is the built-in relative-score fusion (ids are then fused before
    any node is decoded); False for a caller's own function."""

    shard: qe.EdgeShard
    config: EdgeStoreConfig
    sparse_query_fn: SparseEncoderCallable | None
    fuse: HybridFusionCallable
    hnsw_ef: int
    idf_scope: Literal["collection", "filter"]
    window_weight: float
    window_pool: int
    own_fusion: bool = True
    idf_cache: IdfCache | None = None

    def run(self, query: VectorStoreQuery, kwargs: Mapping[str, Any]) -> VectorStoreQueryResult:
        """DEFAULT (dense), SPARSE (or TEXT_SEARCH) and HYBRID queries, with metadata filters.

        kwargs: ``search_params={"hnsw_ef": int, "exact": bool}`` overrides the dense search;
        ``sparse_window_weight`` the store's window weight.
        """
        if query.mode == VectorStoreQueryMode.DEFAULT:
            req = self.dense_request(query, query_filter(query), kwargs)
            return points_to_result(self.shard.query(req))
        dense, sparse = self.lists(query, kwargs, NODE_KEYS, light_pool=True)
        nodes: dict[PointId, BaseNode] = {}  # a point in both lists is decoded once
        self.decode(dense or [], nodes)
        self.decode(sparse or [], nodes)
        sparse_res = hits_to_result(sparse or [], nodes)
        if dense is None:
            return sparse_res
        alpha, top_k = _alpha(query), query.hybrid_top_k or query.similarity_top_k
        return self.fuse(hits_to_result(dense, nodes), sparse_res, alpha=alpha, top_k=top_k)

    def hits(
        self, query: VectorStoreQuery, kwargs: Mapping[str, Any], keys: Sequence[str]
    ) -> list[Hit]:
        """What ``run`` returns, as point ids, scores (the same) and the payload ``keys``,
        without decoding a node."""
        if not self.own_fusion and query.mode == VectorStoreQueryMode.HYBRID:
            res = self.run(query, kwargs)  # a caller's fusion takes results with nodes
            return [
                Hit(
                    node_id_to_point_id(n.node_id),
                    s,
                    {k: n.metadata[k] for k in keys if k in n.metadata},
                )
                for n, s in zip(res.nodes or [], res.similarities or [], strict=True)
            ]
        dense, sparse = self.lists(query, kwargs, keys)
        if dense is None or sparse is None:
            return (dense if sparse is None else sparse) or []
        by_id = {h.id: h for h in sparse} | {h.id: h for h in dense}
        fused = fuse_ranked(
            [(h.id, h.score) for h in dense],
            [(h.id, h.score) for h in sparse],
            alpha=_alpha(query),
            top_k=query.hybrid_top_k or query.similarity_top_k,
        )
        return [Hit(pid, score, by_id[pid].payload) for pid, score in fused]

    def lists(
        self,
        query: VectorStoreQuery,
        kwargs: Mapping[str, Any],
        keys: Sequence[str],
        light_pool: bool = False,
    ) -> tuple[list[Hit] | None, list[Hit] | None]:
        """The dense and the (window re-scored) sparse list the query's mode asks for, with
        the payload ``keys``; with ``light_pool`` a pool that is re-scored is read without
        them (only what re-scoring needs: the caller reads ``keys`` for the few it keeps)."""
        flt = query_filter(query)
        mode = query.mode
        weight = float(kwargs.get("sparse_window_weight", self.window_weight))
        if mode == VectorStoreQueryMode.DEFAULT:
            return [
                Hit.of(p) for p in self.shard.query(self.dense_request(query, flt, kwargs, keys))
            ], None
        if mode not in _SPARSE_MODES and mode != VectorStoreQueryMode.HYBRID:
            raise NotImplementedError(f"query mode {mode.value!r} is not supported by this store")
        pool_keys = [] if light_pool and weight > 0 else list(keys)
        reqs = [self.sparse_request(query, flt, weight, pool_keys)]
        if mode == VectorStoreQueryMode.HYBRID:
            reqs.insert(0, self.dense_request(query, flt, kwargs, keys))
        # The IDF the windows need is read in the same batch (one call into the engine).
        ids, known, todo = self.idf_todo(query) if weight > 0 else ([], {}, [])
        found = self.shard.query_batch(qe.QueryBatchRequest(reqs + self.idf_requests(todo, flt)))
        known.update(self.idf_of(todo, found[len(reqs) :]))
        idf = {t: v for t in ids if (v := known[t]) is not None}
        sparse = self.windowed(query, weight, found[len(reqs) - 1], idf)
        if mode in _SPARSE_MODES:
            return None, sparse
        return [Hit.of(p) for p in found[0]], sparse

    def decode(self, hits: Sequence[Hit], nodes: dict[PointId, BaseNode]) -> None:
        """Each hit's node into ``nodes``: from its payload, else read by id (one call)."""
        need = []
        for h in hits:
            if h.id not in nodes:
                if "_node_content" in h.payload:
                    nodes[h.id] = metadata_dict_to_node(h.payload)
                else:
                    need.append(h.id)
        if need:
            for rec in self.shard.retrieve(need, with_payload=node_payload(), with_vector=False):
                nodes[rec.id] = metadata_dict_to_node(rec.payload)

    def dense_request(
        self,
        query: VectorStoreQuery,
        flt: qe.Filter | None,
        kwargs: Mapping[str, Any],
        keys: Sequence[str] = NODE_KEYS,
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
            with_payload=_selector(keys),
            params=params,
        )

    def sparse_request(
        self,
        query: VectorStoreQuery,
        flt: qe.Filter | None,
        window_weight: float = 0.0,
        keys: Sequence[str] = NODE_KEYS,
    ) -> qe.QueryRequest:
        """The BM25 query: top ``sparse_top_k``, or the pool the windows re-score, read with
        ``keys`` and what the re-scoring needs (the kept term ids)."""
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
        keys = list(keys)
        if window_weight > 0:  # a wider pool, re-scored by windows and cut back in windowed()
            limit = max(limit, self.window_pool)
            keys += KEPT_TERM_KEYS
        return qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vec, using=self.config.sparse_vector_name),
            filter=flt,
            with_payload=_selector(keys),
            params=self._idf_params(flt),
        )

    def windowed(
        self,
        query: VectorStoreQuery,
        weight: float,
        points: Sequence[qe.ScoredPoint],
        idf: Mapping[int, float],
    ) -> list[Hit]:
        """The sparse candidates re-scored by their best sentence window and cut to the asked
        length, with their new scores (see window_bm25); as they came when the weight is 0.
        Sentences are cut from the kept term ids where the point keeps them, else from its text
        (read for those only). ``idf``: the query terms' IDF (read in the query's batch)."""
        pool = [Hit.of(p) for p in points]
        if weight <= 0 or not pool:
            return pool
        limit = query.sparse_top_k or query.similarity_top_k
        kept: list[Any] = [
            h.payload.get(SENTENCE_PACKED_KEY, h.payload.get(SENTENCE_TERMS_KEY)) for h in pool
        ]
        texts = [""] * len(pool)
        unkept = [i for i, k in enumerate(kept) if k is None]
        texts_of = self._texts([pool[i] for i in unkept])
        for i in unkept:
            texts[i] = texts_of[pool[i].id]
        ranked = rescore(texts, [h.score for h in pool], idf, weight, stored=kept)
        return [Hit(pool[i].id, score, pool[i].payload) for i, score in ranked[:limit]]

    def _texts(self, hits: Sequence[Hit]) -> dict[PointId, str]:
        """Each hit's node text, from its payload or read by id."""
        out = {h.id: _text(h.payload) for h in hits if "_node_content" in h.payload}
        need = [h.id for h in hits if h.id not in out]
        if need:
            recs = self.shard.retrieve(need, with_payload=node_payload(), with_vector=False)
            out.update({r.id: _text(r.payload or {}) for r in recs})
        return out

    def query_idf(self, query: VectorStoreQuery, flt: qe.Filter | None) -> dict[int, float]:
        """The engine's IDF of each query term, under the query's IDF scope: one single-term
        query per term (limit 1, in one batch); its top point's score over its stored BM25
        weight for the term is the term's IDF. Terms no point holds are left out. Values are
        kept per filter in ``idf_cache`` (the store empties it when written)."""
        ids, known, todo = self.idf_todo(query)
        if todo:
            reqs = self.idf_requests(todo, flt)
            known.update(self.idf_of(todo, self.shard.query_batch(qe.QueryBatchRequest(reqs))))
        return {t: v for t in ids if (v := known[t]) is not None}

    def idf_todo(
        self, query: VectorStoreQuery
    ) -> tuple[list[int], dict[int, float | None], list[int]]:
        """The query's term ids, the IDF already known of them (the cache's own dict for this
        filter: updating it fills the cache) and the terms still to read."""
        assert self.sparse_query_fn is not None and query.query_str
        ids = [int(i) for i in self.sparse_query_fn([query.query_str])[0][0]]
        known: dict[int, float | None] = {}
        if ids and self.idf_cache is not None:
            if len(self.idf_cache) > IDF_CACHE_FILTERS:
                self.idf_cache.clear()
            known = self.idf_cache.setdefault((self.idf_scope, filter_key(query)), {})
        return ids, known, [t for t in dict.fromkeys(ids) if t not in known]

    def idf_requests(self, terms: Sequence[int], flt: qe.Filter | None) -> list[qe.QueryRequest]:
        """One single-term query per term (see ``query_idf``)."""
        name = self.config.sparse_vector_name
        params = self._idf_params(flt)
        return [
            qe.QueryRequest(
                limit=1,
                query=qe.Query.Nearest(qe.SparseVector([t], [1.0]), using=name),
                filter=flt,
                with_vector=[name],
                params=params,
            )
            for t in terms
        ]

    def idf_of(
        self, terms: Sequence[int], found: Sequence[Sequence[qe.ScoredPoint]]
    ) -> dict[int, float | None]:
        """Each term's IDF from its ``idf_requests`` answer (None: no point holds it)."""
        name = self.config.sparse_vector_name
        idf: dict[int, float | None] = {}
        for term, points in zip(terms, found, strict=True):
            idf[term] = None
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


def _alpha(query: VectorStoreQuery) -> float:
    return query.alpha if query.alpha is not None else 0.5


def _selector(keys: Sequence[str]) -> qe.PayloadSelector | bool:
    return qe.PayloadSelector.Include(list(dict.fromkeys(keys))) if keys else False


def _text(payload: Mapping[str, Any]) -> str:
    return json.loads(payload["_node_content"]).get("text", "")
