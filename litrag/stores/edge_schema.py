"""A Qdrant Edge collection's structural settings, and the files kept beside its shard.

``EdgeStoreConfig`` (vector names and sizes, distance, HNSW, payload indexes) is saved as
``litrag_store.json`` so a reopen needs no arguments; ``edge_config`` turns it into the engine's
``EdgeConfig``. ``owner.json`` names the process that holds the shard, so a second opener's error
can say who holds it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Literal

import qdrant_edge as qe
from llama_index.core.bridge.pydantic import BaseModel, Field

CONFIG_FILE = "litrag_store.json"
OWNER_FILE = "owner.json"
SHARD_DIR = "shard"
DOC_ID_KEY = "doc_id"  # LlamaIndex's QdrantVectorStore deletes by this payload key

PayloadIndexType = Literal["keyword", "integer", "float", "bool", "datetime", "uuid", "text"]
PAYLOAD_SCHEMA = {
    "keyword": qe.PayloadSchemaType.Keyword,
    "integer": qe.PayloadSchemaType.Integer,
    "float": qe.PayloadSchemaType.Float,
    "bool": qe.PayloadSchemaType.Bool,
    "datetime": qe.PayloadSchemaType.Datetime,
    "uuid": qe.PayloadSchemaType.Uuid,
    "text": qe.PayloadSchemaType.Text,
}
_DISTANCE = {"cosine": qe.Distance.Cosine, "dot": qe.Distance.Dot, "euclid": qe.Distance.Euclid}


class EdgeStoreConfig(BaseModel):
    """The structural settings of a collection, persisted beside the shard."""

    format_version: int = Field(default=1, description="Layout version of this JSON file.")
    dense_dim: int | None = Field(
        default=None, description="Dense vector size; None until the first add supplies it."
    )
    distance: Literal["cosine", "dot", "euclid"] = Field(
        default="cosine", description="Dense distance (cosine vectors are stored normalised)."
    )
    dense_vector_name: str = Field(
        default="text-dense", description="Name of the dense vector (LlamaIndex's default)."
    )
    sparse_vector_name: str = Field(default="text-sparse", description="Name of the sparse vector.")
    window_vector_name: str | None = Field(
        default=None,
        description=(
            "Name of a multivector (MaxSim) of each node's sentence windows, which dense queries "
            "then search instead of the one-per-node vector; None: no window vectors. Set when "
            "the collection is created with a window_doc_fn."
        ),
    )
    sparse_idf: bool = Field(
        default=True, description="Let the engine apply IDF to sparse scores (BM25-style)."
    )
    payload_indexes: dict[str, PayloadIndexType] = Field(
        default_factory=lambda: {
            "book_id": "keyword",
            "chapter_index": "integer",
            DOC_ID_KEY: "keyword",
            "ref_doc_id": "keyword",
        },
        description="Payload fields indexed for filtering; filters on others still work, slower.",
    )
    search_threads: int | None = Field(
        default=1,
        description=(
            "Threads one query may search with (Edge's max_search_threads; None: Edge's own "
            "choice, all cores). A reader's question is a small filtered search that finishes "
            "sooner on one (100k blocks, 2 cores: children hybrid p50 ~5.3 against ~6.5 ms, "
            "benchmarks/bench_retrieval_scale.py), and a server's readers then share the cores."
        ),
    )
    hnsw_m: int = Field(default=16, description="HNSW edges per node.")
    hnsw_ef_construct: int = Field(
        default=100, description="HNSW build beam; higher is better recall, slower optimize()."
    )
    full_scan_threshold_kb: int = Field(
        default=20_000,
        description=(
            "Below this many KB of vectors (a segment, or a filter's estimated matches) search is "
            "exact brute force instead of HNSW: ~20k 256-d or ~13k 384-d vectors. Keeps book-"
            "filtered and small-collection search exact."
        ),
    )
    indexing_threshold_kb: int | None = Field(
        default=None,
        description="Segments above this many KB of vectors get HNSW at optimize(); None: Edge's.",
    )


def edge_config(c: EdgeStoreConfig) -> qe.EdgeConfig:
    """The engine's ``EdgeConfig`` for a new shard (``dense_dim`` must be known)."""
    assert c.dense_dim is not None
    distance = _DISTANCE[c.distance]
    vectors = {c.dense_vector_name: qe.EdgeVectorParams(size=c.dense_dim, distance=distance)}
    if c.window_vector_name:
        vectors[c.window_vector_name] = qe.EdgeVectorParams(
            size=c.dense_dim,
            distance=distance,
            multivector_config=qe.MultiVectorConfig(comparator=qe.MultiVectorComparator.MaxSim),
        )
    return qe.EdgeConfig(
        vectors=vectors,
        sparse_vectors={
            c.sparse_vector_name: qe.EdgeSparseVectorParams(
                modifier=qe.Modifier.Idf if c.sparse_idf else None
            )
        },
        max_search_threads=c.search_threads,
        hnsw_config=qe.HnswIndexConfig(
            m=c.hnsw_m,
            ef_construct=c.hnsw_ef_construct,
            full_scan_threshold=c.full_scan_threshold_kb,
        ),
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=c.indexing_threshold_kb)
        if c.indexing_threshold_kb is not None
        else None,
    )


