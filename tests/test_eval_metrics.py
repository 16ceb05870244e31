"""Ranking metrics against hand-computed cases: hit at rank 1 and 20, no hit, ties, books."""

from __future__ import annotations

import math

import pytest

from litrag.eval.metrics import (
    QuestionScore,
    aggregate,
    dcg_at,
    first_relevant_rank,
    hit_at,
    rank_order,
    recall_at,
    reciprocal_rank,
)


def _ranked(rank: int | None, n: int = 30) -> list[bool]:
    return [i + 1 == rank for i in range(n)]


def test_hit_at_rank_1() -> None:
    m = QuestionScore.from_relevance("q", "b", _ranked(1)).metrics()
    assert m["MRR"] == 1.0
    assert all(m[f"Hit@{k}"] == 1.0 for k in (1, 2, 3, 5, 10, 20))
    assert all(m[f"DCG@{k}"] == 1.0 for k in (1, 2, 5, 10, 20))  # 1/log2(2)
    assert all(m[f"Recall@{k}"] == 1.0 for k in (1, 5, 10, 20))


def test_hit_at_rank_20() -> None:
    m = QuestionScore.from_relevance("q", "b", _ranked(20)).metrics()
    assert m["MRR"] == pytest.approx(0.05)
    assert m["Hit@10"] == 0.0 and m["Hit@20"] == 1.0
    assert m["DCG@10"] == 0.0
    assert m["DCG@20"] == pytest.approx(1 / math.log2(21))
    assert m["DCG@20"] == pytest.approx(0.227670, abs=1e-6)
    assert m["Recall@10"] == 0.0 and m["Recall@20"] == 1.0


def test_hit_at_rank_3() -> None:
    m = QuestionScore.from_relevance("q", "b", _ranked(3)).metrics()
    assert m["MRR"] == pytest.approx(1 / 3)
    assert (m["Hit@2"], m["Hit@3"]) == (0.0, 1.0)
    assert (m["DCG@2"], m["DCG@5"]) == (0.0, 0.5)  # 1/log2(4)


@pytest.mark.parametrize("ranked", [_ranked(None), _ranked(21), []])
def test_no_hit(ranked: list[bool]) -> None:
    m = QuestionScore.from_relevance("q", "b", ranked).metrics()
    expected_rr = 1 / 21 if any(ranked) else 0.0
    assert m["MRR"] == pytest.approx(expected_rr)
    assert all(v == 0.0 for k, v in m.items() if k != "MRR")


def test_only_the_first_relevant_chunk_counts() -> None:
    """Overlapping chunkers put the span in two chunks: the second adds nothing."""
    ranked = [False, True, True, False, True]
    s = QuestionScore.from_relevance("q", "b", ranked)
    assert s.rank == 2
    assert s.metrics()["DCG@5"] == pytest.approx(1 / math.log2(3))


def test_primitives() -> None:
    assert first_relevant_rank([False, False, True]) == 3
    assert first_relevant_rank([False]) is None
    assert reciprocal_rank(None) == 0.0 and reciprocal_rank(4) == 0.25
    assert hit_at(5, 5) == 1.0 and hit_at(6, 5) == 0.0 and hit_at(None, 5) == 0.0
    assert dcg_at(3, 3) == 0.5 and dcg_at(7, 5) == 0.0
    assert dcg_at(7, 10) == pytest.approx(1 / 3)  # log2(8) = 3
    assert recall_at([], 5) == 0.0


def test_ties_break_by_input_order() -> None:
    assert rank_order([0.5, 0.9, 0.5, 0.9, 0.0]) == [1, 3, 0, 2, 4]
    # the relevant chunk (index 2) ties with index 0, which comes first in the book
    scores, relevant = [0.5, 0.9, 0.5, 0.1], [False, False, True, False]
    ranked = [relevant[i] for i in rank_order(scores)]
    assert QuestionScore.from_relevance("q", "b", ranked).rank == 3
    # all-zero scores (nothing matched): reading order
    assert rank_order([0.0, 0.0, 0.0]) == [0, 1, 2]


def test_recall_over_several_spans() -> None:
    # chunk x span relevance, in ranked order: span 0 first at rank 2, span 1 first at rank 7
    ranked = [[False, False]] * 10
    ranked[1] = [True, False]
    ranked[6] = [False, True]
    ranked[8] = [True, True]
    s = QuestionScore.from_relevance("q", "b", ranked)
    assert (s.rank, s.span_ranks) == (2, (2, 7))
    m = s.metrics()
    assert (m["Recall@1"], m["Recall@5"], m["Recall@10"]) == (0.0, 0.5, 1.0)
    assert m["Hit@5"] == 1.0 and m["MRR"] == 0.5


def test_single_span_recall_equals_hit() -> None:
    for rank in (1, 4, 12, 20, None):
        m = QuestionScore.from_relevance("q", "b", _ranked(rank)).metrics()
        for k in (1, 5, 10, 20):
            assert m[f"Recall@{k}"] == m[f"Hit@{k}"]


def test_aggregate_over_questions_and_over_books() -> None:
    scores = [
        QuestionScore.from_relevance("a1", "A", _ranked(1)),  # RR 1
        QuestionScore.from_relevance("a2", "A", _ranked(2)),  # RR 0.5
        QuestionScore.from_relevance("a3", "A", _ranked(None)),  # RR 0
        QuestionScore.from_relevance("b1", "B", _ranked(4)),  # RR 0.25
    ]
    agg = aggregate(scores)
    assert agg.questions == 4
    assert agg.questions_per_book == {"A": 3, "B": 1}
    assert agg.over_questions["MRR"] == pytest.approx((1 + 0.5 + 0 + 0.25) / 4)
    assert agg.per_book["A"]["MRR"] == pytest.approx(0.5)
    assert agg.over_books["MRR"] == pytest.approx((0.5 + 0.25) / 2)
    assert agg.over_questions["Hit@1"] == 0.25
    assert agg.over_books["Hit@5"] == pytest.approx((2 / 3 + 1) / 2)
    assert agg.over_questions["DCG@5"] == pytest.approx(
        (1 + 1 / math.log2(3) + 0 + 1 / math.log2(5)) / 4
    )


def test_aggregate_custom_cutoffs_and_empty() -> None:
    agg = aggregate([QuestionScore.from_relevance("q", "b", _ranked(3))], (3,), (3,), (3,))
    assert set(agg.over_questions) == {"MRR", "Hit@3", "DCG@3", "Recall@3"}
    empty = aggregate([])
    assert empty.questions == 0 and empty.over_questions == {} and empty.over_books == {}
