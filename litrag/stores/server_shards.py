"""Custom sharding by book on a Qdrant server: which shard key a book's points go to, and which
keys a query's filter confines it to.

Why: with Qdrant's automatic sharding a book's points spread over every shard by id hash, so a
book-filtered query (every litrag query is one) visits all shards. With ``sharding_method=custom``
each book (or each group of books, so that 70,000 books need not be 70,000 shards) lives in the
shard of its key, and a query names the keys of the books its filter allows.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

BOOK_KEY = "book_id"


def shard_key(book_id: str, groups: int | None) -> str:
    """The shard key of ``book_id``: the book itself, or one of ``groups`` groups by a stable
    hash (CRC32, the same in every process and on every machine)."""
    if not book_id:
        raise ValueError("a node without book_id cannot be written to a collection sharded by book")
    if groups is None:
        return book_id
    return f"books-{zlib.crc32(book_id.encode('utf-8')) % groups:04d}"


def books_of(filters: MetadataFilters | None) -> set[str] | None:
    """The books ``filters`` confines a query to, or None when it allows every book (no
    ``book_id`` condition, or one under OR/NOT that another branch escapes)."""
    if filters is None or not filters.filters:
        return None
    parts = [_books_of_one(f) for f in filters.filters]
    cond = filters.condition or FilterCondition.AND
    if cond == FilterCondition.AND:
        bound = [p for p in parts if p is not None]
        if not bound:
            return None
        out = set(bound[0])
        for p in bound[1:]:
            out &= p
        return out
    if cond == FilterCondition.OR and all(p is not None for p in parts):
        return set().union(*[p for p in parts if p is not None])
    return None  # NOT, or an OR with an unbounded branch


def _books_of_one(f: MetadataFilter | MetadataFilters) -> set[str] | None:
    if isinstance(f, MetadataFilters):
        return books_of(f) if f.filters else None
    if f.key != BOOK_KEY:
        return None
    op = f.operator or FilterOperator.EQ
    if op == FilterOperator.EQ and isinstance(f.value, str):
        return {f.value}
    if op in (FilterOperator.IN, FilterOperator.ANY) and isinstance(f.value, (list, tuple, set)):
        return {str(v) for v in f.value}
    return None


def keys_for(books: Iterable[str] | None, groups: int | None) -> list[str] | None:
    """The shard keys to name in a request for ``books`` (None: every shard), sorted."""
    if not books:  # None, or a filter no book passes: every shard (the filter then finds none)
        return None
    return sorted({shard_key(b, groups) for b in books})
