"""Gold-span relevance: a chunk is relevant when it contains the span after normalisation.

GutenQA's spans come from other editions than the raw Gutenberg files: typographic quotes where
the file has ``'`` and ``"``, ``—`` where it has ``--``, no ``_italics_`` marks. Normalising both
sides the same way makes "contains" robust to those differences and to line wrapping, while
never matching text that differs in words. Quote marks all fold to one form (single vs double
dialogue quotes differ between British and American editions); dashes fold to one form with
single spaces around them (``word--word`` vs ``word — word``); ``_`` is dropped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

# Every quote or apostrophe form folds to "'" (after NFKC, which already maps a few).
_QUOTES = "'\"‘’‚‛“”„‟`´′″‴‵‶‷‹›«»〝〞〟＂＇"
_QUOTE_TABLE = str.maketrans(dict.fromkeys(_QUOTES, "'") | {"_": None})
# Runs of dashes (ASCII double hyphen or longer, en/em/figure dashes, horizontal bar, minus).
_DASH = re.compile(r"\s*(?:-{2,}|[‒–—―−⸺⸻])+\s*")
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """The matching form of ``text``: NFKC, lower case, folded quotes and dashes, no ``_``."""
    # fold quotes before NFKC too, which would turn ″ into two primes
    text = unicodedata.normalize("NFKC", text.translate(_QUOTE_TABLE))
    text = text.lower().translate(_QUOTE_TABLE)
    text = _DASH.sub(" — ", text)
    return _SPACE.sub(" ", text).strip()


def contains_span(chunk_text: str, span: str) -> bool:
    """Whether ``chunk_text`` holds the whole gold ``span`` (both normalised)."""
    needle = normalize(span)
    return bool(needle) and needle in normalize(chunk_text)


def relevance(normalized_chunks: Sequence[str], spans: Iterable[str]) -> list[list[bool]]:
    """Chunk x span containment, for chunks already passed through ``normalize`` (done once)."""
    needles = [normalize(s) for s in spans]
    return [[bool(n) and n in c for n in needles] for c in normalized_chunks]
