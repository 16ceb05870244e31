"""Copy a library from the embedded store to a Qdrant server or cluster, without re-ingesting,
and back.

Points (dense, sparse and sentence-window vectors, payload) are read from the Edge shard in id
order and upserted in batches; progress is recorded after every batch, so an interrupted export
resumes where it stopped; the copy is verified by counting points on both sides. The target
collection is made as ``QdrantServerStore`` makes one (window multivector, sparse vector whose
IDF the store computes per query over the filter, payload indexes, optionally sharded by book),
so the copy answers as the embedded store did. ``import_library`` is the way back.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litrag.stores.edge_points import StoredPoint
from litrag.stores.edge_store import QdrantEdgeVectorStore
from litrag.stores.server_store import SHARD_GROUPS_KEY


@dataclass
class ExportReport:
    exported: int
    skipped: int
    source_count: int
    target_count: int

    @property
    def verified(self) -> bool:
        return self.source_count == self.target_count


def open_target(url: str, api_key: str | None, flag: str = "--to") -> Any:
    """A client of the Qdrant server at ``url`` (``path:DIR``: local mode) that has answered
    one call. Why: a mistyped or dead URL came out of the first upsert as qdrant-client's
    ``ResponseHandlingException``, an "unexpected failure" without the URL; now it is one line
    naming the flag and the URL (``SettingsError``), before anything is read or written."""
    import warnings
    from urllib.parse import urlsplit

    from qdrant_client import QdrantClient

    from litrag.settings import ServerUnreachableError, SettingsError, unreachable_reason
    from litrag.stores.factory import qdrant_client_settings

    url = url.strip()
    if url.startswith("path:"):
        if not url.removeprefix("path:"):
            raise SettingsError(f"{flag} path: needs a folder after it, got {url!r}")
    else:
        try:
            parts = urlsplit(url)
            host = parts.hostname
            parts.port  # noqa: B018  (a port that is not a number raises here)
        except ValueError:
            host = None
        if parts.scheme not in ("http", "https") or not host:
            raise SettingsError(
                f"{flag} must be a Qdrant URL like http://host:6333 (or path:DIR), got {url!r}"
            )
    try:
        with warnings.catch_warnings():  # its version-check warning says the same, worse
            warnings.simplefilter("ignore")
            client = QdrantClient(**qdrant_client_settings(url, api_key))
            client.get_collections()
    except Exception as exc:
        reason = unreachable_reason(exc)
        if reason is None:
            first = str(exc).splitlines()[0] if str(exc) else ""
            reason = f"{type(exc).__name__}: {first}"[:160]
        raise ServerUnreachableError(
            flag, "Qdrant server", url, reason, "start it, or check the URL"
        ) from None
    return client


def ensure_collection(
    client: Any,
    name: str,
    source: QdrantEdgeVectorStore,
    *,
    shard_by_book: bool = False,
    shard_groups: int | None = None,
    **kw: Any,
) -> None:
    """Create the target collection as ``QdrantServerStore`` makes one (window multivector where
    the source keeps one, sparse vector for filter-scoped IDF, payload indexes, sharding),
    unless it exists."""
    from litrag.stores.server_store import WINDOW_NAME, create_collection

    if client.collection_exists(name):
        return
    cfg = source.config
    create_collection(
        client,
        name,
        int(cfg.dense_dim or 0),
        window_vector_name=WINDOW_NAME if cfg.window_vector_name else None,
        shard_by_book=shard_by_book,
        shard_groups=shard_groups,
        shard_number=kw.get("shard_number"),
        replication_factor=kw.get("replication_factor"),
    )


def server_point(point: StoredPoint) -> Any:
    """An Edge point as the server store writes it: its vectors under the server's names, the
    block's distinct term ids (``_terms``: document frequencies count them) and its sentences'
    term ids (packed as Edge keeps them, cut from the text where the source did not keep them)."""
    from qdrant_client import models

    from litrag.scoring.kept_terms import pack_terms
    from litrag.scoring.window_bm25 import sentence_terms
    from litrag.stores.edge_points import KEPT_TERM_KEYS, SENTENCE_PACKED_KEY
    from litrag.stores.server_store import (
        DENSE_NAME,
        SPARSE_NAME,
        TERMS_KEY,
        WINDOW_NAME,
        distinct_terms,
    )

    vector: dict[str, Any] = {}
    payload = dict(point.payload)
    if point.dense is not None:
        vector[DENSE_NAME] = point.dense
    if point.windows is not None:
        vector[WINDOW_NAME] = point.windows
    if point.sparse is not None:
        vector[SPARSE_NAME] = models.SparseVector(indices=point.sparse[0], values=point.sparse[1])
        payload[TERMS_KEY] = distinct_terms(point.sparse[0])
        if not any(k in payload for k in KEPT_TERM_KEYS):
            text = json.loads(payload.get("_node_content") or "{}").get("text", "")
            payload[SENTENCE_PACKED_KEY] = pack_terms(sentence_terms(text))
    return models.PointStruct(id=point.id, vector=vector, payload=payload)


def export_library(
    source: QdrantEdgeVectorStore,
    client: Any,
    collection: str,
    progress_file: Path,
    batch_size: int = 256,
    shards: int | None = None,
    replication_factor: int | None = None,
    shard_by_book: bool = False,
    shard_groups: int | None = None,
) -> ExportReport:
    """Upsert every point of ``source`` into ``collection`` (every vector: dense, sparse,
    windows), each under its book's shard key when sharded by book; resumable through
    ``progress_file``."""
    from litrag.stores.server_shards import shard_key

    extra: dict[str, Any] = {}
    if shards:
        extra["shard_number"] = shards
    if replication_factor:
        extra["replication_factor"] = replication_factor
    ensure_collection(
        client, collection, source, shard_by_book=shard_by_book, shard_groups=shard_groups, **extra
    )
    if shard_by_book:  # an existing collection says how it is sharded
        info = client.get_collection(collection)
        shard_groups = int((info.config.metadata or {}).get(SHARD_GROUPS_KEY) or 0) or None
    done = _read_progress(progress_file, collection)
    batch: list[Any] = []
    exported = skipped = 0
    last_id = done
    keys: set[str] = set()

    def flush() -> None:
        nonlocal batch, exported
        if not batch:
            return
        groups: dict[str | None, list[Any]] = {}
        for p in batch:
            key = (
                shard_key(str(p.payload.get("book_id") or ""), shard_groups)
                if shard_by_book
                else None
            )
            groups.setdefault(key, []).append(p)
        for key, points in groups.items():
            if key is not None and key not in keys:
                _create_shard_key(client, collection, key)
                keys.add(key)
            client.upsert(
                collection_name=collection, points=points, wait=True, shard_key_selector=key
            )
        exported += len(batch)
        _write_progress(progress_file, collection, last_id)
        batch = []

    for point in source.iter_points(batch_size=batch_size):
        if done is not None and point.id <= done:
            skipped += 1
            continue
        batch.append(server_point(point))
        last_id = point.id
        if len(batch) >= batch_size:
            flush()
    flush()
    target = client.count(collection_name=collection, exact=True).count
    report = ExportReport(exported, skipped, source.count(), target)
    if report.verified:
        progress_file.unlink(missing_ok=True)
    return report


def _create_shard_key(client: Any, collection: str, key: str) -> None:
    try:
        client.create_shard_key(collection, shard_key=key)
    except Exception as exc:  # a key made by an earlier, interrupted run
        if "already exists" not in str(exc):
            raise


def import_library(
    client: Any,
    collection: str,
    target: QdrantEdgeVectorStore,
    batch_size: int = 256,
) -> ExportReport:
    """The way back: every point of a server collection into an embedded store made for it
    (``QdrantEdgeVectorStore(path, name, dense_dim=..., new_windowed=...)``), every vector
    kept; the server-only ``_terms`` payload is left behind."""
    import qdrant_edge as qe

    from litrag.stores.server_store import DENSE_NAME, SPARSE_NAME, TERMS_KEY, WINDOW_NAME

    cfg = target.config
    shard = target.client
    if shard is None:
        raise ValueError("the embedded target needs its dense size: pass dense_dim")
    exported = 0
    offset = None
    while True:
        recs, offset = client.scroll(
            collection, limit=batch_size, offset=offset, with_payload=True, with_vectors=True
        )
        points = []
        for r in recs:
            vec = r.vector or {}
            vector: dict[str, Any] = {cfg.dense_vector_name: list(vec[DENSE_NAME])}
            if vec.get(SPARSE_NAME) is not None:
                sp = vec[SPARSE_NAME]
                vector[cfg.sparse_vector_name] = qe.SparseVector(list(sp.indices), list(sp.values))
            if cfg.window_vector_name and vec.get(WINDOW_NAME) is not None:
                vector[cfg.window_vector_name] = [list(w) for w in vec[WINDOW_NAME]]
            payload = {k: v for k, v in (r.payload or {}).items() if k != TERMS_KEY}
            points.append(qe.Point(id=uuid.UUID(str(r.id)), vector=vector, payload=payload))
        if points:
            shard.update(qe.UpdateOperation.upsert_points(points))
            exported += len(points)
        if offset is None or not recs:
            break
    source_count = client.count(collection_name=collection, exact=True).count
    return ExportReport(exported, 0, source_count, target.count())


def _read_progress(path: Path, collection: str) -> str | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data.get("last_id") if data.get("collection") == collection else None


def _write_progress(path: Path, collection: str, last_id: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"collection": collection, "last_id": last_id}), encoding="utf-8")
    os.replace(tmp, path)
