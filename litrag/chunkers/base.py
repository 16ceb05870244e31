"""What every chunker here shares: nodes that are exact slices of their document.

LlamaIndex's ``NodeParser`` post-processing re-finds each node's offsets with ``str.find``; the
chunkers here know their offsets, so they build nodes with ``slice_node`` and keep them through
``ExactOffsetsNodeParser``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.utils import get_tqdm_iterable

from litrag.segment.sync import run_sync as run_sync  # the chunkers take it from here

Span = tuple[int, int]


def strip_span(text: str, start: int, end: int) -> Span | None:
    """The span without its outer whitespace; None when nothing else is left."""
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return None
    lead = len(piece) - len(piece.lstrip())
    return start + lead, start + lead + len(stripped)


def slice_node(
    parser: NodeParser,
    doc: BaseNode,
    source: RelatedNodeInfo,
    text: str,
    span: Span | None,
    i: int,
    **extra: Any,
) -> TextNode:
    """A node for ``text[span]`` (or all of ``text``, offsets unknown, when ``span`` is None)
    with the document's metadata and metadata settings."""
    start, end = span if span is not None else (None, None)
    return TextNode(
        id_=parser.id_func(i, doc),
        text=text[start:end],
        start_char_idx=start,
        end_char_idx=end,
        metadata={**doc.metadata, **extra},
        excluded_embed_metadata_keys=[*doc.excluded_embed_metadata_keys, *extra],
        excluded_llm_metadata_keys=[*doc.excluded_llm_metadata_keys, *extra],
        metadata_separator=doc.metadata_separator,
        metadata_template=doc.metadata_template,
        relationships={NodeRelationship.SOURCE: source},
    )


class ExactOffsetsNodeParser(NodeParser):
    """Keeps the offsets a parser set instead of the base class's ``str.find`` guesses."""

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        spans = [
            (getattr(n, "start_char_idx", None), getattr(n, "end_char_idx", None)) for n in nodes
        ]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, (a, b) in zip(nodes, spans, strict=True):
            if isinstance(node, TextNode):
                node.start_char_idx, node.end_char_idx = a, b
        return nodes


class SpanNodeParser(ExactOffsetsNodeParser):
    """A chunker defined by the [start, end) spans it cuts from each document's text."""

    def split_spans(self, text: str) -> list[Span]:
        raise NotImplementedError

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        out: list[BaseNode] = []
        for doc in get_tqdm_iterable(nodes, show_progress, "Chunking"):
            text = doc.get_content(metadata_mode=MetadataMode.NONE)
            source = doc.as_related_node_info()  # hashes the document: once per document
            for span in self.split_spans(text):
                out.append(slice_node(self, doc, source, text, span, len(out)))
        return out
