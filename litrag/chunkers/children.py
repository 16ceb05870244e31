"""Small-to-big: rank a book's blocks through their paragraph children.

The blocks (LitSeg's narrative units, or any chunker's) stay what is returned and cited; what
is scored are the *children*: exactly the paragraph chunker's pieces of each chapter
(``litrag.chunkers.baselines.paragraph_chunker``, blank-line paragraphs merged up to 200 words),
the same texts and the same index statistics a paragraph index has. Each child is mapped to the
one block holding most of its characters in the chapter, and a ranked child list collapses to
blocks in the order of each block's best child (``collapse``).

Aligned blocks (``align_blocks``, ``aligned_book``): each block is redefined as the union of its
children (its edges snap to child edges, moving by less than one child; a block left with no
child is absorbed by the neighbours that took its text). Collapse then only drops duplicates,
so the block holding a gold paragraph ranks no lower than that paragraph ranks among
paragraphs, under the same scorer, and it holds the paragraph whole. (A child over two blocks
ranking both, the blocks left as chunked, lost to paragraphs and was deleted: docs/lab/,
"Small-to-big in the harness".)

Store-independent: children are plain ``TextNode``s and the map a dict, so any store (or the
in-memory ``BM25Index``) can score them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    TextNode,
    TransformComponent,
)

from litrag.chunkers.baselines import MERGE_WORDS, paragraph_chunker
from litrag.segment.sentences import Sentence, split_sentences

_CHILD_NAMESPACE = uuid.UUID("6d1f5c1e-8b0a-4d55-9f0e-2a7c3b9e4d10")
ParentsOf = Mapping[str, Sequence[str]]


def _span(node: BaseNode) -> tuple[int, int]:
    start = getattr(node, "start_char_idx", None)
    end = getattr(node, "end_char_idx", None)
    if start is None or end is None:
        raise ValueError(f"block {node.node_id} has no character offsets (start/end_char_idx)")
    return int(start), int(end)


def _overlaps(spans: Sequence[tuple[int, int, str]], a: int, b: int) -> list[tuple[int, str]]:
    """(characters shared, block id) of each block span overlapping ``[a, b)``, in story order."""
    return [(min(e, b) - max(s, a), bid) for s, e, bid in spans if s < b and a < e]


def child_id(chapter_id: str, start: int, end: int) -> str:
    """A stable id for the child ``[start, end)`` of a chapter: reruns upsert the same points."""
    return str(uuid.uuid5(_CHILD_NAMESPACE, f"{chapter_id}:{start}:{end}"))


def chapter_children(
    blocks: Sequence[BaseNode],
    chapter: BaseNode,
    *,
    max_words: int = MERGE_WORDS,
) -> tuple[list[TextNode], dict[str, list[str]]]:
    """The paragraph children of one chapter and each child's parent block.

    ``blocks`` are the chapter's blocks, exact slices of ``chapter``'s text with
    ``start_char_idx``/``end_char_idx`` set. The children are ``paragraph_chunker(max_words)``'s
    nodes of the chapter (the same text, offsets and metadata as a paragraph index holds), with
    ids from ``child_id``. A child's parent is the block holding most of its characters (the
    first on a tie); a child overlapping no block (text the blocks left out) is dropped.
    """
    spans = sorted(((*_span(b), b.node_id) for b in blocks), key=lambda s: (s[0], s[1]))
    nodes = paragraph_chunker(max_words).get_nodes_from_documents([chapter])
    children: list[TextNode] = []
    parents: dict[str, list[str]] = {}
    for node in nodes:
        if not isinstance(node, TextNode) or node.start_char_idx is None:
            raise ValueError("the paragraph chunker gave a child without offsets")
        a, b = node.start_char_idx, node.end_char_idx or node.start_char_idx
        over = _overlaps(spans, a, b)
        if not over:
            continue
        node.id_ = child_id(chapter.node_id, a, b)
        children.append(node)
        parents[node.node_id] = [max(over, key=lambda o: o[0])[1]]  # the first of equal overlaps
    return children, parents


def _by_chapter(
    blocks: Sequence[BaseNode], chapters: Sequence[BaseNode]
) -> dict[str, list[BaseNode]]:
    """Blocks by their chapter's node id (the chunkers' ``ref_doc_id``); a block of no given
    chapter is an error."""
    by_chapter: dict[str, list[BaseNode]] = {}
    for block in blocks:
        by_chapter.setdefault(block.ref_doc_id or "", []).append(block)
    known = {c.node_id for c in chapters}
    if stray := [k for k in by_chapter if k not in known]:
        raise ValueError(f"blocks whose source is none of the chapters: {stray[:3]}")
    return by_chapter


def book_children(
    blocks: Sequence[BaseNode],
    chapters: Sequence[BaseNode],
    *,
    max_words: int = MERGE_WORDS,
) -> tuple[list[TextNode], dict[str, list[str]]]:
    """``chapter_children`` over a whole book: blocks are matched to their chapter by
    ``ref_doc_id`` (the chunkers' source document); children come in story order."""
    by_chapter = _by_chapter(blocks, chapters)
    children: list[TextNode] = []
    parents: dict[str, list[str]] = {}
    for chapter in chapters:
        kids, par = chapter_children(
            by_chapter.get(chapter.node_id, []), chapter, max_words=max_words
        )
        children += kids
        parents.update(par)
    return children, parents


def collapse(ranked_children: Iterable[str], parents_of: ParentsOf) -> list[str]:
    """Parent ids in the order of each parent's best child (a child with several parents ranks
    them all, in the order given). Children absent from ``parents_of`` are skipped."""
    out: list[str] = []
    seen: set[str] = set()
    for child in ranked_children:
        for parent in parents_of.get(child, ()):
            if parent not in seen:
                seen.add(parent)
                out.append(parent)
    return out


def _sentence_range(sentences: Sequence[Sentence], start: int, end: int) -> tuple[int, int]:
    """1-based first and last of ``sentences`` overlapping ``[start, end)``."""
    over = [s.index for s in sentences if s.start < end and start < s.end]
    return (over[0], over[-1]) if over else (0, 0)


def _relink(blocks: Sequence[BaseNode], gone: Mapping[str, BaseNode]) -> None:
    """Point each block's PREV/NEXT past the blocks in ``gone`` (absorbed by a neighbour)."""
    for block in blocks:
        for rel in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT):
            info = block.relationships.get(rel)
            seen: set[str] = set()
            while info is not None and info.node_id in gone and info.node_id not in seen:
                seen.add(info.node_id)
                info = gone[info.node_id].relationships.get(rel)
            if info is None:
                block.relationships.pop(rel, None)
            else:
                block.relationships[rel] = info


