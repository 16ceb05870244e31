"""The offline narrative segmenter: plot blocks without an LLM.

Boundaries are chosen by dynamic programming over sentence boundaries. A cut is cheap where
the text's cohesion drops (windowed similarity of static word vectors), at scene-break ornaments
and at paragraph starts; it is expensive inside a paragraph, between two lines of one dialogue
exchange, and right before a sentence that opens on an unresolved pronoun. Block sizes are pulled
towards a target and kept within a minimum and maximum word count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from litrag.segment.sentences import Sentence
from litrag.segment.validation import Block

_QUOTES = ('"', "\u201c", "\u201d", "'", "\u2018", '_"')
_PRONOUN_OPENERS = re.compile(
    r"^[\W_]*(he|she|it|they|him|her|his|hers|its|them|their|theirs|this|that|these|those|"
    r"such|then|and|but|so|or|nor|yet)\b",
    re.IGNORECASE,
)
_TIME_OPENERS = re.compile(
    r"^[\W_]*(the next|next|on the (next|following)|the following|some (days|weeks|months|years|"
    r"time)|a (few|week|month|year|day|fortnight)|in the (morning|evening|meantime)|meanwhile|"
    r"when .{0,40}(morning|evening|night|day) |early|late|after (breakfast|dinner|tea|this)|"
    r"it was (now|not long))",
    re.IGNORECASE,
)


class StaticVectors:
    """Sentence vectors from WordLlama's packaged static embeddings (no download, ~2k texts/s)."""

    def __init__(self) -> None:
        self._model = _load_wordllama()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        vecs = np.asarray(self._model.embed(list(texts), norm=True), dtype=np.float32)
        return vecs


@lru_cache(maxsize=1)
def _load_wordllama():
    import wordllama
    from wordllama import WordLlama

    return WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


def window_similarity(vectors: np.ndarray, window: int = 3) -> np.ndarray:
    """Cosine similarity across each boundary: mean of ``window`` sentences before vs after.

    Entry ``b`` (0-based) scores the cut between sentence ``b`` and ``b + 1``.
    """
    n = len(vectors)
    if n < 2:
        return np.zeros(0, dtype=np.float32)
    csum = np.vstack([np.zeros((1, vectors.shape[1]), dtype=np.float64), np.cumsum(vectors, 0)])
    b = np.arange(1, n)  # number of sentences left of the cut
    lo = np.maximum(b - window, 0)
    hi = np.minimum(b + window, n)
    left = csum[b] - csum[lo]
    right = csum[hi] - csum[b]
    num = (left * right).sum(1)
    den = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1) + 1e-9
    return (num / den).astype(np.float32)


def _is_dialogue(s: Sentence) -> bool:
    return s.text.lstrip().startswith(_QUOTES)


@dataclass
class CutCosts:
    """Per-boundary cost of cutting (lower is a better cut) and the raw similarity behind it."""

    cost: np.ndarray
    similarity: np.ndarray

    def window(self, first: int, n: int) -> CutCosts:
        """The costs inside a run of ``n`` sentences starting at 0-based ``first``."""
        end = first + max(n - 1, 0)
        return CutCosts(self.cost[first:end], self.similarity[first:end])


def boundary_costs(sentences: Sequence[Sentence], vectors: np.ndarray, window: int = 3) -> CutCosts:
    """How bad a cut after each sentence is, from cohesion and narrative cues."""
    sim = window_similarity(vectors, window)
    n = len(sentences)
    if n < 2:
        return CutCosts(np.zeros(0, dtype=np.float32), sim)
    z = (sim - sim.mean()) / (sim.std() + 1e-6)
    cost = z.astype(np.float64)
    for b in range(n - 1):
        left, right = sentences[b], sentences[b + 1]
        if right.scene_break:
            cost[b] -= 4.0
        if not right.paragraph_start:
            cost[b] += 2.5
        elif _is_dialogue(left) and _is_dialogue(right):
            cost[b] += 1.0  # inside a dialogue exchange
        if _PRONOUN_OPENERS.match(right.text):
            cost[b] += 0.8
        if _TIME_OPENERS.match(right.text):
            cost[b] -= 0.8
    return CutCosts(cost.astype(np.float32), sim)


class OfflineSegmenter:
    """Narrative-cohesion segmentation with size targets, for units of any length."""

    name = "offline"

    def __init__(
        self,
        target_words: int = 300,
        min_words: int = 120,
        max_words: int = 600,
        window: int = 3,
        size_weight: float = 2.0,
    ) -> None:
        if not 0 < min_words <= target_words <= max_words:
            raise ValueError("need 0 < min_words <= target_words <= max_words")
        self.target_words = target_words
        self.min_words = min_words
        self.max_words = max_words
        self.window = window
        self.size_weight = size_weight

    def segment(
        self,
        sentences: Sequence[Sentence],
        costs: CutCosts,
        tokens: Sequence[int] | None = None,
        max_tokens: int | None = None,
    ) -> list[Block]:
        """Blocks covering ``sentences`` in order; with ``tokens``/``max_tokens`` no block built
        from two or more sentences exceeds ``max_tokens``."""
        n = len(sentences)
        if n == 0:
            return []
        cum = [0]
        for s in sentences:
            cum.append(cum[-1] + max(s.words, 1))
        tcum = [0]
        for k in tokens if tokens is not None else [0] * n:
            tcum.append(tcum[-1] + k)
        tmax = max_tokens if max_tokens is not None else float("inf")
        if cum[-1] <= self.max_words and cum[-1] < 2 * self.min_words and tcum[-1] <= tmax:
            return [Block(1, n)]
        t, lo, hi, w = self.target_words, self.min_words, self.max_words, self.size_weight
        cut = [float(c) for c in costs.cost] + [0.0]
        inf = float("inf")
        best = [inf] * (n + 1)
        back = [0] * (n + 1)
        best[0] = 0.0
        for j in range(1, n + 1):
            # candidate block: sentences i+1..j (1-based), i from j-1 down while it fits
            cj, tj, cost_j = cum[j], tcum[j], cut[j - 1] if j < n else 0.0
            bj, bi = inf, j - 1
            for i in range(j - 1, -1, -1):
                size = cj - cum[i]
                if i < j - 1 and (size > hi or tj - tcum[i] > tmax):
                    break
                pen = w * ((size - t) / t) ** 2
                if size < lo and not (i == 0 and j == n):
                    pen += 2.0 * w * (lo - size) / lo
                val = best[i] + pen + cost_j
                if val < bj:
                    bj, bi = val, i
            best[j], back[j] = bj, bi
        ends = []
        j = n
        while j > 0:
            ends.append(j)
            j = back[j]
        ends.reverse()
        blocks, start = [], 1
        for e in ends:
            blocks.append(Block(start, e))
            start = e + 1
        return blocks
