"""Unit preparation: a unit longer than the word budget is split by paragraphs, then sentences.

Each part is filled greedily with whole paragraphs while under the budget; a paragraph that alone
exceeds it is split the same way by sentences. Parts are contiguous runs of sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from litrag.segment.sentences import Sentence


def split_unit(sentences: Sequence[Sentence], max_words: int) -> list[list[Sentence]]:
    """Contiguous parts of ``sentences``, each at most ``max_words`` words where possible."""
    if max_words <= 0:
        raise ValueError("max_words must be positive")
    if sum(s.words for s in sentences) <= max_words:
        return [list(sentences)] if sentences else []
    paragraphs = [list(g) for _, g in groupby(sentences, key=lambda s: s.paragraph)]
    pieces: list[list[Sentence]] = []
    for para in paragraphs:
        if sum(s.words for s in para) <= max_words:
            pieces.append(para)
        else:
            pieces.extend([s] for s in para)
    parts: list[list[Sentence]] = []
    current: list[Sentence] = []
    size = 0
    for piece in pieces:
        words = sum(s.words for s in piece)
        if current and size + words > max_words:
            parts.append(current)
            current, size = [], 0
        current.extend(piece)
        size += words
    if current:
        parts.append(current)
    return parts
