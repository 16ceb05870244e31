"""Hybrid fusion of a dense and a sparse result list, as LlamaIndex's ``QdrantVectorStore`` fuses.

Pure functions: over ``VectorStoreQueryResult`` (any backend), and the same arithmetic over
ranked ``(key, score)`` lists (``fuse_ranked``), which the embedded store uses to fuse point ids
before it decodes a node, so both give the same order and scores.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal, TypeVar

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQueryResult

K = TypeVar("K", bound=Hashable)
Fusion = Literal["relative_score", "rrf"]


def fuse_ranked(
    dense: Sequence[tuple[K, float]],
    sparse: Sequence[tuple[K, float]],
    *,
    fusion: Fusion = "relative_score",
    alpha: float = 0.5,
    top_k: int = 2,
    k: int = 60,
) -> list[tuple[K, float]]:
    """Two lists of ``(key, score)`` fused, best first (see the two functions below)."""
    d = sorted(dense, key=lambda x: x[1], reverse=True)
    s = sorted(sparse, key=lambda x: x[1], reverse=True)
    if fusion == "rrf":
        scores: dict[K, float] = {}
        for weight, pairs in ((alpha, d), (1 - alpha, s)):
            for rank, (key, _) in enumerate(pairs, start=1):
                scores[key] = scores.get(key, 0.0) + weight / (k + rank)
        return sorted(scores.items(), key=lambda x: -x[1])[:top_k]
    if not d or not s:
        return list(d or s)[:top_k]
    keys = dict.fromkeys([key for key, _ in d] + [key for key, _ in s])
    dn, sn = _minmax(d), _minmax(s)
    fused = [(key, (1 - alpha) * sn.get(key, 0.0) + alpha * dn.get(key, 0.0)) for key in keys]
    fused.sort(key=lambda x: x[1], reverse=True)
    return fused[:top_k]


def relative_score_fusion(
    dense_result: VectorStoreQueryResult,
    sparse_result: VectorStoreQueryResult,
    alpha: float = 0.5,
    top_k: int = 2,
) -> VectorStoreQueryResult:
    """LlamaIndex's QdrantVectorStore default: min-max normalise each list, then
    ``alpha * dense + (1 - alpha) * sparse`` (a node missing from a list scores 0 there)."""
    return _fused(dense_result, sparse_result, "relative_score", alpha, top_k, 60)


def reciprocal_rank_fusion(
    dense_result: VectorStoreQueryResult,
    sparse_result: VectorStoreQueryResult,
    alpha: float = 0.5,
    top_k: int = 2,
    k: int = 60,
) -> VectorStoreQueryResult:
    """Weighted RRF: ``alpha / (k + rank_dense) + (1 - alpha) / (k + rank_sparse)``."""
    return _fused(dense_result, sparse_result, "rrf", alpha, top_k, k)


def _fused(
    dense_result: VectorStoreQueryResult,
    sparse_result: VectorStoreQueryResult,
    fusion: Fusion,
    alpha: float,
    top_k: int,
    k: int,
) -> VectorStoreQueryResult:
    nodes: dict[str, BaseNode] = {}
    lists = []
    for res in (dense_result, sparse_result):
        pairs = list(zip(res.nodes or [], res.similarities or [], strict=True))
        for node, _ in pairs:
            nodes.setdefault(node.node_id, node)
        lists.append([(node.node_id, score) for node, score in pairs])
    fused = fuse_ranked(lists[0], lists[1], fusion=fusion, alpha=alpha, top_k=top_k, k=k)
    return VectorStoreQueryResult(
        nodes=[nodes[key] for key, _ in fused],
        similarities=[score for _, score in fused],
        ids=[key for key, _ in fused],
    )


def _minmax(pairs: list[tuple[K, float]]) -> dict[K, float]:
    lo, hi = min(s for _, s in pairs), max(s for _, s in pairs)
    if hi == lo:
        return {key: hi for key, _ in pairs}
    return {key: (s - lo) / (hi - lo) for key, s in pairs}
