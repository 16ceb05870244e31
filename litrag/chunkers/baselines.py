"""The LitSeg paper's reference chunkers, each a LlamaIndex ``NodeParser``.

Configured as in the LitSeg paper (Appendix G, Table 19):

- ``token_chunker``: LlamaIndex ``TokenTextSplitter``, 200 tokens, 40 overlap (default tokenizer).
- ``RecursiveCharacterNodeParser``: LangChain's ``RecursiveCharacterTextSplitter`` algorithm
  (separators kept at the start of the next piece, ``len`` as length, whitespace stripped),
  1,000 characters, 200 overlap, the paper's separators: paragraph break, newline, period, comma,
  semicolon, colon, space. Re-implemented on offsets so LangChain is not a dependency.
- ``sentence_chunker``: LlamaIndex ``SentenceSplitter``, 256 tokens, 32 overlap.
- ``paragraph_chunker``: blank-line paragraphs merged greedily up to 200 words.
- ``DynamicMergeNodeParser``: any chunker's neighbours merged while |C_i| + |C_i+1| <= 200 words.
- ``semantic_chunker``: LlamaIndex ``SemanticSplitterNodeParser`` (LangChain's SemanticChunker
  idea, which the paper cites): one-sentence buffer, breakpoints where the cosine distance of
  neighbouring sentence groups exceeds its 95th percentile within the document (both libraries'
  defaults; the paper names no other setting). Needs an embedding model, any LlamaIndex
  ``BaseEmbedding`` (``litrag eval retrieval`` passes its cached MiniLM).

Every node's text is an exact slice of its document with ``start_char_idx``/``end_char_idx`` set
(LlamaIndex's own post-processing re-finds offsets with ``str.find`` and, for the metadata-aware
splitters, shrinks chunks by the metadata's token count; these wrappers avoid both, so "200
tokens" means 200 tokens of text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.node_parser import (
    SemanticSplitterNodeParser,
    SentenceSplitter,
    TokenTextSplitter,
)
from llama_index.core.node_parser.interface import NodeParser, TextSplitter
from llama_index.core.schema import BaseNode, MetadataMode

from litrag.chunkers.base import (
    ExactOffsetsNodeParser,
    Span,
    SpanNodeParser,
    slice_node,
    strip_span,
)

# Table 19: "paragraph break, newline, period, comma, semicolon, colon, and space".
PAPER_SEPARATORS = ("\n\n", "\n", ".", ",", ";", ":", " ")
MERGE_WORDS = 200
SEMANTIC_PERCENTILE = 95
SEMANTIC_BUFFER = 1
_BLANK_RUN = re.compile(r"\n[ \t\f\v]*\n\s*")


def word_count(text: str) -> int:
    return len(text.split())


class TextSplitterNodeParser(SpanNodeParser):
    """Any LlamaIndex ``TextSplitter`` run on the plain text, its chunks located in the source.

    Chunks are located left to right, each at or after the previous chunk's start (overlaps are
    allowed); a chunk that is not a verbatim slice raises, since offsets would then be guesses.
    """

    splitter: TextSplitter = Field(description="The wrapped splitter; its split_text is used.")

    @classmethod
    def class_name(cls) -> str:
        return "TextSplitterNodeParser"

    def split_spans(self, text: str) -> list[Span]:
        return _locate(text, self.splitter.split_text(text), type(self.splitter).__name__)


def _locate(text: str, chunks: Sequence[str], who: str, strip: bool = False) -> list[Span]:
    """Spans of ``chunks`` in ``text``, each found at or after the previous one's start."""
    spans: list[Span] = []
    cursor = 0
    for chunk in chunks:
        if not chunk.strip():
            continue
        at = text.find(chunk, cursor)
        if at < 0:
            raise ValueError(f"{who} chunk not found verbatim")
        span = strip_span(text, at, at + len(chunk)) if strip else (at, at + len(chunk))
        if span is not None:
            spans.append(span)
        cursor = at + 1
    return spans


def token_chunker(
    chunk_size: int = 200, chunk_overlap: int = 40, tokenizer: Callable[[str], list] | None = None
) -> TextSplitterNodeParser:
    """Token windows (paper: 200/40); ``tokenizer`` defaults to LlamaIndex's (tiktoken)."""
    splitter = TokenTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenizer
    )
    return TextSplitterNodeParser(splitter=splitter)


