"""LlamaIndex nodes as Qdrant Edge points and back: ids, payloads and vectors.

A node is stored as LlamaIndex's ``QdrantVectorStore`` stores it (``node_to_metadata_dict``
payload, a dense and a sparse vector) plus its node id flat in the payload and, where the
collection keeps them, a multivector of its sentence windows. Edge ids are UUIDs (or ints), so
a node id that is not a UUID maps to one by ``uuid5``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import qdrant_edge as qe
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQueryResult
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from litrag.stores.edge_schema import EdgeStoreConfig

BatchSparseEncoding = tuple[list[list[int]], list[list[float]]]
# Same shape as llama-index-vector-stores-qdrant's SparseEncoderCallable.
SparseEncoderCallable = Callable[[list[str]], BatchSparseEncoding]
# texts -> per text, the vectors of its sentence windows (scoring.windows.SentenceWindowEncoder).
WindowEncoderCallable = Callable[[list[str]], list[Sequence[Sequence[float]]]]
# What Edge takes and gives as a point id, and as one named vector of a point.
PointId = int | uuid.UUID | str
NamedVector = list[float] | list[list[float]] | qe.SparseVector

NODE_ID_KEY = "_node_id"  # the original node id, kept flat beside the point's UUID
# Each sentence's BM25 term ids (window_bm25.sentence_terms), so that BM25 over sentence
# windows re-scores a pool of candidates without splitting their sentences at query time:
# packed in one string (window_bm25.pack_terms) by this version, as lists by the one before
# (still read). A library older still keeps neither and is re-scored from its text.
SENTENCE_PACKED_KEY = "_sentence_terms_u32"
SENTENCE_TERMS_KEY = "_sentence_terms"
KEPT_TERM_KEYS = [SENTENCE_PACKED_KEY, SENTENCE_TERMS_KEY]
# What metadata_dict_to_node reads: fetching only these halves query-side payload decoding.
NODE_KEYS = ["_node_content", "_node_type"]
_ID_NAMESPACE = uuid.UUID("6f1c9a52-3d0e-4b8a-9c55-0b7e1d2f4a10")  # for non-UUID node ids


@dataclass
class ScannedPoint:
    """One point as a scan sees it: id, (selected) payload and (selected) vectors."""

    id: PointId
    payload: dict[str, Any]
    vectors: dict[str, NamedVector]


@dataclass
class Hit:
    """A point a query found: its id, its score and the payload keys the query asked for
    (read once: each read of a point's payload converts it again)."""

    id: PointId
    score: float
    payload: dict[str, Any]

    @classmethod
    def of(cls, point: qe.ScoredPoint) -> Hit:
        return cls(point.id, float(point.score), point.payload or {})


@dataclass
class StoredPoint:
    """One point as stored: what an export to a Qdrant server needs."""

    id: str
    dense: list[float] | None
    sparse: tuple[list[int], list[float]] | None
    payload: dict[str, Any]
    windows: list[list[float]] | None = None  # the sentence-window multivector, where kept


def node_id_to_point_id(node_id: str) -> uuid.UUID:
    """Edge ids are UUIDs (or ints): a UUID-shaped node id is used as is, others map by uuid5."""
    try:
        return uuid.UUID(node_id)
    except (ValueError, TypeError, AttributeError):
        return uuid.uuid5(_ID_NAMESPACE, str(node_id))


def node_payload(sentence_terms: bool = False) -> qe.PayloadSelector:
    """The payload keys a node is decoded from (not its flat metadata copies), and its
    sentences' term ids with ``sentence_terms``."""
    return qe.PayloadSelector.Include(NODE_KEYS + (KEPT_TERM_KEYS if sentence_terms else []))


def node_to_point(
    node: BaseNode,
    config: EdgeStoreConfig,
    sparse: tuple[Iterable[int], Iterable[float]] | None,
    windows: Sequence[Sequence[float]] | None,
    flat_metadata: bool,
    sentence_terms: str | None = None,
) -> qe.Point:
    """The point of ``node``: its dense vector, its sparse one (given), its window vectors (given
    where the collection keeps them) and its payload, with its sentences' BM25 term ids
    (``window_bm25.pack_terms``) when given; wrong vector sizes are a ``ValueError``."""
    dim = config.dense_dim
    emb = node.get_embedding()
    if len(emb) != dim:
        raise ValueError(f"node {node.node_id}: embedding size {len(emb)} != {dim}")
    vector: dict[str, NamedVector] = {config.dense_vector_name: floats(emb)}
    if sparse is not None:
        vector[config.sparse_vector_name] = sparse_vector(*sparse)
    windowed = config.window_vector_name
    if windowed and windows is not None:
        if not windows or any(len(w) != dim for w in windows):
            raise ValueError(f"node {node.node_id}: window vectors must be {dim}-d")
        vector[windowed] = [floats(w) for w in windows]
    payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=flat_metadata)
    payload[NODE_ID_KEY] = node.node_id
    if sentence_terms is not None:
        payload[SENTENCE_PACKED_KEY] = sentence_terms
    return qe.Point(id=node_id_to_point_id(node.node_id), vector=vector, payload=payload)


