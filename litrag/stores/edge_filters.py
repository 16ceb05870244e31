"""LlamaIndex ``MetadataFilters`` translated into Qdrant Edge filters.

Operators follow LlamaIndex's ``QdrantVectorStore``, so a filter means the same on the embedded
store and on a Qdrant server.
"""

from __future__ import annotations

from typing import Any

import qdrant_edge as qe
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)


def metadata_filters_to_edge(filters: MetadataFilters) -> Any:
    """LlamaIndex ``MetadataFilters`` (nested, AND/OR/NOT) as a ``qdrant_edge.Filter``.

    Operators follow LlamaIndex's QdrantVectorStore: EQ on a float is a closed range, NE/NIN use
    Qdrant's "except" match (a point without the field does not match), IN is "any".
    """
    conds: list[Any] = []
    for f in filters.filters:
        if isinstance(f, MetadataFilters):
            if f.filters:
                conds.append(metadata_filters_to_edge(f))
            continue
        conds.append(_condition(f))
    cond = filters.condition or FilterCondition.AND
    if cond == FilterCondition.AND:
        return qe.Filter(must=conds)
    if cond == FilterCondition.OR:
        return qe.Filter(should=conds)
    if cond == FilterCondition.NOT:
        return qe.Filter(must_not=conds)
    raise NotImplementedError(f"filter condition {cond!r}")


def _condition(f: MetadataFilter) -> Any:
    op, key, v = f.operator or FilterOperator.EQ, f.key, f.value
    fc = qe.FieldCondition
    if op in (FilterOperator.EQ, FilterOperator.NE):
        if isinstance(v, float):
            c = fc(key=key, range=qe.RangeFloat(gte=v, lte=v))
            return c if op == FilterOperator.EQ else qe.Filter(must_not=[c])
        if op == FilterOperator.EQ:
            return fc(key=key, match=qe.MatchValue(v))
        return fc(key=key, match=match_except([v]))
    if op in (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE):
        bound = {
            FilterOperator.GT: "gt",
            FilterOperator.GTE: "gte",
            FilterOperator.LT: "lt",
            FilterOperator.LTE: "lte",
        }[op]
        return fc(key=key, range=qe.RangeFloat(**{bound: float(v)}))
    if op in (FilterOperator.IN, FilterOperator.ANY):
        return fc(key=key, match=match_any(_as_list(v)))
    if op == FilterOperator.NIN:
        return fc(key=key, match=match_except(_as_list(v)))
    if op == FilterOperator.ALL:
        return qe.Filter(must=[fc(key=key, match=qe.MatchValue(x)) for x in _as_list(v)])
    if op == FilterOperator.CONTAINS:  # an array payload field holding v
        return fc(key=key, match=qe.MatchValue(v))
    if op in (FilterOperator.TEXT_MATCH, FilterOperator.TEXT_MATCH_INSENSITIVE):
        return fc(key=key, match=qe.MatchText(str(v)))
    if op == FilterOperator.IS_EMPTY:
        return qe.IsEmptyCondition(key)
    raise NotImplementedError(f"filter operator {op!r} is not supported by QdrantEdgeVectorStore")


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple, set)) else str(v).split(",")


def _homogeneous(values: list[Any]) -> list[Any]:
    """Edge's Match(Any|Except) take all-str or all-int lists (and turn a bool into 1)."""
    if all(isinstance(x, int) and not isinstance(x, bool) for x in values):
        return [int(x) for x in values]
    if all(isinstance(x, str) for x in values):
        return values
    raise ValueError(f"IN/NIN values must be all strings or all integers, got {values!r}")


def match_any(values: list[Any]) -> Any:
    return qe.MatchAny(_homogeneous(list(values)))


def match_except(values: list[Any]) -> Any:
    return qe.MatchExcept(_homogeneous(list(values)))
