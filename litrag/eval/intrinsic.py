"""Intrinsic boundary quality: how similar the sentences on either side of each cut are.

The LitSeg paper (Table 3) scores a segmentation without questions: for every boundary between
two consecutive chunks of the same chapter, the cosine similarity of the last sentence before it
and the first sentence after it, averaged. A cut between two unrelated sentences (a scene change)
scores low; a cut through a continuing exchange scores high, so **lower is better**.

The sentences are taken from the chunks' own text (``split_sentences``), so a chunker that cuts
mid-sentence is judged on the fragments it produced, and an overlapping chunker on the sentence
its next chunk really starts with. Vectors are sentence embeddings of the named model (the
packaged MiniLM in the harness); always report the model beside the number.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode

from litrag.segment.sentences import split_sentences


@dataclass(frozen=True)
class BoundaryStats:
    """Mean (and spread) of the boundary cosine over all boundaries, and the model used."""

    boundaries: int
    mean_cosine: float
    median_cosine: float
    stdev_cosine: float
    model: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _edge_sentences(text: str) -> tuple[str, str] | None:
    """(first, last) sentence of a chunk, each on one line; None for a chunk with no sentence."""
    sents = split_sentences(text)
    if not sents:
        stripped = " ".join(text.split())
        return (stripped, stripped) if stripped else None
    return sents[0].flat, sents[-1].flat


def boundary_pairs(nodes: Sequence[BaseNode]) -> list[tuple[str, str]]:
    """(last sentence before, first sentence after) for each cut between consecutive nodes of
    the same source document, in the order given (reading order, as parsers emit them)."""
    pairs: list[tuple[str, str]] = []
    prev_doc: str | None = None
    prev_last: str | None = None
    for node in nodes:
        edges = _edge_sentences(node.get_content(metadata_mode=MetadataMode.NONE))
        doc = node.ref_doc_id
        if edges is None:
            continue
        if prev_last is not None and doc is not None and doc == prev_doc:
            pairs.append((prev_last, edges[0]))
        prev_doc, prev_last = doc, edges[1]
    return pairs


def pair_cosines(
    pairs: Sequence[tuple[str, str]], embed: Callable[[Sequence[str]], np.ndarray]
) -> list[float]:
    """Cosine of each pair; ``embed`` maps texts to vectors (normalised here, to be safe)."""
    if not pairs:
        return []
    uniq = list(dict.fromkeys(s for pair in pairs for s in pair))
    vecs = np.asarray(embed(uniq), dtype=np.float64)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
    row = {s: i for i, s in enumerate(uniq)}
    return [float(vecs[row[a]] @ vecs[row[b]]) for a, b in pairs]


def boundary_similarity(nodes: Sequence[BaseNode], embedder: Any) -> BoundaryStats:
    """Boundary cosine stats of ``nodes`` with ``embedder`` (a ``CachedEmbedder``, or any object
    with ``embed(texts)`` and ``model_key``)."""
    cos = pair_cosines(boundary_pairs(nodes), embedder.embed)
    return BoundaryStats(
        boundaries=len(cos),
        mean_cosine=statistics.fmean(cos) if cos else float("nan"),
        median_cosine=statistics.median(cos) if cos else float("nan"),
        stdev_cosine=statistics.pstdev(cos) if cos else float("nan"),
        model=str(getattr(embedder, "model_key", type(embedder).__name__)),
    )
