"""BM25 that also scores a block by its best sentence window, as dense search already does.

Why: BM25 scores a whole block, and its length normalisation lowers a long block whose one
relevant passage shares a few words with the question, against short blocks that happen to
share them too. Dense retrieval avoids that with MaxSim over 3-sentence windows; this gives the
sparse side the same view, so retrieval depends less on how long the segmenter's blocks are.
A block's sparse score becomes ``w * best_window / max + (1 - w) * block / max`` over the
candidates (``w`` = ``RetrievalSettings.bm25_windows``; the figures behind the default are in
docs/results.md, "BM25 over sentence windows").

Two kinds of piece (``RetrievalSettings.bm25_window_kind``): ``sentences``, 3-sentence windows
(stride 2), as the dense side; ``paragraphs``, the block's paragraph children, the very pieces
``paragraph_chunker`` (<= 200 words) cuts from the block's text. With children at weight 1 a
block ranks where its best paragraph would rank once paragraphs are collapsed into their blocks,
so within the candidate pool the sparse ranking cannot fall below the paragraph chunker's where
the answer lies inside one paragraph; a weight below 1 keeps the block's own score as context.

Qdrant has no sparse multivectors, so the store's top BM25 candidates are re-scored here: each
window with the engine's own IDF for the query's terms (read back from the store, so a
per-book or a collection scope both hold) and the BM25 term saturation of ``litrag.query.bm25``
against the candidates' mean window length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Literal

from litrag.query.bm25 import DEFAULT_B, DEFAULT_K1, saturation, term_id, tokenize

WINDOW_SENTENCES = 3  # as the dense windows (embeddings.SentenceWindowEncoder)
WINDOW_STRIDE = 2
DEFAULT_POOL = 100  # BM25 candidates re-scored per query
WindowKind = Literal["sentences", "paragraphs"]
WINDOW_KINDS: tuple[WindowKind, ...] = ("sentences", "paragraphs")


Pieces = tuple[tuple[Counter[int], int], ...]  # (term-id counts, length) of each piece


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
    query time without splitting sentences again (Punkt is ~1-2 ms a text, over a pool of 100).

    A window's text is its sentences joined by single spaces, and ``tokenize`` splits at spaces,
    so its terms are its sentences' terms, in order."""
    from litrag.segment.sentences import split_sentences

    sents = [s.flat for s in split_sentences(text)] or [text.strip() or " "]
    return [[term_id(t) for t in tokenize(s)] for s in sents]


def windows_of(terms: Sequence[Sequence[int]]) -> Pieces:
    """``window_terms`` of a text from its ``sentence_terms``: the same windows (``size``
    sentences every ``stride``, the last one ending the text), counts and lengths."""
    n = len(terms)
    starts = list(range(0, max(1, n - WINDOW_SENTENCES + 1), WINDOW_STRIDE))
    if starts[-1] + WINDOW_SENTENCES < n:
        starts.append(n - WINDOW_SENTENCES)
    out = []
    for a in starts:
        ids = [t for sentence in terms[a : a + WINDOW_SENTENCES] for t in sentence]
        out.append((Counter(ids), len(ids)))
    return tuple(out)


@lru_cache(maxsize=4096)
def child_terms(text: str) -> tuple[tuple[Counter[int], int], ...]:
    """Term-id counts and length of each paragraph child of ``text`` (``paragraph_spans``: the
    paragraph chunker's pieces of it); a text with no blank line is its own one child."""
    from litrag.chunkers.baselines import paragraph_spans

    out = []
    for a, b in paragraph_spans(text) or [(0, len(text))]:
        terms = tokenize(text[a:b])
        out.append((Counter(term_id(t) for t in terms), len(terms)))
    return tuple(out)


def best_window_scores(
    texts: Sequence[str],
    idf: Mapping[int, float],
    *,
    kind: WindowKind = "sentences",
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    stored: Sequence[Sequence[Sequence[int]] | None] | None = None,
) -> list[float]:
    """Each text's best piece BM25 score for a query whose terms have these ``idf`` weights;
    length is normalised by the mean piece length over the candidates. ``stored``: each text's
    ``sentence_terms`` where the store kept them (None: cut from the text), for sentences."""
    if kind not in WINDOW_KINDS:
        raise ValueError(f"unknown window kind {kind!r}: use one of {', '.join(WINDOW_KINDS)}")
    pieces = window_terms if kind == "sentences" else child_terms
    if kind == "sentences" and stored is not None:
        per_text = [
            pieces(t) if kept is None else windows_of(kept)
            for t, kept in zip(texts, stored, strict=True)
        ]
    else:
        per_text = [pieces(t) for t in texts]
    lengths = [n for windows in per_text for _, n in windows]
    avg_len = (sum(lengths) / len(lengths)) if lengths and sum(lengths) else 1.0
    out = []
    for windows in per_text:
        best = 0.0
        for counts, n in windows:
            score = sum(
                w * saturation(counts[t], n, avg_len, k1, b) for t, w in idf.items() if counts[t]
            )
            best = max(best, score)
        out.append(best)
    return out


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
    kind: WindowKind = "sentences",
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    stored: Sequence[Sequence[Sequence[int]] | None] | None = None,
) -> list[tuple[int, float]]:
    """(candidate index, mixed score), best first; ties keep the engine's order. ``stored``:
    as ``best_window_scores``."""
    if len(texts) != len(block_scores):
        raise ValueError("one block score per text")
    window = (
        best_window_scores(texts, idf, kind=kind, k1=k1, b=b, stored=stored)
        if weight > 0
        else [0.0] * len(texts)
    )
    mixed = mix_scores(block_scores, window, weight)
    order = sorted(range(len(texts)), key=lambda i: (-mixed[i], i))
    return [(i, mixed[i]) for i in order]
