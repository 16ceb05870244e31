"""``build_assets``: a stored book's blocks -> per-block extractions -> derived assets, stored.

The blocks are read back from the library's store (their ids are the assets' sources), so assets
can be built for any ingested book, later and for some chapters only; extractions of earlier runs
are kept and merged with this run's, and every derived asset is rebuilt from all of them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from litrag.narrative.asset_store import AssetStore
from litrag.narrative.assets import (
    FAILED,
    AssetBlock,
    AssetExtractor,
    AssetSummary,
    BookExtractions,
    load_extractions,
    save_extractions,
)
from litrag.narrative.canon import Canonicalizer
from litrag.narrative.characters import CharacterIndex
from litrag.narrative.index import CHARACTERS_KEY, load_index
from litrag.narrative.profiles import build_nodes, resolve


@dataclass
class BuildReport:
    """What one ``build_assets`` did."""

    book_id: str
    blocks: int
    summary: AssetSummary
    nodes: dict[str, int]  # asset type -> nodes stored
    relations: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "book_id": self.book_id,
            "blocks": self.blocks,
            **self.summary.as_dict(),
            "assets": self.nodes,
            "graph_relations": self.relations,
        }


def stored_blocks(
    store: Any,
    book_id: str,
    *,
    chapters: Collection[int] | None = None,
    upto_chapter: int | None = None,
    max_blocks: int | None = None,
    index: CharacterIndex | None = None,
) -> tuple[list[AssetBlock], dict[int, str]]:
    """The book's blocks in reading order (those asked for), and its chapter titles."""
    parts = [MetadataFilter(key="book_id", value=book_id, operator=FilterOperator.EQ)]
    if upto_chapter is not None:
        parts.append(
            MetadataFilter(key="chapter_index", value=upto_chapter, operator=FilterOperator.LTE)
        )
    nodes = store.get_nodes(filters=MetadataFilters(filters=parts))
    nodes.sort(key=lambda n: (int(n.metadata.get("chapter_index", 0)), n.start_char_idx or 0))
    titles: dict[int, str] = {}
    out: list[AssetBlock] = []
    for n in nodes:
        ch = int(n.metadata.get("chapter_index", 0))
        titles.setdefault(ch, str(n.metadata.get("chapter_title") or ""))
        if chapters is not None and ch not in chapters:
            continue
        names = []
        for cid in n.metadata.get(CHARACTERS_KEY) or []:
            c = index.by_id(cid) if index is not None else None
            names.append(c.name if c is not None else cid)
        out.append(
            AssetBlock(
                block_id=n.node_id,
                chapter=ch,
                text=n.get_content(),
                start=n.start_char_idx or 0,
                chapter_title=titles[ch],
                characters=tuple(names),
            )
        )
    if max_blocks is not None:  # the first blocks of each chapter
        seen: dict[int, int] = {}
        out = [b for b in out if seen.setdefault(b.chapter, 0) < max_blocks and _take(seen, b)]
    return out, titles


def _take(seen: dict[int, int], block: AssetBlock) -> bool:
    seen[block.chapter] += 1
    return True


class NoBlocksError(ValueError):
    """The chosen chapters hold none of the book's stored blocks: nothing to build."""


def build_assets(
    home: Path,
    book_id: str,
    title: str,
    block_store: Any,
    assets: AssetStore,
    extractor: AssetExtractor,
    *,
    chapters: Collection[int] | None = None,
    upto_chapter: int | None = None,
    max_blocks: int | None = None,
    show_progress: bool = False,
) -> BuildReport:
    """Extract the chosen blocks (the reply cache replays what a killed run finished), keep the
    extractions beside the library, and replace the book's stored assets with what all its
    extractions derive."""
    index = load_index(home, book_id)
    blocks, titles = stored_blocks(
        block_store,
        book_id,
        chapters=chapters,
        upto_chapter=upto_chapter,
        max_blocks=max_blocks,
        index=index,
    )
    if not blocks:  # an empty run would still write an extractions file and replace the assets
        raise NoBlocksError(f"{book_id} has no stored block in the chapters asked for")
    book = load_extractions(home, book_id) or BookExtractions(book_id=book_id, title=title)
    known = {n.node_id for n in block_store.get_nodes(filters=_book(book_id))}
    book.blocks = {k: v for k, v in book.blocks.items() if k in known}  # of a replaced text
    try:
        extractor.extract(blocks, book, show_progress=show_progress)
    finally:
        save_extractions(home, book)  # what finished is kept even when the run stops
    res = resolve(book, Canonicalizer(index))
    nodes = build_nodes(book, index, titles, res)
    assets.replace_book(book_id, nodes, res)
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.metadata["asset_type"]] = counts.get(n.metadata["asset_type"], 0) + 1
    rels = sum(1 for it in res.items if it.kind == "relation")
    return BuildReport(book_id, len(blocks), extractor.summary, counts, rels)


def _book(book_id: str) -> MetadataFilters:
    return MetadataFilters(
        filters=[MetadataFilter(key="book_id", value=book_id, operator=FilterOperator.EQ)]
    )


def assets_complete(home: Path, book_id: str, block_store: Any, llm_identity: str) -> bool:
    """True when every stored block of the book has a record from this LLM and none failed:
    a rerun would only replay the reply cache, so ``ingest --assets`` can skip the book."""
    book = load_extractions(home, book_id)
    if book is None or book.llm != llm_identity:
        return False
    known = {n.node_id for n in block_store.get_nodes(filters=_book(book_id))}
    return bool(known) and all(k in book.blocks and book.blocks[k].outcome != FAILED for k in known)
