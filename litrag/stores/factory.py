"""The vector store from settings: Qdrant Edge in-process by default, a Qdrant server by URL.

The rest of litrag talks only to LlamaIndex's vector-store interface and never knows which one
it has. A URL (``QDRANT_URL``, read by ``litrag.settings``, passed in by ``litrag.builders``)
switches to qdrant-client with no code change.
"""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any, Literal

from llama_index.core.vector_stores.types import BasePydanticVectorStore

from litrag.scoring.bm25 import BM25Encoder

DENSE_NAME = "text-dense"
SPARSE_NAME = "text-sparse"
# BM25's IDF over the books a query selects, not the whole library: a book's rare words (a dog's
# name, a place) stay rare however many other books are loaded, so a book answers the same alone
# or in a library. Collection-wide IDF let other books reorder a book's BM25 list: the ten Call
# of the Wild questions scored 6/10 in the six-book library and 5/10 alone. The server store
# (QdrantServerStore) computes the same filter-scoped IDF from counts (docs/qdrant-cluster.md).
EDGE_IDF_SCOPE: Literal["collection", "filter"] = "filter"


# BM25's average document length (terms) of a paragraph-children collection: the mean over the
# six shared books' 3,152 children (paragraphs merged to <= 200 words, embedding view), as
# the eval harness fits it for a paragraph index.
CHILD_AVG_LEN = 88.0


def children_collection(collection: str) -> str:
    """The collection of ``collection``'s paragraph children (small-to-big ranking)."""
    return f"{collection}-children"


def store_description(url: str | None = None) -> str:
    return f"Qdrant server at {url}" if url else "embedded Qdrant Edge"


def make_vector_store(
    home: Path,
    collection: str = "litrag",
    *,
    dense_dim: int | None = None,
    url: str | None = None,
    api_key: str | None = None,
    encoder: BM25Encoder | None = None,
    shards: int = 1,
    replication_factor: int = 1,
    window_doc_fn: Any = None,
    new_windowed: bool | None = None,
    thread_safe: bool = False,
    shard_by_book: bool = False,
    shard_groups: int | None = None,
) -> BasePydanticVectorStore:
    """A hybrid (dense + BM25) store for ``collection``.

    Without a URL: an Edge shard under ``home/index``, BM25 IDF over the selected books. With
    one: a collection on the server, with ``book_id`` as a keyword payload index (the tenant key)
    and ``chapter_index`` indexed.

    ``window_doc_fn`` (a ``SentenceWindowEncoder``): a new collection also keeps each block's
    sentence-window vectors and searches them for dense queries. It is needed to add nodes, not
    to query. ``new_windowed`` says whether a collection made now keeps them (default: whether
    ``window_doc_fn`` is given); an existing collection keeps what it was made with, and adding
    to a windowed one still needs ``window_doc_fn``. ``shard_by_book`` / ``shard_groups``
    (server only): a new collection sharded by book (a key per book, or per book group).

    ``thread_safe``: for a process whose threads share the store (the chat UI); the embedded
    store's calls then take one lock (``LockedEdgeStore``); qdrant-client is thread-safe as is.
    """
    encoder = encoder or BM25Encoder()
    if not url:
        if thread_safe:
            from litrag.stores.locked_store import LockedEdgeStore as QdrantEdgeVectorStore
        else:
            from litrag.stores.edge_store import QdrantEdgeVectorStore

        return QdrantEdgeVectorStore(
            path=home / "index",
            collection_name=collection,
            dense_dim=dense_dim,
            sparse_doc_fn=encoder.doc_fn,
            sparse_query_fn=encoder.query_fn,
            sparse_idf_scope=EDGE_IDF_SCOPE,
            window_doc_fn=window_doc_fn,
            new_windowed=new_windowed,
        )
    return _server_store(
        url,
        api_key,
        collection,
        encoder,
        shards=shards,
        replication_factor=replication_factor,
        window_doc_fn=window_doc_fn,
        new_windowed=new_windowed,
        shard_by_book=shard_by_book,
        shard_groups=shard_groups,
    )


def qdrant_client_settings(url: str, api_key: str | None) -> dict[str, Any]:
    """Keyword arguments for ``QdrantClient``: a server URL, or ``path:DIR`` for local mode."""
    if url.startswith("path:"):
        return {"path": url[len("path:") :]}
    return {"url": url, "api_key": api_key}


_LOCAL_CLIENTS: dict[str, Any] = {}  # qdrant-client local mode: one client per folder and process


@atexit.register
def _close_local_clients() -> None:
    """Close them before the interpreter tears down (their finaliser then fails noisily)."""
    for client in _LOCAL_CLIENTS.values():
        client.close()


def _client(url: str, api_key: str | None, make: Any) -> Any:
    """A client for ``url``. Local mode (``path:DIR``) locks its folder per client, so the
    collections of one library (blocks, children, assets) share one client in a process."""
    if not url.startswith("path:"):
        return make(**qdrant_client_settings(url, api_key))
    held = _LOCAL_CLIENTS.get(url)
    if held is None or getattr(held._client, "closed", False):  # QdrantLocal's flag
        _LOCAL_CLIENTS[url] = make(**qdrant_client_settings(url, api_key))
    return _LOCAL_CLIENTS[url]


def _server_store(
    url: str,
    api_key: str | None,
    collection: str,
    encoder: BM25Encoder,
    *,
    shards: int,
    replication_factor: int,
    window_doc_fn: Any,
    new_windowed: bool | None,
    shard_by_book: bool,
    shard_groups: int | None,
) -> BasePydanticVectorStore:
    try:
        from qdrant_client import QdrantClient

        from litrag.stores.server_store import QdrantServerStore
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "QDRANT_URL needs the 'server' extra: pip install 'litrag[server]'"
        ) from exc
    import warnings

    from litrag.settings import ServerUnreachableError, unreachable_reason

    try:
        # A server that is down is named here, in one line (not with qdrant-client's version
        # warning and a traceback); warnings of a server that answers are shown as ever.
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            client = _client(url, api_key, QdrantClient)
            client.get_collections()
        for w in said:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    except Exception as exc:
        reason = unreachable_reason(exc)
        if reason is None:
            raise
        raise ServerUnreachableError(
            "QDRANT_URL",
            "Qdrant server",
            url,
            reason,
            "start it, or unset QDRANT_URL to use the embedded store",
        ) from None
    return QdrantServerStore(
        collection,
        client,
        sparse_doc_fn=encoder.doc_fn,
        sparse_query_fn=encoder.query_fn,
        window_doc_fn=window_doc_fn,
        new_windowed=new_windowed,
        shard_by_book=shard_by_book,
        shard_groups=shard_groups,
        shard_number=shards,
        replication_factor=replication_factor,
    )
