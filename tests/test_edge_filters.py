"""Filter translation on its own: what Edge filter a LlamaIndex filter becomes, and what it refuses.

Whether the translated filters select the right points is the store contract's business
(``test_store_contract.py``, on real paragraphs, against LlamaIndex's own Qdrant store).
"""

from __future__ import annotations

import pytest
import qdrant_edge as qe
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from litrag.stores.edge_filters import metadata_filters_to_edge


def _f(key: str, value, op: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=op)


def test_conditions_map_to_must_should_and_must_not() -> None:
    inner = MetadataFilters(filters=[_f("chapter_index", 1)], condition=FilterCondition.NOT)
    outer = metadata_filters_to_edge(
        MetadataFilters(filters=[_f("book_id", "pg11"), inner, MetadataFilters(filters=[])])
    )
    assert isinstance(outer, qe.Filter)
    assert len(outer.must) == 2  # the empty group adds nothing
    assert isinstance(outer.must[1], qe.Filter) and len(outer.must[1].must_not) == 1
    either = metadata_filters_to_edge(
        MetadataFilters(
            filters=[_f("book_id", "pg11"), _f("book_id", "pg84")], condition=FilterCondition.OR
        )
    )
    assert len(either.should) == 2


def test_in_values_must_be_strings_or_integers() -> None:
    ok = MetadataFilters(filters=[_f("chapter_index", [1, 2], FilterOperator.IN)])
    assert isinstance(metadata_filters_to_edge(ok), qe.Filter)
    mixed = MetadataFilters(filters=[_f("chapter_index", [1.5, 2.0], FilterOperator.IN)])
    with pytest.raises(ValueError, match="all strings or all integers"):
        metadata_filters_to_edge(mixed)
