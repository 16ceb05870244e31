"""A plot block as several dense vectors, one per window of a few consecutive sentences.

The store keeps them as a multivector and scores a block by its best window (MaxSim). The
windows are cut here, beside the store that holds them; the model that embeds them is passed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from litrag.segment.sentences import sentence_windows


class SentenceWindowEncoder:
    """A block as several dense vectors: one per window of a few consecutive sentences.

    One vector per block mean-pools a whole plot block, and a question about one detail in it
    (a sum of money, a name) lands far from that average. Stored as a Qdrant multivector, a
    block scores by its best window (MaxSim), so a detail is found at sentence granularity while
    the block stays the unit that is cited and read.

    Callable as a store's ``window_doc_fn``: ``texts -> one list of vectors per text``.
    ``embed`` embeds a list of texts, e.g. ``embed_model.get_text_embedding_batch``.
    """

    def __init__(
        self,
        embed: Callable[[list[str]], Sequence[Sequence[float]]],
        size: int = 3,
        stride: int = 2,
    ) -> None:
        if size < 1 or stride < 1:
            raise ValueError("window size and stride must be >= 1")
        self.embed = embed
        self.size = size
        self.stride = stride
        self.seconds = 0.0  # spent embedding windows, for an ingest's per-stage figures

    def windows(self, text: str) -> list[str]:
        """Windows of ``size`` sentences every ``stride``; the last one always ends the text."""
        return sentence_windows(text, self.size, self.stride)

    def describe(self) -> str:
        return f"each chunk's {self.size}-sentence windows (stride {self.stride}), MaxSim"

    def __call__(self, texts: Sequence[str]) -> list[Sequence[Sequence[float]]]:
        t0 = time.perf_counter()
        per_text = [self.windows(t) for t in texts]
        flat = [w for ws in per_text for w in ws]
        vecs = list(self.embed(flat)) if flat else []  # the store converts to floats once
        self.seconds += time.perf_counter() - t0
        out, at = [], 0
        for ws in per_text:
            out.append(vecs[at : at + len(ws)])
            at += len(ws)
        return out
