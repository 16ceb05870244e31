"""Hybrid fusion on hand-made result lists: relative-score fusion, by nodes and by ids."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQueryResult

from litrag.scoring.fusion import fuse_ranked, relative_score_fusion


def test_fusions_on_known_lists() -> None:
    def res(pairs: list[tuple[str, float]]) -> VectorStoreQueryResult:
        nodes = [TextNode(id_=i, text=i) for i, _ in pairs]
        return VectorStoreQueryResult(nodes=nodes, similarities=[s for _, s in pairs], ids=None)

    dense = res([("a", 0.9), ("b", 0.8), ("c", 0.1)])
    sparse = res([("c", 12.0), ("d", 6.0), ("b", 0.0)])
    rs = relative_score_fusion(dense, sparse, alpha=0.5, top_k=4)
    # a: .5*1 ; b: .5*.875 + 0 ; c: .5*0 + .5*1 ; d: .5*.5
    assert rs.ids == ["a", "c", "b", "d"]
    assert rs.similarities == pytest.approx([0.5, 0.5, 0.4375, 0.25])
    assert relative_score_fusion(dense, sparse, alpha=1.0, top_k=1).ids == ["a"]
    assert relative_score_fusion(dense, res([]), top_k=2).ids == ["a", "b"]


def test_the_node_fusion_and_the_id_fusion_agree() -> None:
    def res(pairs: list[tuple[str, float]]) -> VectorStoreQueryResult:
        nodes = [TextNode(id_=i, text=i) for i, _ in pairs]
        return VectorStoreQueryResult(nodes=nodes, similarities=[s for _, s in pairs], ids=None)

    dense = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    sparse = [("c", 12.0), ("d", 6.0), ("b", 0.0)]
    fused = relative_score_fusion(res(dense), res(sparse), alpha=0.3, top_k=3)
    ranked = fuse_ranked(dense, sparse, alpha=0.3, top_k=3)
    assert fused.ids == [k for k, _ in ranked]
    assert fused.similarities == pytest.approx([s for _, s in ranked])
