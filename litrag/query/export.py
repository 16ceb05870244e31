"""Copy a library from the embedded store to a Qdrant server or cluster, without re-ingesting.

Points (dense and sparse vectors, payload) are read from the Edge shard in id order and upserted
in batches; progress is recorded after every batch, so an interrupted export resumes where it
stopped; the copy is verified by counting points on both sides. The target collection gets the
same vector names, the IDF modifier on the sparse vector, and the payload indexes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litrag.query.edge_store import QdrantEdgeVectorStore


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

    from litrag.query.stores import qdrant_client_settings
    from litrag.settings import ServerUnreachableError, SettingsError, unreachable_reason

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


def ensure_collection(client: Any, name: str, source: QdrantEdgeVectorStore, **kw: Any) -> None:
    """Create the target collection to match the source's vectors, unless it exists."""
    from qdrant_client import models

    if client.collection_exists(name):
        return
    cfg = source.config
    client.create_collection(
        collection_name=name,
        vectors_config={
            cfg.dense_vector_name: models.VectorParams(
                size=int(cfg.dense_dim or 0), distance=models.Distance.COSINE
            )
        },
        sparse_vectors_config={
            cfg.sparse_vector_name: models.SparseVectorParams(modifier=models.Modifier.IDF)
        },
        **kw,
    )
    for field, schema in (
        ("book_id", models.PayloadSchemaType.KEYWORD),  # the tenant key of a multi-book library
        ("chapter_index", models.PayloadSchemaType.INTEGER),
        ("doc_id", models.PayloadSchemaType.KEYWORD),
        ("ref_doc_id", models.PayloadSchemaType.KEYWORD),
    ):
        client.create_payload_index(name, field_name=field, field_schema=schema)


def export_library(
    source: QdrantEdgeVectorStore,
    client: Any,
    collection: str,
    progress_file: Path,
    batch_size: int = 256,
    shards: int | None = None,
    replication_factor: int | None = None,
) -> ExportReport:
    """Upsert every point of ``source`` into ``collection``; resumable through ``progress_file``."""
    from qdrant_client import models

    extra: dict[str, Any] = {}
    if shards:
        extra["shard_number"] = shards
    if replication_factor:
        extra["replication_factor"] = replication_factor
    ensure_collection(client, collection, source, **extra)
    done = _read_progress(progress_file, collection)
    cfg = source.config
    batch: list[Any] = []
    exported = skipped = 0
    last_id = done

    def flush() -> None:
        nonlocal batch, exported
        if not batch:
            return
        client.upsert(collection_name=collection, points=batch, wait=True)
        exported += len(batch)
        _write_progress(progress_file, collection, last_id)
        batch = []

    for point in source.iter_points(batch_size=batch_size):
        if done is not None and point.id <= done:
            skipped += 1
            continue
        vector: dict[str, Any] = {}
        if point.dense is not None:
            vector[cfg.dense_vector_name] = point.dense
        if point.sparse is not None:
            vector[cfg.sparse_vector_name] = models.SparseVector(
                indices=point.sparse[0], values=point.sparse[1]
            )
        batch.append(models.PointStruct(id=point.id, vector=vector, payload=point.payload))
        last_id = point.id
        if len(batch) >= batch_size:
            flush()
    flush()
    target = client.count(collection_name=collection, exact=True).count
    report = ExportReport(exported, skipped, source.count(), target)
    if report.verified:
        progress_file.unlink(missing_ok=True)
    return report


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