def align_blocks(
    chapter: BaseNode, blocks: Sequence[BaseNode], children: Sequence[BaseNode]
) -> tuple[list[TextNode], dict[str, str]]:
    """``blocks`` of ``chapter`` snapped to its paragraph ``children``, and each child's block.

    Each child goes to the block holding most of its characters (the first on a tie); a child
    overlapping no block is left out of the map. Each block that got a child becomes the exact
    slice ``chapter.text[first child start : last child end]`` (its children and the blank
    lines between them); a block that got none is dropped, its text now in its neighbours.
    Assignment is monotone (blocks and children are both disjoint and in story order), so the
    aligned blocks are disjoint and in story order too. Each keeps its id, metadata and
    templates; ``sentence_from``/``sentence_to``, where present, are renumbered to the sentences
    the new span overlaps (LitSeg's numbering). Context views (``context_before``/``after``,
    LitSeg LLM runs only) still refer to the original block. PREV/NEXT skip dropped blocks.
    """
    text = chapter.get_content(metadata_mode=MetadataMode.NONE)
    sentences: list[Sentence] | None = None  # the chapter's, as LitSeg numbers them: on demand
    spans = sorted(((*_span(b), b.node_id) for b in blocks), key=lambda s: (s[0], s[1]))
    owner: dict[str, str] = {}
    edges: dict[str, tuple[int, int]] = {}
    for child in children:
        a, b = _span(child)
        over = _overlaps(spans, a, b)
        if not over:
            continue
        _, bid = max(over, key=lambda o: o[0])  # max keeps the first of equal overlaps
        owner[child.node_id] = bid
        lo, hi = edges.get(bid, (a, b))
        edges[bid] = (min(lo, a), max(hi, b))
    out: list[TextNode] = []
    gone: dict[str, BaseNode] = {}
    for block in sorted(blocks, key=lambda n: _span(n)):
        if block.node_id not in edges:
            gone[block.node_id] = block
            continue
        a, b = edges[block.node_id]
        node = block.model_copy(deep=True)
        if not isinstance(node, TextNode):
            raise ValueError(f"block {block.node_id} is not a TextNode")
        node.text, node.start_char_idx, node.end_char_idx = text[a:b], a, b
        if "sentence_from" in node.metadata:
            sentences = split_sentences(text) if sentences is None else sentences
            lo, hi = _sentence_range(sentences, a, b)
            node.metadata["sentence_from"], node.metadata["sentence_to"] = lo, hi
        out.append(node)
    _relink(out, gone)
    return out, owner


