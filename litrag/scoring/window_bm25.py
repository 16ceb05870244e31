"""BM25 that also scores a block by its best sentence window, as dense search already does.

Why: BM25 scores a whole block, and its length normalisation lowers a long block whose one
relevant passage shares a few words with the question, against short blocks that happen to
share them too. Dense retrieval avoids that with MaxSim over 3-sentence windows; this gives the
sparse side the same view, so retrieval depends less on how long the segmenter's blocks are.
A block's sparse score becomes ``w * best_window / max + (1 - w) * block / max`` over the
candidates (``w`` = ``RetrievalSettings.bm25_windows``; the figures behind the default are in
docs/lab/, "BM25 over sentence windows").

The pieces are 3-sentence windows (stride 2), as the dense side. (Paragraph children as the
pieces lost to them on every set and were deleted: docs/lab/, "BM25 over paragraph children".)

Qdrant has no sparse multivectors, so the store's top BM25 candidates are re-scored here: each
window with the engine's own IDF for the query's terms (read back from the store, so a
per-book or a collection scope both hold) and the BM25 term saturation of ``litrag.scoring.bm25``
against the candidates' mean window length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from litrag.scoring.bm25 import DEFAULT_B, DEFAULT_K1, term_id, tokenize
from litrag.scoring.kept_terms import (
    WINDOW_SENTENCES,
    WINDOW_STRIDE,
    Kept,
    window_counts,
    window_starts,
)

# BM25 candidates re-scored per query. 50, not 100: the public and blind sets rank the same on
# both book halves with either, and the 100k-block p50 is ~0.8 ms lower (docs/lab/).
DEFAULT_POOL = 50


Pieces = tuple[tuple[Counter[int], int], ...]  # (term-id counts, length) of each piece
# A text's sentences' term ids as a store keeps them (``kept_terms``); None: cut the text.
KeptTerms = Kept | None


@lru_cache(maxsize=4096)
def window_terms(text: str) -> Pieces:
    """Term-id counts and length (in terms) of each sentence window of ``text``; cached, since
    the same blocks come back for question after question about a book."""
    from litrag.segment.sentences import sentence_windows

    out = []
    for window in sentence_windows(text, WINDOW_SENTENCES, WINDOW_STRIDE):
        terms = tokenize(window)
        out.append((Counter(term_id(t) for t in terms), len(terms)))
    return tuple(out)


def sentence_terms(text: str) -> list[list[int]]:
    """The term ids of each sentence of ``text`` (as ``sentence_windows`` cuts them), in order:
    what a store keeps beside a point so that ``windows_of`` gives ``window_terms(text)`` at
    query time without splitting sentences again (Punkt is ~1-2 ms a text, over a pool of 50).

    A window's text is its sentences joined by single spaces, and ``tokenize`` splits at spaces,
    so its terms are its sentences' terms, in order."""
    from litrag.segment.sentences import split_sentences

    sents = [s.flat for s in split_sentences(text)] or [text.strip() or " "]
    return [[term_id(t) for t in tokenize(s)] for s in sents]


def windows_of(terms: Sequence[Sequence[int]]) -> Pieces:
    """``window_terms`` of a text from its ``sentence_terms``: the same windows (``size``
    sentences every ``stride``, the last one ending the text), counts and lengths."""
    out = []
    for a in window_starts(len(terms)):
        ids = [t for sentence in terms[a : a + WINDOW_SENTENCES] for t in sentence]
        out.append((Counter(ids), len(ids)))
    return tuple(out)


def best_window_scores(
    texts: Sequence[str],
    idf: Mapping[int, float],
    *,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    stored: Sequence[KeptTerms] | None = None,
) -> list[float]:
    """Each text's best piece BM25 score for a query whose terms have these ``idf`` weights;
    length is normalised by the mean piece length over the candidates. ``stored``: each text's
    sentences' term ids where the store kept them (``KeptTerms``; None: cut from the text); a
    kept text's text is not read.

    The pool is scored at once (numpy, each operation as the scalar formula orders it, so the
    floats are those of ``sum(w * saturation(tf, n, ...) for each query term in the window)``;
    a term absent from a window adds an exact 0)."""
    if stored is not None and len(stored) != len(texts):
        raise ValueError("one kept entry (or None) per text")
    items = list(idf.items())
    counts, sizes, per_text = _counted(texts, [t for t, _ in items], stored)
    total, windows = int(sizes.sum()), len(sizes)
    avg_len = total / windows if windows and total else 1.0
    score = np.zeros(windows)
    norm = k1 * (1.0 - b + b * sizes / avg_len)
    for j, (_, w) in enumerate(items):
        tf = counts[:, j].astype(np.float64)
        score = score + w * (tf * (k1 + 1.0) / (tf + norm))
    out = [0.0] * len(texts)
    firsts = np.cumsum([0, *per_text[:-1]]) if per_text else []
    has = [i for i, k in enumerate(per_text) if k]
    if has and windows:
        best = np.maximum.reduceat(score, np.asarray(firsts)[has])
        for i, v in zip(has, np.maximum(best, 0.0).tolist(), strict=True):
            out[i] = v
    return out


def _counted(
    texts: Sequence[str],
    terms: list[int],
    stored: Sequence[KeptTerms] | None,
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """``kept_terms.window_counts`` of every text: from the kept ids where there are, else
    from the text's windows (cut and counted here)."""
    kept = list(stored or ())
    if kept and all(k is not None for k in kept):
        return window_counts(kept, terms)  # type: ignore[arg-type]
    rows: list[list[int]] = []
    sizes: list[int] = []
    per_text: list[int] = []
    for i, text in enumerate(texts):
        if kept and kept[i] is not None:
            c, n, _ = window_counts([kept[i]], terms)  # type: ignore[list-item]
            rows += c.tolist()
            sizes += n.tolist()
            per_text.append(len(n))
            continue
        windows = window_terms(text)
        rows += [[counts[t] for t in terms] for counts, _ in windows]
        sizes += [n for _, n in windows]
        per_text.append(len(windows))
    matrix = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(terms))
    return matrix, np.asarray(sizes, dtype=np.int64), per_text


def mix_scores(block: Sequence[float], window: Sequence[float], weight: float) -> list[float]:
    """``weight * window / max(window) + (1 - weight) * block / max(block)``: both scaled by
    their best candidate (BM25 scores are never negative, so 0 stays the floor)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the window weight must be within [0, 1], got {weight}")
    top_b = max(block, default=0.0) or 1.0
    top_w = max(window, default=0.0) or 1.0
    return [
        weight * w / top_w + (1.0 - weight) * s / top_b for s, w in zip(block, window, strict=True)
    ]


def rescore(
    texts: Sequence[str],
    block_scores: Sequence[float],
    idf: Mapping[int, float],
    weight: float,
    *,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    stored: Sequence[KeptTerms] | None = None,
) -> list[tuple[int, float]]:
    """(candidate index, mixed score), best first; ties keep the engine's order. ``stored``:
    as ``best_window_scores``."""
    if len(texts) != len(block_scores):
        raise ValueError("one block score per text")
    window = (
        best_window_scores(texts, idf, k1=k1, b=b, stored=stored)
        if weight > 0
        else [0.0] * len(texts)
    )
    mixed = mix_scores(block_scores, window, weight)
    order = sorted(range(len(texts)), key=lambda i: (-mixed[i], i))
    return [(i, mixed[i]) for i in order]
