"""Ranking metrics for needle-in-a-haystack retrieval (GutenQA style), per question and averaged.

Definitions (ranks are 1-based; ``r`` is the rank of the first relevant chunk, if any):

- RR = 1/r, 0 when nothing relevant is ranked; MRR is its mean.
- Hit@k = 1 if r <= k.
- DCG@k = 1/log2(r + 1) if r <= k, else 0: binary gain for the first relevant chunk only, as in
  GutenQA/LumberChunker (a second chunk holding the same span adds nothing).
- Recall@k = the share of the question's gold spans that some chunk within the top k contains.
  With one gold span per question (GutenQA) it equals Hit@k; it differs for multi-span questions.

Ties: ``rank_order`` sorts by descending score and breaks ties by input position (reading order of
the chunks in the book), so every run ranks identically. That is optimistic for a relevant chunk
early in the book that ties with later ones; exact score ties are rare above zero in BM25 or
dense retrieval.

Aggregates are given two ways: the mean over questions, and the mean over books of the per-book
means (GutenQA reports the latter, so each book counts equally whatever its question count).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

HIT_KS = (1, 2, 3, 5, 10, 20)
DCG_KS = (1, 2, 5, 10, 20)
RECALL_KS = (1, 5, 10, 20)


def rank_order(scores: Sequence[float]) -> list[int]:
    """Indices of ``scores``, best first; ties keep input order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def first_relevant_rank(relevant: Sequence[bool]) -> int | None:
    """1-based rank of the first relevant item of a ranked list, None if there is none."""
    return next((i + 1 for i, r in enumerate(relevant) if r), None)


def reciprocal_rank(rank: int | None) -> float:
    return 1.0 / rank if rank else 0.0


def hit_at(rank: int | None, k: int) -> float:
    return 1.0 if rank is not None and rank <= k else 0.0


def dcg_at(rank: int | None, k: int) -> float:
    return 1.0 / math.log2(rank + 1) if rank is not None and rank <= k else 0.0


def recall_at(span_ranks: Sequence[int | None], k: int) -> float:
    """Share of gold spans first found within the top k (0 for a question with no spans)."""
    if not span_ranks:
        return 0.0
    return sum(hit_at(r, k) for r in span_ranks) / len(span_ranks)


@dataclass(frozen=True)
class QuestionScore:
    """Where the gold evidence of one question landed in its ranking."""

    question_id: str
    book: str
    rank: int | None  # first chunk containing any gold span
    span_ranks: tuple[int | None, ...]  # per gold span: first chunk containing it

    @classmethod
    def from_relevance(
        cls, question_id: str, book: str, ranked: Sequence[bool] | Sequence[Sequence[bool]]
    ) -> QuestionScore:
        """From the ranked chunks' relevance: one bool each, or one bool per gold span each."""
        rows = [(r,) if isinstance(r, bool) else tuple(r) for r in ranked]
        n_spans = len(rows[0]) if rows else 1
        span_ranks = tuple(first_relevant_rank([row[j] for row in rows]) for j in range(n_spans))
        rank = first_relevant_rank([any(row) for row in rows])
        return cls(question_id, book, rank, span_ranks)

    def metrics(
        self,
        hit_ks: Sequence[int] = HIT_KS,
        dcg_ks: Sequence[int] = DCG_KS,
        recall_ks: Sequence[int] = RECALL_KS,
    ) -> dict[str, float]:
        out = {"MRR": reciprocal_rank(self.rank)}
        out.update({f"Hit@{k}": hit_at(self.rank, k) for k in hit_ks})
        out.update({f"DCG@{k}": dcg_at(self.rank, k) for k in dcg_ks})
        out.update({f"Recall@{k}": recall_at(self.span_ranks, k) for k in recall_ks})
        return out


@dataclass(frozen=True)
class Aggregate:
    """Metric means over questions and over books, and each book's own means."""

    questions: int
    over_questions: dict[str, float]
    over_books: dict[str, float]
    per_book: dict[str, dict[str, float]]
    questions_per_book: dict[str, int]


def _mean_dicts(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.fmean(r[key] for r in rows) for key in rows[0]} if rows else {}


def aggregate(
    scores: Iterable[QuestionScore],
    hit_ks: Sequence[int] = HIT_KS,
    dcg_ks: Sequence[int] = DCG_KS,
    recall_ks: Sequence[int] = RECALL_KS,
) -> Aggregate:
    """Average per-question metrics over questions, and per book then over books."""
    by_book: dict[str, list[dict[str, float]]] = {}
    rows = []
    for s in scores:
        m = s.metrics(hit_ks, dcg_ks, recall_ks)
        rows.append(m)
        by_book.setdefault(s.book, []).append(m)
    per_book = {book: _mean_dicts(ms) for book, ms in by_book.items()}
    return Aggregate(
        questions=len(rows),
        over_questions=_mean_dicts(rows),
        over_books=_mean_dicts(list(per_book.values())),
        per_book=per_book,
        questions_per_book={book: len(ms) for book, ms in by_book.items()},
    )
