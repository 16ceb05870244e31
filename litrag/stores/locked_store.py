"""The Edge store with its calls serialised, for a process whose threads share one shard."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)

from litrag.stores.edge_store import (
    Hit,
    PointId,
    QdrantEdgeVectorStore,
    StoredPoint,
    StoreLockedError,
)

REOPEN_WAIT_S = 60.0


class LockedEdgeStore(QdrantEdgeVectorStore):
    """``QdrantEdgeVectorStore`` whose every call holds one lock.

    Why: a UI ingests an upload (writes, then ``optimize``) while other sessions query, and the
    Edge binding makes no promise about calls from several threads at once. Queries take well
    under a millisecond, so serialising them costs nothing a reader notices; only ``optimize``
    at the end of an ingest (seconds) makes queries wait.
    """

    _lock: Any = PrivateAttr(default_factory=threading.RLock)
    _reopening: bool = PrivateAttr(default=False)

    @classmethod
    def class_name(cls) -> str:
        return "QdrantEdgeVectorStore"  # same persisted kind: it is the same store

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        with self._lock:
            return super().add(nodes, **add_kwargs)

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        with self._lock:
            super().delete(ref_doc_id, **delete_kwargs)

    def delete_nodes(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            super().delete_nodes(*args, **kwargs)

    def clear(self) -> None:
        with self._lock:
            super().clear()

    def count(self, filters: MetadataFilters | None = None) -> int:
        with self._lock:
            return super().count(filters=filters)

    def get_nodes(self, *args: Any, **kwargs: Any) -> list[BaseNode]:
        with self._lock:
            return super().get_nodes(*args, **kwargs)

    def iter_points(self, batch_size: int = 512) -> Iterator[StoredPoint]:
        with self._lock:
            points = list(super().iter_points(batch_size))
        yield from points

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        with self._lock:
            return super().query(query, **kwargs)

    def query_hits(
        self, query: VectorStoreQuery, keys: Sequence[str] = (), **kwargs: Any
    ) -> list[Hit]:
        with self._lock:
            return super().query_hits(query, keys, **kwargs)

    def nodes_at(self, point_ids: Sequence[PointId]) -> dict[PointId, BaseNode]:
        with self._lock:
            return super().nodes_at(point_ids)

    def optimize(self) -> float:
        with self._lock:
            self._reopening = True
            try:
                return super().optimize()
            finally:
                self._reopening = False

    def _open(self) -> None:
        """``optimize`` closes and reopens the shard: a ``litrag ask`` that slips into that gap
        holds it for a moment, so the reopen waits for it instead of failing."""
        deadline = time.monotonic() + REOPEN_WAIT_S
        while True:
            try:
                return super()._open()
            except StoreLockedError:
                if not self._reopening or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        with self._lock:
            super().close()