def shard_dense_dim(shard: qe.EdgeShard, name: str) -> int | None:
    recs, _ = shard.scroll(qe.ScrollRequest(limit=1, with_payload=False, with_vector=[name]))
    if recs and isinstance(recs[0].vector, dict) and name in recs[0].vector:
        return len(recs[0].vector[name])
    return None


def is_lock_error(e: BaseException) -> bool:
    msg = str(e)
    return "WouldBlock" in msg or "lock" in msg.lower()


def read_config(folder: Path) -> EdgeStoreConfig | None:
    """The saved config; None when there is none. A damaged file is a ``ValueError``."""
    p = folder / CONFIG_FILE
    if not p.exists():
        return None
    return EdgeStoreConfig.model_validate_json(p.read_text(encoding="utf-8"))


def shard_config_path(folder: Path) -> Path:
    """The engine's own config of the shard (written by Edge when the shard is created)."""
    return folder / SHARD_DIR / "edge_config.json"


def read_shard_config(folder: Path) -> dict[str, Any] | None:
    """The shard's ``edge_config.json`` as a dict; None when absent or unreadable."""
    try:
        return json.loads(shard_config_path(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def config_mismatch(folder: Path, cfg: EdgeStoreConfig) -> str | None:
    """Why ``cfg`` does not describe the shard in ``folder`` (its vector names and sizes), or
    None when it does (or there is no shard yet). Why: a config that lost its window vector name
    would silently search the per-block vectors and cite other passages."""
    shard = read_shard_config(folder)
    if shard is None:
        return None
    dense = shard.get("vectors") or {}
    multi = sorted(n for n, v in dense.items() if v.get("multivector_config"))
    single = sorted(n for n, v in dense.items() if not v.get("multivector_config"))
    want_multi = [cfg.window_vector_name] if cfg.window_vector_name else []
    if single != [cfg.dense_vector_name] or multi != want_multi:
        return (
            f"{CONFIG_FILE} names the vectors {[cfg.dense_vector_name, *want_multi]} but the shard "
            f"holds {single + multi}"
        )
    size = dense[cfg.dense_vector_name].get("size")
    if cfg.dense_dim is not None and size != cfg.dense_dim:
        return f"{CONFIG_FILE} says {cfg.dense_dim}-d vectors but the shard holds {size}-d ones"
    if sorted(shard.get("sparse_vectors") or {}) != [cfg.sparse_vector_name]:
        return f"{CONFIG_FILE} names the sparse vector {cfg.sparse_vector_name!r}, the shard not"
    return None


def config_from_shard(folder: Path) -> EdgeStoreConfig:
    """Re-derive ``litrag_store.json`` from the shard's own config (vector names and sizes,
    distance, IDF, HNSW); payload indexes are the defaults, which ingest creates."""
    shard = read_shard_config(folder)
    if shard is None:
        raise ValueError(f"{shard_config_path(folder)} is missing or damaged")
    vectors = shard.get("vectors") or {}
    single = [n for n, v in vectors.items() if not v.get("multivector_config")]
    multi = [n for n, v in vectors.items() if v.get("multivector_config")]
    sparse = list(shard.get("sparse_vectors") or {})
    if len(single) != 1 or len(multi) > 1 or len(sparse) != 1:
        raise ValueError(f"{shard_config_path(folder)}: vectors {list(vectors)} are not litrag's")
    dense = vectors[single[0]]
    hnsw = shard.get("hnsw_config") or {}
    defaults = EdgeStoreConfig()
    return EdgeStoreConfig(
        dense_dim=dense.get("size"),
        distance=str(dense.get("distance", "cosine")).lower(),  # type: ignore[arg-type]
        dense_vector_name=single[0],
        sparse_vector_name=sparse[0],
        window_vector_name=multi[0] if multi else None,
        sparse_idf=(shard["sparse_vectors"][sparse[0]] or {}).get("modifier") == "idf",
        hnsw_m=hnsw.get("m", defaults.hnsw_m),
        hnsw_ef_construct=hnsw.get("ef_construct", defaults.hnsw_ef_construct),
        full_scan_threshold_kb=hnsw.get("full_scan_threshold", defaults.full_scan_threshold_kb),
    )


def write_config(folder: Path, cfg: EdgeStoreConfig) -> None:
    _atomic_write(folder / CONFIG_FILE, cfg.model_dump_json(indent=2))


def write_owner(folder: Path) -> None:
    owner = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv)[:300],
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    _atomic_write(folder / OWNER_FILE, json.dumps(owner))


def read_owner(folder: Path) -> str | None:
    try:
        o = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    this = " (this process)" if o.get("pid") == os.getpid() else ""
    cmd = f" `{o['command']}`" if o.get("command") else ""
    return f"pid {o.get('pid')}{this} on {o.get('host')}{cmd} since {o.get('since')}"


def remove_owner(folder: Path) -> None:
    p = folder / OWNER_FILE
    try:
        if json.loads(p.read_text(encoding="utf-8")).get("pid") == os.getpid():
            p.unlink()
    except (OSError, ValueError):
        pass


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