def sentence_chunker(chunk_size: int = 256, chunk_overlap: int = 32) -> TextSplitterNodeParser:
    """LlamaIndex's ``SentenceSplitter`` (the paper's 256/32)."""
    return TextSplitterNodeParser(
        splitter=SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    )


class RecursiveCharacterNodeParser(SpanNodeParser):
    """LangChain's recursive character splitter (separators kept at the start), on offsets."""

    chunk_size: int = Field(default=1000, gt=0, description="Max characters per chunk.")
    chunk_overlap: int = Field(default=200, ge=0, description="Characters of overlap.")
    separators: list[str] = Field(
        default_factory=lambda: list(PAPER_SEPARATORS),
        description="Tried in order; '' splits into characters.",
    )

    @classmethod
    def class_name(cls) -> str:
        return "RecursiveCharacterNodeParser"

    def split_spans(self, text: str) -> list[Span]:
        return self._split(text, 0, len(text), list(self.separators))

    def _split(self, text: str, start: int, end: int, separators: list[str]) -> list[Span]:
        piece = text[start:end]
        separator, rest = separators[-1], []
        for i, sep in enumerate(separators):
            if sep == "":
                separator = ""
                break
            if sep in piece:
                separator, rest = sep, separators[i + 1 :]
                break
        if separator:  # cut before each occurrence: the separator starts the next piece
            cuts = [start, *(start + m.start() for m in re.finditer(re.escape(separator), piece))]
            cuts.append(end)
        else:
            cuts = list(range(start, end + 1))
        splits = [(a, b) for a, b in pairwise(cuts) if b > a]
        out: list[Span] = []
        good: list[Span] = []
        for a, b in splits:
            if b - a < self.chunk_size:
                good.append((a, b))
                continue
            if good:
                out.extend(self._merge(text, good))
                good = []
            out.extend(self._split(text, a, b, rest) if rest else [(a, b)])
        if good:
            out.extend(self._merge(text, good))
        return out

    def _merge(self, text: str, splits: list[Span]) -> list[Span]:
        """LangChain's ``_merge_splits`` for contiguous splits joined by an empty separator."""
        out: list[Span] = []
        current: list[Span] = []
        total = 0
        for a, b in splits:
            n = b - a
            if total + n > self.chunk_size and current:
                if (s := strip_span(text, current[0][0], current[-1][1])) is not None:
                    out.append(s)
                while total > self.chunk_overlap or (total + n > self.chunk_size and total > 0):
                    total -= current[0][1] - current[0][0]
                    current = current[1:]
            current.append((a, b))
            total += n
        if current and (s := strip_span(text, current[0][0], current[-1][1])) is not None:
            out.append(s)
        return out


class ParagraphNodeParser(SpanNodeParser):
    """One node per blank-line-separated paragraph (wrap in ``DynamicMergeNodeParser``)."""

    @classmethod
    def class_name(cls) -> str:
        return "ParagraphNodeParser"

    def split_spans(self, text: str) -> list[Span]:
        cuts = [(m.start(), m.end()) for m in _BLANK_RUN.finditer(text)]
        bounds = zip([0] + [e for _, e in cuts], [s for s, _ in cuts] + [len(text)], strict=True)
        return [s for a, b in bounds if (s := strip_span(text, a, b)) is not None]


