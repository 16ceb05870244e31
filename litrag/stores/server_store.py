"""LlamaIndex's ``QdrantVectorStore`` on a Qdrant server, answering as the embedded store does.

Why a subclass: LlamaIndex's store keeps one dense vector per block and leaves BM25's IDF to the
server (``Modifier.IDF``), which counts documents over the whole collection. litrag's embedded
store (``QdrantEdgeVectorStore``) scores a block by its best sentence window (MaxSim over a
multivector), re-scores BM25 candidates by their best window (``window_bm25``) and takes IDF over
the points the query's filter selects (per-book BM25, spoiler limit included). Measured on the
six books (``benchmarks/idf_scope.py``, docs/qdrant-cluster.md): collection-wide IDF keeps the
same BM25 top 5 for 15 of 176 questions; so this store carries the embedded one's statistics.

What it keeps from LlamaIndex: the filter translation (``_build_subfilter``), the collection
checks, ``delete``. What it replaces, and why:

- points (``_build_points``): the id mapping of the embedded store (``node_id_to_point_id``), the
  node id, each sentence's term ids (packed as Edge keeps them, read by BM25 over windows) and the
  block's distinct term ids (``_terms``, integer-indexed) in the payload, the window multivector;
- the collection (``_create_collection``): the window multivector (``MultiVectorConfig`` with
  ``MAX_SIM``), a sparse vector without the IDF modifier, the payload indexes, custom sharding;
- queries: IDF is computed here, over the query's filter, from exact counts (``N``: points the
  filter selects; ``df``: those whose ``_terms`` hold the term), with the engine's formula
  ``ln(1 + (N - df + 0.5) / (df + 0.5))``, and sent as the sparse query's weights; so the
  server's dot product is the embedded store's filter-scoped BM25, whatever the filter;
- sharding: ``sharding_method=custom`` with a shard key per book (or per book group) made as
  books arrive; writes name their key, book-filtered queries name the keys of their books.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import models

from litrag.scoring.fusion import relative_score_fusion
from litrag.scoring.kept_terms import pack_terms
from litrag.scoring.window_bm25 import DEFAULT_POOL, rescore, sentence_terms
from litrag.stores.edge_points import (
    NODE_ID_KEY,
    SENTENCE_PACKED_KEY,
    SENTENCE_TERMS_KEY,
    SparseEncoderCallable,
    WindowEncoderCallable,
    floats,
    node_id_to_point_id,
    paged,
)
from litrag.stores.server_search import TERMS_KEY, ServerSearch
from litrag.stores.server_shards import books_of, keys_for, shard_key

logger = logging.getLogger(__name__)

DENSE_NAME = "text-dense"
SPARSE_NAME = "text-sparse"
WINDOW_NAME = "text-windows"  # the sentence-window multivector (MaxSim)
SHARD_GROUPS_KEY = "litrag_shard_groups"  # collection metadata: book groups (0: a key per book)
_NODE_KEYS = ["_node_content", "_node_type"]
PAYLOAD_INDEXES: dict[str, models.PayloadSchemaType] = {
    "book_id": models.PayloadSchemaType.KEYWORD,
    "chapter_index": models.PayloadSchemaType.INTEGER,
    "doc_id": models.PayloadSchemaType.KEYWORD,
    "ref_doc_id": models.PayloadSchemaType.KEYWORD,
    TERMS_KEY: models.PayloadSchemaType.INTEGER,
}


def distinct_terms(indices: Sequence[int]) -> list[int]:
    return sorted({int(i) for i in indices})


class QdrantServerStore(QdrantVectorStore):
    """A litrag collection on a Qdrant server (or qdrant-client's local mode, ``path:DIR``).

    Dense queries search the window multivector where the collection keeps one; SPARSE and
    HYBRID queries weight the query's terms by the filter-scoped IDF computed here, re-score a
    pool of BM25 candidates by their best window (``sparse_window_weight``) and fuse as the
    embedded store does. ``shard_groups``: with ``shard_by_book``, books are spread over this
    many shard keys (None: one key per book).
    """

    gets_nodes_without_vectors: ClassVar[bool] = True  # get_nodes(..., with_vectors=False)

    window_vector_name: str | None = Field(
        default=None, description="The window multivector's name; None: one vector per block."
    )
    idf_scope: Literal["filter", "collection"] = Field(
        default="filter",
        description=(
            "BM25 IDF over the points the query's filter selects (computed here from counts, as "
            "the embedded store's 'filter' scope), or the server's own over the collection (a "
            "collection made without the '_terms' payload, e.g. by litrag before 0.x)."
        ),
    )
    sparse_window_weight: float = Field(
        default=0.0, ge=0.0, le=1.0, description="As QdrantEdgeVectorStore.sparse_window_weight."
    )
    sparse_window_pool: int = Field(
        default=DEFAULT_POOL, ge=1, description="BM25 candidates re-scored by their windows."
    )
    shard_by_book: bool = Field(
        default=False, description="Custom sharding: one shard key per book (or book group)."
    )
    shard_groups: int | None = Field(
        default=None, ge=1, description="Book groups (shard keys) with shard_by_book; None: books."
    )

    _window_doc_fn: WindowEncoderCallable | None = PrivateAttr(default=None)
    _known_keys: set[str] = PrivateAttr(default_factory=set)

    def __init__(
        self,
        collection_name: str,
        client: Any,
        *,
        sparse_doc_fn: SparseEncoderCallable,
        sparse_query_fn: SparseEncoderCallable,
        window_doc_fn: WindowEncoderCallable | None = None,
        new_windowed: bool | None = None,
        shard_by_book: bool = False,
        shard_groups: int | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        sparse_window_weight: float = 0.0,
        sparse_window_pool: int = DEFAULT_POOL,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            collection_name=collection_name,
            client=client,
            enable_hybrid=True,
            dense_vector_name=DENSE_NAME,
            sparse_vector_name=SPARSE_NAME,
            sparse_doc_fn=sparse_doc_fn,
            sparse_query_fn=sparse_query_fn,
            hybrid_fusion_fn=relative_score_fusion,
            shard_number=shard_number,
            replication_factor=replication_factor,
            **kwargs,
        )
        self._window_doc_fn = window_doc_fn
        windowed = window_doc_fn is not None if new_windowed is None else new_windowed
        self.window_vector_name = WINDOW_NAME if windowed else None
        self.shard_by_book = shard_by_book
        self.shard_groups = shard_groups
        # LlamaIndex's __init__ passes on only its own fields: ours are set here, validated
        self.sparse_window_weight = sparse_window_weight
        self.sparse_window_pool = sparse_window_pool
        if self._collection_initialized:
            self._read_collection()

    @classmethod
    def class_name(cls) -> str:
        return "QdrantServerStore"

    def set_window_fn(self, window_doc_fn: WindowEncoderCallable | None) -> None:
        """As ``QdrantEdgeVectorStore.set_window_fn``."""
        self._window_doc_fn = window_doc_fn

    def _read_collection(self) -> None:
        """What an existing collection was made with: windows, IDF, sharding."""
        info = self._client.get_collection(self.collection_name)
        params = info.config.params
        vectors = params.vectors if isinstance(params.vectors, dict) else {}
        multi = [n for n, v in vectors.items() if v.multivector_config is not None]
        self.window_vector_name = multi[0] if multi else None
        sparse = (params.sparse_vectors or {}).get(self.sparse_vector_name)
        legacy = sparse is not None and sparse.modifier == models.Modifier.IDF
        self.idf_scope = "collection" if legacy else "filter"
        if legacy:
            logger.warning(
                "%s keeps the server's collection-wide BM25 IDF (made before per-book IDF): "
                "re-export it from the embedded library for per-book BM25",
                self.collection_name,
            )
        self.shard_by_book = params.sharding_method == models.ShardingMethod.CUSTOM
        groups = (info.config.metadata or {}).get(SHARD_GROUPS_KEY)
        self.shard_groups = int(groups) if groups else None

    # ----------------------------------------------------------------------------- writes
    def _create_collection(self, collection_name: str, vector_size: int) -> None:
        create_collection(
            self._client,
            collection_name,
            vector_size,
            window_vector_name=self.window_vector_name,
            shard_by_book=self.shard_by_book,
            shard_groups=self.shard_groups,
            shard_number=self._shard_number,
            replication_factor=self._replication_factor,
        )
        self._collection_initialized = True

    def _build_points(
        self, nodes: list[BaseNode], sparse_vector_name: str
    ) -> tuple[list[Any], list[str]]:
        if self.window_vector_name and self._window_doc_fn is None:
            raise ValueError(
                f"{self.collection_name} keeps sentence-window vectors: pass window_doc_fn (e.g. "
                "litrag.scoring.windows.SentenceWindowEncoder) to add nodes"
            )
        points, ids = [], []
        for start in range(0, len(nodes), self.batch_size):
            batch = nodes[start : start + self.batch_size]
            assert self._sparse_doc_fn is not None
            idx, vals = self._sparse_doc_fn(
                [n.get_content(metadata_mode=MetadataMode.EMBED) for n in batch]
            )
            texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in batch]
            windows = self._window_doc_fn(texts) if self.window_vector_name else None
            for i, node in enumerate(batch):
                vector: dict[str, Any] = {
                    self.dense_vector_name: floats(node.get_embedding()),
                    sparse_vector_name: models.SparseVector(
                        indices=[int(x) for x in idx[i]], values=[float(x) for x in vals[i]]
                    ),
                }
                if windows is not None and self.window_vector_name:
                    vector[self.window_vector_name] = [floats(w) for w in windows[i]]
                payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
                payload[NODE_ID_KEY] = node.node_id
                payload[SENTENCE_PACKED_KEY] = pack_terms(sentence_terms(texts[i]))
                payload[TERMS_KEY] = distinct_terms(idx[i])
                pid = str(node_id_to_point_id(node.node_id))
                points.append(models.PointStruct(id=pid, vector=vector, payload=payload))
                ids.append(node.node_id)
        return points, ids

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Upsert nodes (their book's shard key when sharded by book); returns their ids."""
        if not nodes:
            return []
        if not self._collection_initialized:
            self._create_collection(self.collection_name, len(nodes[0].get_embedding()))
        points, ids = self._build_points(list(nodes), self.sparse_vector_name)
        groups: dict[str | None, list[Any]] = defaultdict(list)
        for p in points:
            key = None
            if self.shard_by_book:
                key = shard_key(str(p.payload.get("book_id") or ""), self.shard_groups)
            groups[key].append(p)
        for key, group in groups.items():
            if key is not None:
                self._ensure_shard_key(key)
            for start in range(0, len(group), self.batch_size):
                self._client.upsert(
                    collection_name=self.collection_name,
                    points=group[start : start + self.batch_size],
                    wait=True,
                    shard_key_selector=key,
                )
        return ids

    def _ensure_shard_key(self, key: str) -> None:
        """Create the shard key once (a server that already has it says so: fine)."""
        if key in self._known_keys:
            return
        try:
            self._client.create_shard_key(self.collection_name, shard_key=key)
        except Exception as exc:  # qdrant-client raises UnexpectedResponse / RpcError
            if "already exists" not in str(exc):
                raise
        self._known_keys.add(key)

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete nodes matching ids AND filters; with neither, every node (as LlamaIndex)."""
        if node_ids == []:
            return
        flt = self._ids_and_filters(node_ids, filters) or models.Filter()
        self._client.delete(
            collection_name=self.collection_name,
            points_selector=flt,
            shard_key_selector=self._keys(filters),  # a book's removal visits its shard only
        )

    # ----------------------------------------------------------------------------- reads
    def _ids_and_filters(
        self, node_ids: list[str] | None, filters: MetadataFilters | None
    ) -> models.Filter | None:
        must: list[Any] = []
        if node_ids is not None:
            must.append(
                models.HasIdCondition(has_id=[str(node_id_to_point_id(n)) for n in node_ids])
            )
        if filters is not None and filters.filters:
            must.append(self._build_subfilter(filters))
        return models.Filter(must=must) if must else None

    def count(self, filters: MetadataFilters | None = None) -> int:
        """Exact number of points (matching ``filters``)."""
        if not self._collection_initialized:
            return 0
        flt = self._build_subfilter(filters) if filters is not None and filters.filters else None
        return self._count(flt, self._keys(filters))

    def _count(self, flt: models.Filter | None, keys: list[str] | None) -> int:
        return self._client.count(
            self.collection_name, count_filter=flt, exact=True, shard_key_selector=keys
        ).count

    def get_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> list[BaseNode]:
        """Nodes by id (in the order asked) and/or filter, with their dense embeddings unless
        ``with_vectors=False`` (a retriever's blocks, whose vectors nothing reads)."""
        if not self._collection_initialized or node_ids == []:
            return []
        dense = [self.dense_vector_name]
        if node_ids is not None and filters is None:
            pids = [str(node_id_to_point_id(n)) for n in dict.fromkeys(node_ids)]
            vectors = dense if kwargs.get("with_vectors", True) else False
            recs = self._client.retrieve(
                self.collection_name, ids=pids, with_payload=True, with_vectors=vectors
            )
            by_id = {str(r.id): r for r in recs}
            out = [self._node(by_id[p]) for p in pids if p in by_id]
            return out[:limit] if limit is not None else out
        flt = self._ids_and_filters(node_ids, filters)
        return [self._node(r) for r in self._scroll(flt, limit, dense, self._keys(filters))]

    def _scroll(
        self,
        flt: models.Filter | None,
        limit: int | None,
        with_vectors: bool | list[str],
        keys: list[str] | None = None,
        page: int = 512,
    ) -> Iterator[Any]:
        return paged(
            lambda offset, n: self._client.scroll(
                self.collection_name,
                scroll_filter=flt,
                limit=n,
                offset=offset,
                with_payload=True,
                with_vectors=with_vectors,
                shard_key_selector=keys,
            ),
            page,
            limit,
        )

    def iter_records(self, batch_size: int = 256) -> Iterator[Any]:
        """Every point with all its vectors and payload: the input of an import."""
        if self._collection_initialized:
            yield from self._scroll(None, None, True, page=batch_size)

    def _node(self, rec: Any) -> BaseNode:
        node = metadata_dict_to_node(rec.payload)
        vec = rec.vector
        if isinstance(vec, dict) and vec.get(self.dense_vector_name) is not None:
            node.embedding = list(vec[self.dense_vector_name])
        return node

    def _keys(self, filters: MetadataFilters | None) -> list[str] | None:
        """The shard keys a request under ``filters`` names (None: every shard)."""
        if not self.shard_by_book:
            return None
        return keys_for(books_of(filters), self.shard_groups)

    # ----------------------------------------------------------------------------- queries
    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """DEFAULT (dense), SPARSE (or TEXT_SEARCH) and HYBRID queries, as the embedded store.

        kwargs: ``search_params`` ({"hnsw_ef": int, "exact": bool}); ``sparse_window_weight``
        overrides the store's for this query.
        """
        if not self._collection_initialized:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        return ServerSearch(self, relative_score_fusion).run(query, kwargs)

    def query_filter(self, query: VectorStoreQuery) -> models.Filter | None:
        """The query's doc ids, node ids and metadata filters as one filter (node ids mapped to
        point ids as they were written)."""
        if query.node_ids:
            query = replace(query, node_ids=[str(node_id_to_point_id(n)) for n in query.node_ids])
        return self._build_query_filter(query)

    def window_rescore(
        self,
        points: Sequence[Any],
        idf: dict[int, float],
        weight: float,
        limit: int,
    ) -> tuple[list[Any], list[float] | None]:
        """As the embedded store: BM25 candidates re-scored by their best window, cut to
        ``limit``; as they came when the weight is 0."""
        if weight <= 0 or not points:
            return list(points)[:limit], None
        stored = [
            p.payload.get(SENTENCE_PACKED_KEY, p.payload.get(SENTENCE_TERMS_KEY)) for p in points
        ]
        texts = [
            "" if kept is not None else _text(p) for p, kept in zip(points, stored, strict=True)
        ]
        scores = [float(p.score) for p in points]
        ranked = rescore(texts, scores, idf, weight, stored=stored)[:limit]
        return [points[i] for i, _ in ranked], [s for _, s in ranked]


def _text(point: Any) -> str:
    import json

    return json.loads(point.payload["_node_content"]).get("text", "")


def create_collection(
    client: Any,
    name: str,
    dense_dim: int,
    *,
    window_vector_name: str | None,
    shard_by_book: bool = False,
    shard_groups: int | None = None,
    shard_number: int | None = None,
    replication_factor: int | None = None,
) -> None:
    """A litrag collection: dense, window multivector (MaxSim), sparse without the server's IDF
    (computed per query over the filter), payload indexes; custom sharding when by book, its
    group count in the collection's metadata so that every reader names the same keys."""
    vectors = {DENSE_NAME: models.VectorParams(size=dense_dim, distance=models.Distance.COSINE)}
    if window_vector_name:
        vectors[window_vector_name] = models.VectorParams(
            size=dense_dim,
            distance=models.Distance.COSINE,
            multivector_config=models.MultiVectorConfig(
                comparator=models.MultiVectorComparator.MAX_SIM
            ),
        )
    client.create_collection(
        collection_name=name,
        vectors_config=vectors,
        sparse_vectors_config={SPARSE_NAME: models.SparseVectorParams()},
        shard_number=shard_number,
        replication_factor=replication_factor,
        sharding_method=models.ShardingMethod.CUSTOM if shard_by_book else None,
        metadata={SHARD_GROUPS_KEY: shard_groups or 0} if shard_by_book else None,
    )
    for field, schema in PAYLOAD_INDEXES.items():
        client.create_payload_index(name, field_name=field, field_schema=schema)
