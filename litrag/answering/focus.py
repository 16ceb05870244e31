"""Question-focused excerpts of retrieved blocks, for a small answering model.

A LitSeg block is a whole scene, about 250 words. Five of them make a prompt of about 2,000
tokens, which the packaged 1.5B model reads at 30-40 tokens/s on two cores (a minute before the
first word), and most of those words are beside the question. ``PassageFocus`` keeps, of each
block, the sentences nearest the question, each with its neighbours, up to a word budget, in text
order, with "[...]" where sentences were left out. A sentence is scored by the 3-sentence window
centred on it: the cosine of the window's embedding with the question's, plus a share of the
sentence's BM25 score against the question (so a rare name in the question counts even when the
small embedder misses it).

The block stays the unit that is retrieved, ranked and cited; only the prompt reads the excerpt,
and ``Source.excerpt`` records it so a reader can see what the model saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from litrag.scoring.bm25 import BM25Index
from litrag.segment.sentences import split_sentences

GAP = "[...]"


@dataclass(frozen=True)
class Excerpt:
    """The part of one passage the model reads."""

    text: str
    kept: tuple[int, ...]  # indices of the kept sentences in the passage's sentence split
    total: int  # sentences in the passage

    @property
    def is_whole(self) -> bool:
        return len(self.kept) == self.total


class PassageFocus:
    """Cut passages to the sentences nearest a question (see the module docstring).

    ``max_words`` is a budget per passage: the best-scoring sentence and its ``neighbors`` on
    each side are always kept; further sentences (with their neighbours) are added in score
    order while they fit.
    """

    def __init__(
        self,
        embed_model: BaseEmbedding,
        *,
        max_words: int = 110,
        neighbors: int = 1,
        lexical_weight: float = 0.15,
    ) -> None:
        if max_words < 1 or neighbors < 0:
            raise ValueError("max_words must be >= 1 and neighbors >= 0")
        self.embed_model = embed_model
        self.max_words = max_words
        self.neighbors = neighbors
        self.lexical_weight = lexical_weight

    def describe(self) -> str:
        return f"question-focused excerpts (<= {self.max_words} words per passage)"

    def __call__(self, question: str, passages: Sequence[str]) -> list[Excerpt]:
        """One excerpt per passage; all windows are embedded in one batch."""
        splits = [[s.flat for s in split_sentences(p)] for p in passages]
        windows = [w for sents in splits for w in _windows(sents)]
        if not windows:
            return [Excerpt(p, (), 0) for p in passages]
        query = _unit(np.asarray(self.embed_model.get_query_embedding(question), dtype=float))
        vectors = np.asarray(self.embed_model.get_text_embedding_batch(windows), dtype=float)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        cosines = vectors @ query
        out: list[Excerpt] = []
        start = 0
        for passage, sents in zip(passages, splits, strict=True):
            n = len(sents)
            if n == 0:
                out.append(Excerpt(passage, (), 0))
                continue
            scores = cosines[start : start + n] + self.lexical_weight * _lexical(question, sents)
            start += n
            out.append(self._cut(sents, scores))
        return out

    def _cut(self, sents: list[str], scores: np.ndarray) -> Excerpt:
        n = len(sents)
        lengths = [len(s.split()) for s in sents]
        keep: set[int] = set()
        words = 0
        for i in np.argsort(-scores, kind="stable"):
            span = range(max(0, i - self.neighbors), min(n, i + self.neighbors + 1))
            add = [j for j in span if j not in keep]
            cost = sum(lengths[j] for j in add)
            if keep and words + cost > self.max_words:
                break
            keep.update(add)
            words += cost
        kept = sorted(keep)
        parts: list[str] = [GAP] if kept[0] > 0 else []
        for prev, j in zip([None, *kept], kept, strict=False):
            if prev is not None and j != prev + 1:
                parts.append(GAP)
            parts.append(sents[j])
        if kept[-1] < n - 1:
            parts.append(GAP)
        return Excerpt(" ".join(parts), tuple(kept), n)


def _windows(sents: list[str]) -> list[str]:
    """The 3-sentence window centred on each sentence (clipped at the ends)."""
    return [" ".join(sents[max(0, i - 1) : i + 2]) for i in range(len(sents))]


def _lexical(question: str, sents: list[str]) -> np.ndarray:
    """Each sentence's BM25 score against the question, scaled to [0, 1] within the passage."""
    raw = np.asarray(BM25Index(sents).scores(question), dtype=float)
    top = raw.max() if raw.size else 0.0
    return raw / top if top > 0 else raw


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v