class DynamicMergeNodeParser(ExactOffsetsNodeParser):
    """Greedily merge neighbouring nodes of ``base`` (same document) while the words sum <= max.

    The paper's rule: C_i and C_i+1 merge when |C_i| + |C_i+1| <= 200 words, applied left to
    right with C_i the running merge. Lengths add the parts' word counts, so overlapping parts
    count their overlap twice. A merged node is the document slice from the first part's start
    to the last part's end (overlaps appear once) with the document's metadata; a node that
    merges with nothing is passed through unchanged.
    """

    base: NodeParser = Field(description="The chunker whose nodes are merged.")
    max_words: int = Field(default=MERGE_WORDS, gt=0, description="Word budget of a merge.")

    @classmethod
    def class_name(cls) -> str:
        return "DynamicMergeNodeParser"

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        docs = {d.node_id: d for d in nodes}
        parts = self.base.get_nodes_from_documents(list(nodes), show_progress=show_progress)
        out: list[BaseNode] = []
        group: list[BaseNode] = []
        words = 0
        for node in parts:
            n = word_count(node.get_content(metadata_mode=MetadataMode.NONE))
            if group and node.ref_doc_id == group[0].ref_doc_id and words + n <= self.max_words:
                group.append(node)
                words += n
                continue
            if group:
                out.append(self._merged(group, docs, len(out)))
            group, words = [node], n
        if group:
            out.append(self._merged(group, docs, len(out)))
        return out

    def _merged(self, group: list[BaseNode], docs: dict[str, BaseNode], i: int) -> BaseNode:
        if len(group) == 1:
            return group[0]
        doc = docs.get(group[0].ref_doc_id or "")
        if doc is None:
            raise ValueError("merged nodes must come from the documents given to the parser")
        source = group[0].source_node or doc.as_related_node_info()
        starts = [getattr(n, "start_char_idx", None) for n in group]
        ends = [getattr(n, "end_char_idx", None) for n in group]
        extra = {"merged_nodes": len(group)}
        if None in starts or None in ends:  # no offsets: join the texts, offsets unknown
            text = "\n\n".join(n.get_content(metadata_mode=MetadataMode.NONE) for n in group)
            return slice_node(self, doc, source, text, None, i, **extra)
        text = doc.get_content(metadata_mode=MetadataMode.NONE)
        span = (min(s for s in starts if s is not None), max(e for e in ends if e is not None))
        return slice_node(self, doc, source, text, span, i, **extra)


class SemanticNodeParser(SpanNodeParser):
    """LlamaIndex's ``SemanticSplitterNodeParser`` with exact, whitespace-trimmed offsets.

    Its own steps run unchanged (sentence split, buffered sentence groups, one embedding per
    group, percentile breakpoints); only the node building differs, because the stock one
    re-finds offsets with ``str.find`` and keeps each chunk's trailing whitespace. A chunk is a
    run of consecutive sentences, so it is located verbatim, left to right.
    """

    splitter: SemanticSplitterNodeParser = Field(
        description="The configured LlamaIndex semantic splitter (embedding model, buffer, "
        "breakpoint percentile)."
    )

    @classmethod
    def class_name(cls) -> str:
        return "SemanticNodeParser"

    def split_spans(self, text: str) -> list[Span]:
        s = self.splitter
        groups = s._build_sentence_groups(s.sentence_splitter(text))
        if not groups:
            return []
        vecs = s.embed_model.get_text_embedding_batch([g["combined_sentence"] for g in groups])
        for group, vec in zip(groups, vecs, strict=True):
            group["combined_sentence_embedding"] = vec
        chunks = s._build_node_chunks(
            groups, s._calculate_distances_between_sentence_groups(groups)
        )
        return _locate(text, chunks, "SemanticSplitterNodeParser", strip=True)


def semantic_chunker(
    embed_model: BaseEmbedding,
    breakpoint_percentile_threshold: int = SEMANTIC_PERCENTILE,
    buffer_size: int = SEMANTIC_BUFFER,
) -> SemanticNodeParser:
    """The semantic baseline over ``embed_model`` (``litrag eval`` passes the packaged MiniLM)."""
    splitter = SemanticSplitterNodeParser.from_defaults(
        embed_model=embed_model,
        breakpoint_percentile_threshold=breakpoint_percentile_threshold,
        buffer_size=buffer_size,
    )
    return SemanticNodeParser(splitter=splitter)


def paragraph_chunker(max_words: int = MERGE_WORDS) -> DynamicMergeNodeParser:
    """Paragraphs merged greedily up to ``max_words`` (the strongest BM25 baseline on the six
    books)."""
    return DynamicMergeNodeParser(base=ParagraphNodeParser(), max_words=max_words)


def dynamic_merge(base: NodeParser, max_words: int = MERGE_WORDS) -> DynamicMergeNodeParser:
    """``base`` followed by the paper's 200-word dynamic merge."""
    return DynamicMergeNodeParser(base=base, max_words=max_words)


# The paper's configurations by name (report labels), each built fresh by calling it.
BASELINES: dict[str, Callable[[], NodeParser]] = {
    "token 200/40": token_chunker,
    "recursive 1000/200": RecursiveCharacterNodeParser,
    "sentence 256/32": sentence_chunker,
    "paragraphs ≤200w": paragraph_chunker,
}
