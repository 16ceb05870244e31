"""The LitSeg paper's perplexity chunker (Appendix G; Zhao et al., 2024) as a ``NodeParser``.

Every sentence's mean token loss given the text before it (up to ``context_tokens``) makes a
curve; a sentence that is a local minimum of it, with a drop of at least ``threshold`` (paper:
tau = 0.5) on one side, is a boundary, shared by the chunks on both sides (the paper's
one-sentence overlap). Token log-probabilities come from llama.cpp's Python API
(``LlamaCppTokenLogprobs``; llama-cpp-python comes with the ``local-llm`` extra and is imported
only when a model loads): llama-cpp-python's server returns echoed prompt log-probabilities
shifted by one token for models without a BOS token (Qwen2.5), so it cannot be used for this.
``from_model_path`` runs it in a child process (``ChildTokenLogprobs``): a fault in llama.cpp (an
illegal instruction, memory) then ends the child with a clear error, not the caller.

Units are the sentences of ``litrag.segment.sentences``; every node is an exact slice of its
document. Losses are cached (SQLite, ``cache_dir``) so reruns replay.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, MetadataMode

from litrag.chunkers.base import ExactOffsetsNodeParser, slice_node
from litrag.models.llama_logprobs import ChildTokenLogprobs, LlamaCppTokenLogprobs
from litrag.segment.cache import ResponseCache
from litrag.segment.sentences import Sentence, split_sentences

PERPLEXITY_THRESHOLD = 0.5

# A scorer maps a text to (char offset where a token starts, log p(token | text before)) for every
# token but the first.
TokenLogprobs = Callable[[str], list[tuple[int, float]]]


def sentence_losses(
    text: str,
    sentences: Sequence[Sentence],
    score: TokenLogprobs,
    count_tokens: Callable[[str], int],
    window_tokens: int,
    context_tokens: int,
) -> list[float]:
    """Mean token loss of each sentence given the text before it (at most ``context_tokens`` of
    context; windows of at most ``window_tokens``)."""
    losses: list[float] = [math.nan] * len(sentences)
    sizes = [count_tokens(text[s.start : s.end]) + 1 for s in sentences]
    first = 0
    while first < len(sentences):
        ctx = first  # extend the context backwards
        used = 0
        while ctx > 0 and used + sizes[ctx - 1] <= context_tokens:
            ctx -= 1
            used += sizes[ctx]
        last = first  # and the scored sentences forwards
        total = used
        while last < len(sentences) and (last == first or total + sizes[last] <= window_tokens):
            total += sizes[last]
            last += 1
        base = sentences[ctx].start
        pairs = score(text[base : sentences[last - 1].end])
        sums = [0.0] * (last - first)
        counts = [0] * (last - first)
        k = ctx  # a token belongs to the sentence it ends in (a leading space joins the next)
        for start, lp in pairs:
            at = base + start
            while k < last - 1 and at >= sentences[k].end:
                k += 1
            if k >= first:
                sums[k - first] -= lp
                counts[k - first] += 1
        for i in range(first, last):
            if counts[i - first]:
                losses[i] = sums[i - first] / counts[i - first]
        first = last
    return losses


def perplexity_boundaries(losses: Sequence[float], threshold: float) -> list[int]:
    """Indices i that are local minima with a drop of at least ``threshold`` on one side."""
    out = []
    for i in range(1, len(losses) - 1):
        a, b, c = losses[i - 1], losses[i], losses[i + 1]
        if any(math.isnan(x) for x in (a, b, c)):
            continue
        if b < a and b < c and (a - b >= threshold or c - b >= threshold):
            out.append(i)
    return out


class PerplexityNodeParser(ExactOffsetsNodeParser):
    """Chunks cut at sentences where an LLM's loss curve has a marked local minimum."""

    threshold: float = Field(
        default=PERPLEXITY_THRESHOLD, description="Minimum loss drop beside a boundary (tau)."
    )
    window_tokens: int = Field(
        default=1536, gt=64, description="Tokens per scoring window (context included)."
    )
    context_tokens: int = Field(
        default=256,
        ge=0,
        description="Tokens of preceding text given to a window's first "
        "sentences; not scored again.",
    )
    scorer_name: str = Field(default="", description="Which model scored (a cache key).")
    cache_dir: str | None = Field(
        default=None, description="Folder of the loss cache (SQLite); None disables it."
    )

    _scorer: TokenLogprobs | None = PrivateAttr(default=None)
    _make_scorer: Callable[[], Any] | None = PrivateAttr(default=None)
    _count: Callable[[str], int] | None = PrivateAttr(default=None)

    def __init__(
        self,
        scorer: TokenLogprobs | Callable[[], Any],
        scorer_name: str,
        lazy: bool = False,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        """``scorer`` is a ``TokenLogprobs`` (or, with ``lazy``, a factory of one, built only
        when a document is not in the cache). It should offer ``tokens(text)``."""
        if kwargs.get("cache_dir") is not None:
            kwargs["cache_dir"] = str(kwargs["cache_dir"])
        super().__init__(
            scorer_name=scorer_name,
            callback_manager=callback_manager or CallbackManager([]),
            **kwargs,
        )
        if lazy:
            self._make_scorer = scorer
        else:
            self._scorer = scorer

    @classmethod
    def class_name(cls) -> str:
        return "PerplexityNodeParser"

    @classmethod
    def from_model_path(
        cls, model_path: str | Path, in_process: bool = False, **kwargs: Any
    ) -> PerplexityNodeParser:
        """The llama.cpp scorer on a GGUF file, loaded on first need, in a child process
        (``in_process=True``: in this one, where a llama.cpp fault ends the caller too)."""
        n_ctx = kwargs.get("window_tokens", 1536) + 256
        scorer = LlamaCppTokenLogprobs if in_process else ChildTokenLogprobs
        return cls(
            lambda: scorer(model_path, n_ctx=n_ctx),
            scorer_name=f"llama.cpp:{Path(model_path).name}",
            lazy=True,
            **kwargs,
        )

    def _get_scorer(self) -> Any:
        if self._scorer is None:
            assert self._make_scorer is not None
            self._scorer = self._make_scorer()
        return self._scorer

    def losses(self, text: str, sentences: Sequence[Sentence]) -> list[float]:
        """Per-sentence losses, from the cache when this text was scored before."""
        cache = ResponseCache(Path(self.cache_dir) / "logprobs.sqlite") if self.cache_dir else None
        key = ResponseCache.key(
            "perplexity", self.scorer_name, self.window_tokens, self.context_tokens, text
        )
        try:
            if cache is not None and (hit := cache.get(key)) is not None:
                return [math.nan if x is None else x for x in hit["losses"]]
            scorer = self._get_scorer()
            count = getattr(scorer, "tokens", None)
            counter = (lambda t: len(count(t))) if count else (lambda t: len(t.split()) * 2)
            out = sentence_losses(
                text, sentences, scorer, counter, self.window_tokens, self.context_tokens
            )
            if cache is not None:
                cache.put(key, {"losses": [None if math.isnan(x) else x for x in out]})
            return out
        finally:
            if cache is not None:
                cache.close()

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        out: list[BaseNode] = []
        for doc in nodes:
            text = doc.get_content(metadata_mode=MetadataMode.NONE)
            sentences = split_sentences(text)
            if not sentences:
                continue
            cuts = perplexity_boundaries(self.losses(text, sentences), self.threshold)
            source = doc.as_related_node_info()
            # the minimum sentence ends one chunk and starts the next (the paper's overlap)
            starts = [0, *cuts]
            ends = [*cuts, len(sentences) - 1]
            for a, b in zip(starts, ends, strict=True):
                span = (sentences[a].start, sentences[b].end)
                out.append(slice_node(self, doc, source, text, span, len(out), sentence_from=a + 1))
        return out
