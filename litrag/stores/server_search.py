"""Queries of ``QdrantServerStore``: the requests of the embedded store's ``edge_search``, sent
through qdrant-client.

Dense search uses the window multivector (MaxSim) where the collection keeps one. Sparse search
weights each query term by its IDF over the query's filter, from exact counts (one for the
filter, one per term on the ``_terms`` payload index); the server then returns the embedded
store's filter-scoped BM25 scores. A wider pool is re-scored by best sentence window with those
same IDFs (``window_bm25``). Hybrid sends dense and sparse in one batch and fuses as the
embedded store does. Book-filtered requests name the books' shard keys when sharded by book.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from qdrant_client import models

from litrag.stores.edge_points import KEPT_TERM_KEYS
from litrag.stores.edge_points import points_to_result as _result  # same ScoredPoint shape

if TYPE_CHECKING:
    from litrag.stores.edge_search import HybridFusionCallable

_NODE_KEYS = ["_node_content", "_node_type"]
TERMS_KEY = "_terms"  # a block's distinct BM25 term ids: the document frequencies count them


def bm25_idf(n: int, df: int) -> float:
    """Qdrant's IDF modifier (and Lucene's): ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class ServerSearch:
    """One query on ``store`` (its settings as they are now) with the hybrid ``fuse``."""

    store: Any  # a QdrantServerStore (which imports this module)
    fuse: HybridFusionCallable

    def run(self, query: VectorStoreQuery, kwargs: Mapping[str, Any]) -> VectorStoreQueryResult:
        st = self.store
        flt = kwargs.get("qdrant_filters") or st.query_filter(query)
        keys = st._keys(query.filters)
        mode = query.mode
        if mode == VectorStoreQueryMode.DEFAULT:
            (dense,) = self._batch([self.dense_request(query, flt, keys, kwargs)])
            return _result(dense)
        if mode not in (
            VectorStoreQueryMode.SPARSE,
            VectorStoreQueryMode.TEXT_SEARCH,
            VectorStoreQueryMode.HYBRID,
        ):
            raise NotImplementedError(f"query mode {mode.value!r} is not supported by this store")
        weight = float(kwargs.get("sparse_window_weight", st.sparse_window_weight))
        terms, values = self.query_terms(query)
        idf = self.idf(terms, flt, keys)
        sparse_req = self.sparse_request(query, flt, keys, terms, values, idf, weight)
        limit = query.sparse_top_k or query.similarity_top_k
        if mode != VectorStoreQueryMode.HYBRID:
            (sparse,) = self._batch([sparse_req])
            return _result(*st.window_rescore(sparse, idf, weight, limit))
        dense_req = self.dense_request(query, flt, keys, kwargs)
        dense, sparse = self._batch([dense_req, sparse_req])
        seen: dict[Any, BaseNode] = {}  # a point in both lists is decoded once
        dense_res = _result(dense, seen=seen)
        sparse_res = _result(*st.window_rescore(sparse, idf, weight, limit), seen=seen)
        alpha = query.alpha if query.alpha is not None else 0.5
        top_k = query.hybrid_top_k or query.similarity_top_k
        return self.fuse(dense_res, sparse_res, alpha=alpha, top_k=top_k)

    def _batch(self, requests: list[models.QueryRequest]) -> list[list[Any]]:
        st = self.store
        out = st.client.query_batch_points(collection_name=st.collection_name, requests=requests)
        return [r.points for r in out]

    def dense_request(
        self,
        query: VectorStoreQuery,
        flt: models.Filter | None,
        keys: list[str] | None,
        kwargs: Mapping[str, Any],
    ) -> models.QueryRequest:
        if query.query_embedding is None:
            raise ValueError("dense and hybrid queries need query.query_embedding")
        sp = kwargs.get("search_params") or {}
        params = models.SearchParams(**sp) if isinstance(sp, dict) and sp else None
        st = self.store
        vec = [float(x) for x in query.query_embedding]
        # Against the window multivector, the query is a multivector of one: MaxSim scores each
        # node by its best window (local mode takes no single vector against a multivector).
        return models.QueryRequest(
            query=[vec] if st.window_vector_name else vec,
            using=st.window_vector_name or st.dense_vector_name,
            limit=query.similarity_top_k,
            filter=flt,
            with_payload=_NODE_KEYS,
            shard_key=keys,
            params=params,
        )

    def query_terms(self, query: VectorStoreQuery) -> tuple[list[int], list[float]]:
        st = self.store
        if st._sparse_query_fn is None:
            raise ValueError("sparse and hybrid queries need sparse_query_fn")
        if not query.query_str:
            raise ValueError("sparse and hybrid queries need query.query_str")
        idx, vals = st._sparse_query_fn([query.query_str])
        return [int(i) for i in idx[0]], [float(v) for v in vals[0]]

    def idf(
        self, terms: Sequence[int], flt: models.Filter | None, keys: list[str] | None
    ) -> dict[int, float]:
        """Each query term's IDF: over the filter's points, from exact counts; under the
        server's own IDF (a legacy collection), read back as the embedded store does."""
        if not terms:
            return {}
        st = self.store
        if st.idf_scope == "collection":
            return self._engine_idf(terms, flt, keys)
        n = st._count(flt, keys)
        out: dict[int, float] = {}
        for t in dict.fromkeys(terms):
            has = models.FieldCondition(key=TERMS_KEY, match=models.MatchValue(value=t))
            must: list[Any] = [has] if flt is None else [flt, has]
            df = st._count(models.Filter(must=must), keys)
            if df:  # a term no point holds adds nothing (left out, as the embedded store)
                out[t] = bm25_idf(n, df)
        return out

    def _engine_idf(
        self, terms: Sequence[int], flt: models.Filter | None, keys: list[str] | None
    ) -> dict[int, float]:
        """The server's IDF of each term: a one-term query's top score over its stored weight."""
        st = self.store
        name = st.sparse_vector_name
        reqs = [
            models.QueryRequest(
                query=models.SparseVector(indices=[t], values=[1.0]),
                using=name,
                limit=1,
                filter=flt,
                with_vector=[name],
                shard_key=keys,
            )
            for t in terms
        ]
        out: dict[int, float] = {}
        for t, points in zip(terms, self._batch(reqs), strict=True):
            if not points:
                continue
            vec = (points[0].vector or {}).get(name)
            weights = dict(zip(vec.indices, vec.values, strict=True)) if vec is not None else {}
            if weights.get(t):
                out[t] = float(points[0].score) / float(weights[t])
        return out

    def sparse_request(
        self,
        query: VectorStoreQuery,
        flt: models.Filter | None,
        keys: list[str] | None,
        terms: list[int],
        values: list[float],
        idf: Mapping[int, float],
        weight: float,
    ) -> models.QueryRequest:
        st = self.store
        if st.idf_scope == "filter":  # the server applies no IDF: send it in the weights
            pairs = [(t, v * idf[t]) for t, v in zip(terms, values, strict=True) if t in idf]
            terms, values = [t for t, _ in pairs], [v for _, v in pairs]
        limit = query.sparse_top_k or query.similarity_top_k
        if weight > 0:  # a wider pool, re-scored by windows and cut back
            limit = max(limit, st.sparse_window_pool)
        payload = _NODE_KEYS + (KEPT_TERM_KEYS if weight > 0 else [])
        return models.QueryRequest(
            query=models.SparseVector(indices=terms, values=values),
            using=st.sparse_vector_name,
            limit=limit,
            filter=flt,
            with_payload=payload,
            shard_key=keys,
        )
