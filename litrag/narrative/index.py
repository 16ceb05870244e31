"""The character index at ingest: built per book, stored beside the registry, put in payloads.

``CharacterIndexer`` is what ``Library`` calls: ``prepare`` builds a book's index from its
chapters (before the pipeline runs, since aliases are merged over the whole book) and returns a
``CharacterTagger``, a LlamaIndex ``TransformComponent`` that writes each block's canonical
character ids into its metadata (``characters``; hidden from the embedding and LLM views), so
the store can filter on them; ``finish`` counts co-occurrence from the stored blocks and saves
the index to ``<home>/characters/<book_id>.json``. Removing or replacing the book removes the file
(``remove_index``, no spaCy needed).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, TransformComponent

from litrag.narrative.characters import CharacterIndex, build_index
from litrag.narrative.jsonfile import read_model, write_model

CHARACTERS_KEY = "characters"  # the payload field: canonical ids of the block's characters
FOLDER = "characters"


def index_path(home: Path, book_id: str) -> Path:
    return Path(home) / FOLDER / f"{book_id}.json"


def load_index(home: Path, book_id: str) -> CharacterIndex | None:
    """The stored index of a book, or None when it has none."""
    return read_model(index_path(home, book_id), CharacterIndex)


def save_index(home: Path, index: CharacterIndex) -> Path:
    return write_model(index_path(home, index.book_id), index)


def remove_index(home: Path, book_id: str) -> None:
    index_path(home, book_id).unlink(missing_ok=True)


def build_book_index(book_id: str, chapters: Sequence[tuple[int, str]]) -> CharacterIndex:
    """NER over ``(chapter_index, text)`` chapters, then the index (see ``characters``)."""
    from litrag.narrative.ner import MODEL, entity_spans, model_version

    spans = entity_spans(chapters, MODEL)
    return build_index(book_id, chapters, spans, model_version(MODEL))


class CharacterTagger(TransformComponent):
    """Puts each block's characters (canonical ids, in order of first mention) in its metadata.

    A block's characters are those named inside its own text (``start_char_idx`` to
    ``end_char_idx`` of its chapter); context sentences from elsewhere do not count.
    """

    book_id: str = Field(description="The book the index belongs to.")
    index_fingerprint: str = Field(description="Of the index used: part of the cache key.")
    _index: CharacterIndex = PrivateAttr()

    def __init__(self, index: CharacterIndex, **kwargs: Any) -> None:
        super().__init__(book_id=index.book_id, index_fingerprint=index.fingerprint(), **kwargs)
        self._index = index

    @classmethod
    def class_name(cls) -> str:
        return "CharacterTagger"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            meta = node.metadata
            start, end = node.start_char_idx, node.end_char_idx
            ids: list[str] = []
            if meta.get("book_id") == self.book_id and start is not None and end is not None:
                ids = self._index.in_span(int(meta.get("chapter_index", 0)), start, end)
            meta[CHARACTERS_KEY] = ids
            for keys in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
                if CHARACTERS_KEY not in keys:
                    keys.append(CHARACTERS_KEY)
        return nodes


class CharacterIndexer:
    """The ``Library`` hook: one index per book, built before its blocks, saved after them."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self._pending: dict[str, CharacterIndex] = {}
        self.seconds: dict[str, float] = {}

    def fingerprint(self) -> str:
        """Part of a book's fingerprint: a library ingested without the index gets it."""
        from litrag.narrative.ner import MODEL

        return f"characters-v{CharacterIndex.model_fields['version'].default}-{MODEL}"

    def prepare(self, book_id: str, docs: Sequence[BaseNode]) -> CharacterTagger:
        t0 = time.perf_counter()
        chapters = [(int(d.metadata.get("chapter_index", 0)), d.get_content()) for d in docs]
        index = build_book_index(book_id, chapters)
        self._pending[book_id] = index
        self.seconds[book_id] = time.perf_counter() - t0
        return CharacterTagger(index)

    def finish(self, book_id: str, store: Any) -> CharacterIndex:
        """Co-occurrence and first blocks from the book's stored blocks; the index saved."""
        from llama_index.core.vector_stores.types import (
            FilterOperator,
            MetadataFilter,
            MetadataFilters,
        )

        t0 = time.perf_counter()
        index = self._pending.pop(book_id)
        flt = MetadataFilters(
            filters=[MetadataFilter(key="book_id", value=book_id, operator=FilterOperator.EQ)]
        )
        nodes = store.get_nodes(filters=flt)
        nodes.sort(key=lambda n: (n.metadata.get("chapter_index", 0), n.start_char_idx or 0))
        pairs: Counter[tuple[str, str, int]] = Counter()
        first: dict[str, str] = {}
        for node in nodes:
            ids = list(node.metadata.get(CHARACTERS_KEY) or [])
            ch = int(node.metadata.get("chapter_index", 0))
            for cid in ids:
                first.setdefault(cid, node.node_id)
            for a, b in combinations(sorted(set(ids)), 2):
                pairs[(a, b, ch)] += 1
        for c in index.characters:
            c.first_block = first.get(c.id)
        index.cooccurrence = [(a, b, ch, n) for (a, b, ch), n in sorted(pairs.items())]
        index.blocks = len(nodes)
        save_index(self.home, index)
        self.seconds[book_id] = self.seconds.get(book_id, 0.0) + time.perf_counter() - t0
        return index
