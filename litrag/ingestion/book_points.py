"""A book's points in the vector store: the filter that selects them, their exact count, and
what a full scan found of them (``BookScan``).

Shared by the library (``litrag.ingestion.library``: ingest, remove, repair) and its checks
(``litrag.ingestion.integrity``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)


def book_filter(book_id: str) -> MetadataFilters:
    """The points of one book: its ``book_id`` payload."""
    return MetadataFilters(
        filters=[MetadataFilter(key="book_id", value=book_id, operator=FilterOperator.EQ)]
    )


def count_points(store: BasePydanticVectorStore, book_id: str | None = None) -> int:
    """Points of one book (or all): exact, on the ``book_id`` payload index."""
    filters = book_filter(book_id) if book_id is not None else None
    if hasattr(store, "count"):
        return int(store.count(filters=filters))
    client = getattr(store, "client", None)  # LlamaIndex's QdrantVectorStore
    from qdrant_client import models

    flt = None
    if book_id is not None:
        flt = models.Filter(
            must=[models.FieldCondition(key="book_id", match=models.MatchValue(value=book_id))]
        )
    return int(client.count(store.collection_name, count_filter=flt, exact=True).count)


@dataclass
class BookScan:
    """What a full scan of the store found for one book."""

    points: int = 0
    zero: set[str] = field(default_factory=set)  # vector names found zero in some point
    doc_ids: set[str] = field(default_factory=set)
    chapters: set[int] = field(default_factory=set)
    node_ids: set[str] = field(default_factory=set)
    meta: dict[str, Any] = field(default_factory=dict)  # title, author, segmenter (first point)