def record_to_node(rec: qe.Record, dense_name: str) -> BaseNode:
    """The node of a retrieved point, with its dense embedding when that was fetched."""
    node = metadata_dict_to_node(rec.payload)
    vec = rec.vector
    if isinstance(vec, dict) and vec.get(dense_name) is not None:
        node.embedding = list(vec[dense_name])
    return node


def hits_to_result(hits: Sequence[Hit], nodes: dict[PointId, BaseNode]) -> VectorStoreQueryResult:
    """The hits as a LlamaIndex result, their nodes taken from ``nodes`` (decoded already)."""
    found = [nodes[h.id] for h in hits]
    return VectorStoreQueryResult(
        nodes=found, similarities=[h.score for h in hits], ids=[n.node_id for n in found]
    )


def points_to_result(
    points: Iterable[qe.ScoredPoint],
    scores: Sequence[float] | None = None,
    seen: dict[PointId, BaseNode] | None = None,
) -> VectorStoreQueryResult:
    """Nodes, scores (the points' own unless given) and ids of ``points``; a point already in
    ``seen`` (decoded for another list of the same query) is not decoded again."""
    nodes, sims, ids = [], [], []
    seen = {} if seen is None else seen
    for k, p in enumerate(points):
        node = seen.get(p.id)
        if node is None:
            node = seen[p.id] = metadata_dict_to_node(p.payload)
        nodes.append(node)
        sims.append(float(p.score) if scores is None else scores[k])
        ids.append(node.node_id)
    return VectorStoreQueryResult(nodes=nodes, similarities=sims, ids=ids)


def stored_point(rec: qe.Record, config: EdgeStoreConfig) -> StoredPoint:
    """A record read with its vectors and payload, as an export writes it."""
    vec = rec.vector or {}
    sp = vec.get(config.sparse_vector_name)
    win = vec.get(config.window_vector_name) if config.window_vector_name else None
    return StoredPoint(
        id=str(rec.id),
        dense=vec.get(config.dense_vector_name),
        sparse=(list(sp.indices), list(sp.values)) if sp is not None else None,
        payload=rec.payload or {},
        windows=[list(w) for w in win] if win is not None else None,
    )


def scanned_point(rec: qe.Record) -> ScannedPoint:
    return ScannedPoint(
        rec.id, rec.payload or {}, rec.vector if isinstance(rec.vector, dict) else {}
    )


def floats(v: Iterable[float]) -> list[float]:
    """A list of floats from a list (as is), an array or another sequence."""
    if isinstance(v, list):
        return v
    return v.tolist() if hasattr(v, "tolist") else [float(x) for x in v]


def sparse_vector(indices: Iterable[int], values: Iterable[float]) -> qe.SparseVector:
    """A ``qe.SparseVector`` from lists (fast path) or arrays / other sequences."""
    if not isinstance(indices, list):
        indices = indices.tolist() if hasattr(indices, "tolist") else [int(x) for x in indices]
    if not isinstance(values, list):
        values = values.tolist() if hasattr(values, "tolist") else [float(x) for x in values]
    return qe.SparseVector(indices, values)


def paged(
    fetch: Callable[[Any, int], tuple[Sequence[Any], Any]], page: int, limit: int | None
) -> Iterator[Any]:
    """Every record a scroll gives, page by page, up to ``limit``: ``fetch(offset, n)`` returns
    (records, next offset), as Edge's ``scroll`` and qdrant-client's do."""
    offset, seen = None, 0
    while True:
        n = page if limit is None else min(page, limit - seen)
        if n <= 0:
            return
        recs, offset = fetch(offset, n)
        yield from recs
        seen += len(recs)
        if offset is None or not recs:
            return
