"""What the answering LLM reads: each passage quoted under its heading, as many as fit its
context, within a word budget, in score or story order.

Kept apart from ``answer.py`` (the engine) so the routed engine and the benchmarks that measure
what the model reads (``benchmarks/prompt_recall.py``) share exactly the engine's functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import NodeWithScore

from litrag.answering.answer_types import passage
from litrag.segment.quoting import quoted

PASSAGE_TAG = "passage"
CHARS_PER_TOKEN = 3.0  # conservative for English prose (Qwen / Llama tokenizers give ~4)


def chunk_heading(nws: NodeWithScore) -> str:
    """Where a block is from: the chapter and, when an LLM wrote it, the block's subtitle.

    The offline segmenter's subtitles are salient-term lists ("Yeehats, Dog: wolves, pack,
    hunters"): useful to a reader scanning citations, but a small model copies their words into
    answers, so the prompt leaves them out.
    """
    m = nws.node.metadata
    subtitle = m.get("subtitle") if m.get("segmenter") != "offline" else None
    return " - ".join(str(x) for x in (m.get("chapter_title"), subtitle) if x)


def format_chunk(nws: NodeWithScore, text: str | None = None, max_chars: int | None = None) -> str:
    """One passage of the references: the block (or ``text``) as quoted data in a
    ``<passage from="heading">`` tag, its body cut to ``max_chars`` (marked ``[...]``)."""
    body = passage(nws) if text is None else text
    if max_chars is not None and len(body) > max_chars:
        body = body[:max_chars] + " [...]"
    return quoted(PASSAGE_TAG, body, **{"from": chunk_heading(nws)})


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1


def fit_to_context(
    nodes: Sequence[NodeWithScore], budget_tokens: int, texts: Sequence[str] | None = None
) -> list[tuple[NodeWithScore, str]]:
    """Blocks (best first) with their chunk text, as many as fit ``budget_tokens``.

    ``texts`` replaces each block's passage in its chunk (focused excerpts). The first block is
    always kept (cut if it alone is too long); later ones that do not fit are dropped, so the
    sources are exactly what the LLM read.
    """
    out: list[tuple[NodeWithScore, str]] = []
    used = 0
    for i, nws in enumerate(nodes):
        chunk = format_chunk(nws, None if texts is None else texts[i])
        cost = estimate_tokens(chunk) + 2
        if used + cost > budget_tokens:
            if out:
                break
            keep = max(int((budget_tokens - 2) * CHARS_PER_TOKEN), 200)
            chunk = format_chunk(nws, None if texts is None else texts[i], max_chars=keep)
            cost = budget_tokens
        out.append((nws, chunk))
        used += cost
    return out


def within_words(
    fitted: Sequence[tuple[NodeWithScore, str]], words: int
) -> list[tuple[NodeWithScore, str]]:
    """The leading blocks of ``fitted`` (best first) whose chunks hold ``words`` words in all;
    the first always. 0: all of them. The sources are exactly what the LLM read."""
    if words <= 0:
        return list(fitted)
    out: list[tuple[NodeWithScore, str]] = []
    used = 0
    for nws, chunk in fitted:
        cost = len(chunk.split())
        if out and used + cost > words:
            break
        out.append((nws, chunk))
        used += cost
    return out


def in_story_order(fitted: list[tuple[NodeWithScore, str]]) -> list[tuple[NodeWithScore, str]]:
    """The same blocks in reading order: by book (in order of each book's best block), then
    chapter and first sentence.

    Why: a novel's events depend on their order ("last master", "in the end"), and a model that
    reads the passages as the story tells them need not reconstruct it from score order
    (order-preserving RAG, Yu et al. 2024, found the same for long documents).
    """
    first_seen: dict[str, int] = {}
    for nws, _ in fitted:
        first_seen.setdefault(str(nws.node.metadata.get("book_id", "")), len(first_seen))

    def key(item: tuple[NodeWithScore, str]) -> tuple[int, int, int]:
        m = item[0].node.metadata
        return (
            first_seen[str(m.get("book_id", ""))],
            int(m.get("chapter_index", 0)),
            int(m.get("sentence_from", 0)),
        )

    return sorted(fitted, key=key)
