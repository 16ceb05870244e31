"""Reconstruction helpers: the size cap, and the text views of a block.

The cap is counted in tokens of the embedding model (any ``str -> list`` tokenizer), so no block
is silently truncated when embedded. An over-long block is cut at its lowest-cost interior
boundary (the weakest cohesion, preferring paragraph starts), recursively.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from litrag.segment.sentences import Sentence
from litrag.segment.validation import Block

CONTEXT_GAP = " [...] "


def enforce_cap(
    blocks: Sequence[Block],
    sentence_tokens: Sequence[int],
    cut_cost: np.ndarray,
    cap: int,
    overhead: int = 0,
) -> tuple[list[Block], int]:
    """Blocks that each fit in ``cap`` tokens (main text + context + ``overhead``).

    ``sentence_tokens[i]`` is the token count of sentence ``i + 1``; ``cut_cost[b]`` the cost of a
    cut after sentence ``b + 1``. Returns the blocks and how many cuts the cap forced.
    """
    out: list[Block] = []
    forced = 0

    def size(a: int, b: int) -> int:
        return sum(sentence_tokens[a - 1 : b])

    def fit(block: Block) -> None:
        nonlocal forced
        main = size(block.start, block.end) + overhead
        ctx = list(block.context)
        while ctx and main + sum(sentence_tokens[c - 1] for c in ctx) > cap:
            # drop the context sentence farthest from the block first
            ctx.remove(max(ctx, key=lambda c: min(abs(c - block.start), abs(c - block.end))))
        if main <= cap or block.start == block.end:
            out.append(Block(block.start, block.end, block.subtitle, tuple(ctx)))
            return
        forced += 1
        lo, hi = block.start, block.end - 1  # candidate cuts after sentence lo..hi
        total = main - overhead
        # keep both sides at least a fifth of the block where the block allows it
        left = np.cumsum(sentence_tokens[block.start - 1 : block.end - 1])
        ok = [b for b in range(lo, hi + 1) if 0.2 * total <= left[b - lo] <= 0.8 * total]
        candidates = ok or list(range(lo, hi + 1))
        cut = min(candidates, key=lambda b: float(cut_cost[b - 1]))
        fit(Block(block.start, cut, block.subtitle, block.context))
        fit(Block(cut + 1, block.end, block.subtitle, block.context))

    for block in blocks:
        fit(block)
    return out, forced


def context_views(sentences: Sequence[Sentence], block: Block) -> tuple[str, str]:
    """The context sentences placed before and after the main text, by their position."""
    before = [sentences[c - 1].flat for c in block.context if c < block.start]
    after = [sentences[c - 1].flat for c in block.context if c > block.end]
    return CONTEXT_GAP.join(before), CONTEXT_GAP.join(after)
