"""Hybrid fusion on hand-made result lists: relative-score, distribution-based and weighted
reciprocal-rank fusion."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQueryResult

from litrag.scoring.fusion import (
    distribution_score_fusion,
    fuse_ranked,
    reciprocal_rank_fusion,
    relative_score_fusion,
)


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
    rrf = reciprocal_rank_fusion(dense, sparse, alpha=0.5, top_k=2, k=1)
    # c: .5/(1+3) + .5/(1+1) ; b: .5/3 + .5/4 ; a: .5/2
    assert rrf.ids == ["c", "b"]
    assert rrf.similarities == pytest.approx([0.375, 0.5 / 3 + 0.125])


def test_distribution_based_fusion_normalises_by_mean_and_spread() -> None:
    """DBSF maps each list's mean - 3 sd to 0 and mean + 3 sd to 1 (clipped): one standout keeps
    a lead that min-max would also give the runner-up's neighbours."""
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]  # mean 0.5, sd 0.3266
    sparse = [("c", 10.0), ("b", 2.0), ("d", 0.0)]  # mean 4, sd 4.3205
    got = dict(fuse_ranked(dense, sparse, fusion="dbsf", alpha=0.5, top_k=4))
    sd_d, sd_s = 0.32660, 4.32049
    want = {
        "a": 0.5 * (0.4 + 3 * sd_d) / (6 * sd_d),
        "b": 0.5 * 0.5 + 0.5 * (2 - 4 + 3 * sd_s) / (6 * sd_s),
        "c": 0.5 * (0.1 - 0.5 + 3 * sd_d) / (6 * sd_d) + 0.5 * (6 + 3 * sd_s) / (6 * sd_s),
        "d": 0.5 * (0 - 4 + 3 * sd_s) / (6 * sd_s),
    }
    assert got == pytest.approx(want, abs=1e-4)
    assert list(got) == sorted(want, key=lambda k: -want[k])
    # a list of equal scores says nothing: every entry sits in the middle
    flat = dict(fuse_ranked([("a", 1.0), ("b", 1.0)], [("b", 3.0)], fusion="dbsf", alpha=0.5))
    assert flat == pytest.approx({"a": 0.25, "b": 0.5})


def test_the_node_fusion_and_the_id_fusion_agree() -> None:
    def res(pairs: list[tuple[str, float]]) -> VectorStoreQueryResult:
        nodes = [TextNode(id_=i, text=i) for i, _ in pairs]
        return VectorStoreQueryResult(nodes=nodes, similarities=[s for _, s in pairs], ids=None)

    dense = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    sparse = [("c", 12.0), ("d", 6.0), ("b", 0.0)]
    fused = distribution_score_fusion(res(dense), res(sparse), alpha=0.3, top_k=3)
    ranked = fuse_ranked(dense, sparse, fusion="dbsf", alpha=0.3, top_k=3)
    assert fused.ids == [k for k, _ in ranked]
    assert fused.similarities == pytest.approx([s for _, s in ranked])
