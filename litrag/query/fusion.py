"""Hybrid fusion of a dense and a sparse result list, as LlamaIndex's ``QdrantVectorStore`` fuses.

Pure functions over ``VectorStoreQueryResult``: they need no store, so any backend can use them.
"""

from __future__ import annotations

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQueryResult


def relative_score_fusion(
    dense_result: VectorStoreQueryResult,
    sparse_result: VectorStoreQueryResult,
    alpha: float = 0.5,
    top_k: int = 2,
) -> VectorStoreQueryResult:
    """LlamaIndex's QdrantVectorStore default: min-max normalise each list, then
    ``alpha * dense + (1 - alpha) * sparse`` (a node missing from a list scores 0 there)."""
    dense = _scored(dense_result)
    sparse = _scored(sparse_result)
    if not dense and not sparse:
        return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
    if not sparse or not dense:
        only = dense or sparse
        return _result(only[:top_k])
    nodes = {n.node_id: n for _, n in dense}
    for _, n in sparse:
        nodes.setdefault(n.node_id, n)
    d, s = _minmax(dense), _minmax(sparse)
    fused = [
        ((1 - alpha) * s.get(nid, 0.0) + alpha * d.get(nid, 0.0), node)
        for nid, node in nodes.items()
    ]
    fused.sort(key=lambda x: x[0], reverse=True)
    return _result(fused[:top_k])


def reciprocal_rank_fusion(
    dense_result: VectorStoreQueryResult,
    sparse_result: VectorStoreQueryResult,
    alpha: float = 0.5,
    top_k: int = 2,
    k: int = 60,
) -> VectorStoreQueryResult:
    """Weighted RRF: ``alpha / (k + rank_dense) + (1 - alpha) / (k + rank_sparse)``."""
    scores: dict[str, float] = {}
    nodes: dict[str, BaseNode] = {}
    for weight, res in ((alpha, dense_result), (1 - alpha, sparse_result)):
        for rank, (_, node) in enumerate(_scored(res), start=1):
            nodes.setdefault(node.node_id, node)
            scores[node.node_id] = scores.get(node.node_id, 0.0) + weight / (k + rank)
    fused = sorted(((sc, nodes[nid]) for nid, sc in scores.items()), key=lambda x: -x[0])
    return _result(fused[:top_k])


def _scored(res: VectorStoreQueryResult) -> list[tuple[float, BaseNode]]:
    pairs = list(zip(res.similarities or [], res.nodes or [], strict=True))
    pairs.sort(key=lambda x: x[0], reverse=True)
    return pairs


def _minmax(pairs: list[tuple[float, BaseNode]]) -> dict[str, float]:
    lo, hi = min(s for s, _ in pairs), max(s for s, _ in pairs)
    if hi == lo:
        return {n.node_id: hi for _, n in pairs}
    return {n.node_id: (s - lo) / (hi - lo) for s, n in pairs}


def _result(pairs: list[tuple[float, BaseNode]]) -> VectorStoreQueryResult:
    return VectorStoreQueryResult(
        nodes=[n for _, n in pairs],
        similarities=[s for s, _ in pairs],
        ids=[n.node_id for _, n in pairs],
    )