def align_chapter(
    chapter: BaseNode, blocks: Sequence[BaseNode], max_words: int = MERGE_WORDS
) -> tuple[list[TextNode], list[TextNode], dict[str, str]]:
    """One chapter's blocks snapped to its paragraph children (``align_blocks``): the aligned
    blocks, the children and each child's block. The one alignment step of the library's
    ``ParagraphAligner`` and the eval harness's ``aligned_book``."""
    kids, _ = chapter_children(blocks, chapter, max_words=max_words)
    aligned, owner = align_blocks(chapter, blocks, kids)
    return aligned, kids, owner


def aligned_book(
    blocks: Sequence[BaseNode], chapters: Sequence[BaseNode], *, max_words: int = MERGE_WORDS
) -> tuple[list[TextNode], list[TextNode], dict[str, list[str]]]:
    """``align_blocks`` over a whole book: the aligned blocks (story order), the paragraph
    children (``chapter_children``'s, every one with exactly one block) and each child's block
    as a one-item list, the shape ``collapse`` takes."""
    by_chapter = _by_chapter(blocks, chapters)
    out: list[TextNode] = []
    children: list[TextNode] = []
    parents: dict[str, list[str]] = {}
    for chapter in chapters:
        aligned, kids, owner = align_chapter(
            chapter, by_chapter.get(chapter.node_id, []), max_words
        )
        out += aligned
        children += kids
        parents.update((k, [b]) for k, b in owner.items())
    kept = {b.node_id for b in out}
    _relink(out, {b.node_id: b for b in blocks if b.node_id not in kept})  # across chapters
    return out, children, parents


PARENT_KEY = "parent_id"  # a child's payload: the id of the block it ranks
CHILD_KEYS = (PARENT_KEY,)  # bookkeeping, kept out of the embedding and LLM views


def block_children(
    blocks: Sequence[BaseNode], chapters: Sequence[BaseNode], *, max_words: int = MERGE_WORDS
) -> list[TextNode]:
    """The paragraph children of aligned ``blocks`` (``ParagraphAligner``'s output), each with
    its block's id under ``parent_id`` and the block's ``characters`` (so a character filter
    selects the same children as blocks). A child of no block is dropped, as in
    ``chapter_children``; every kept child lies inside exactly one block."""
    by_id = {b.node_id: b for b in blocks}
    children, parents = book_children(blocks, chapters, max_words=max_words)
    for child in children:
        parent = by_id[parents[child.node_id][0]]
        child.metadata[PARENT_KEY] = parent.node_id
        if "characters" in parent.metadata:
            child.metadata["characters"] = list(parent.metadata["characters"])
        for keys in (child.excluded_embed_metadata_keys, child.excluded_llm_metadata_keys):
            keys.extend(k for k in (*CHILD_KEYS, "characters") if k not in keys)
    return children


class ParagraphAligner(TransformComponent):
    """Snap each chapter's blocks to its paragraph children (``align_blocks``).

    A pipeline step after any block parser (LitSeg's or another): each block becomes the exact
    union of the paragraph chunker's pieces it holds most of, so ranking the blocks through
    those pieces (``block_children``, ``collapse``) places a block no lower than its best
    paragraph ranks among paragraphs. The chapters come from ``for_chapters``, since a pipeline
    step sees only the blocks; a block of a chapter it was not given is an error.
    """

    max_words: int = Field(
        default=MERGE_WORDS,
        gt=0,
        description="Words per paragraph child (the paragraph "
        "chunker's merge size); the blocks snap to these pieces.",
    )
    _chapters: dict[str, BaseNode] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "ParagraphAligner"

    def for_chapters(self, chapters: Iterable[BaseNode]) -> ParagraphAligner:
        """Give the chapters whose blocks come next (their text is what the pieces are cut
        from); returns self."""
        self._chapters = {c.node_id: c for c in chapters}
        return self

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        by_chapter: dict[str, list[BaseNode]] = {}
        for node in nodes:
            by_chapter.setdefault(node.ref_doc_id or "", []).append(node)
        if stray := [k for k in by_chapter if k not in self._chapters]:
            raise ValueError(f"ParagraphAligner was not given the chapters {stray[:3]}")
        out: list[BaseNode] = []
        for chapter_id, blocks in by_chapter.items():
            out += align_chapter(self._chapters[chapter_id], blocks, self.max_words)[0]
        return out
