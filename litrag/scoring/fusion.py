"""Hybrid fusion of a dense and a sparse result list, as LlamaIndex's ``QdrantVectorStore`` fuses.

Pure functions: over ``VectorStoreQueryResult`` (any backend), and the same arithmetic over
ranked ``(key, score)`` lists (``fuse_ranked``), which the embedded store uses to fuse point ids
before it decodes a node, so both give the same order and scores. Relative-score fusion only:
reciprocal-rank fusion lost on every half and set it was measured on (docs/lab/, "Fusion and
weights") and was deleted.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQueryResult

K = TypeVar("K", bound=Hashable)


def fuse_ranked(
    dense: Sequence[tuple[K, float]],
    sparse: Sequence[tuple[K, float]],
    *,
    alpha: float = 0.5,
    top_k: int = 2,
) -> list[tuple[K, float]]:
    """Two lists of ``(key, score)`` fused, best first (see ``relative_score_fusion``)."""
    d = sorted(dense, key=lambda x: x[1], reverse=True)
    s = sorted(sparse, key=lambda x: x[1], reverse=True)
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
    nodes: dict[str, BaseNode] = {}
    lists = []
    for res in (dense_result, sparse_result):
        pairs = list(zip(res.nodes or [], res.similarities or [], strict=True))
        for node, _ in pairs:
            nodes.setdefault(node.node_id, node)
        lists.append([(node.node_id, score) for node, score in pairs])
    fused = fuse_ranked(lists[0], lists[1], alpha=alpha, top_k=top_k)
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
