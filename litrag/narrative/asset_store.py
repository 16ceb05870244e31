"""Where a book's assets live: their own Qdrant collection and a LlamaIndex property graph.

Asset nodes (``profiles.build_nodes``) go into ``<collection>-assets``, made by the same
``make_vector_store`` as the blocks (embedded Qdrant Edge, or the server at ``QDRANT_URL``), with
dense and BM25 vectors, so ``BookRetriever`` searches them with the same hybrid query, book filter
and spoiler filter (``chapter_index <= N``). Relations also go into LlamaIndex's
``SimplePropertyGraphStore`` (embedded, ``<home>/assets/graph.json``): entity nodes
``<book>:<id>``, one relation per (source, phrase, target), with the chapter and block it was
read in. Replacing a book's assets deletes its old ones first; ``remove_assets`` is what the
library calls when a book is removed or re-ingested.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from litrag.narrative.assets import extractions_path
from litrag.narrative.profiles import Resolution

ASSETS_SUFFIX = "-assets"
GRAPH_FILE = "graph.json"


def assets_collection(collection: str) -> str:
    return f"{collection}{ASSETS_SUFFIX}"


def graph_path(home: Path) -> Path:
    return Path(home) / "assets" / GRAPH_FILE


def _filters(book_id: str, **conds: Any) -> MetadataFilters:
    parts = [MetadataFilter(key="book_id", value=book_id, operator=FilterOperator.EQ)]
    for key, value in conds.items():
        if value is None:
            continue
        if key == "upto_chapter":
            parts.append(
                MetadataFilter(key="chapter_index", value=value, operator=FilterOperator.LTE)
            )
        elif key == "entity":
            parts.append(
                MetadataFilter(key="entities", value=value, operator=FilterOperator.CONTAINS)
            )
        else:
            parts.append(MetadataFilter(key=key, value=value, operator=FilterOperator.EQ))
    return MetadataFilters(filters=parts)


class AssetStore:
    """A library's asset collection and relation graph."""

    def __init__(self, home: Path, vector_store: Any, embed_model: Any = None) -> None:
        self.home = Path(home)
        self.store = vector_store
        self.embed_model = embed_model

    @classmethod
    def open(
        cls,
        home: Path,
        collection: str = "litrag",
        *,
        url: str | None = None,
        api_key: str | None = None,
        embed_model: Any = None,
    ) -> AssetStore:
        from litrag.stores.factory import make_vector_store

        dim = None
        if embed_model is not None:
            dim = len(embed_model.get_text_embedding("dimension probe"))
        store = make_vector_store(
            Path(home), assets_collection(collection), dense_dim=dim, url=url, api_key=api_key
        )
        return cls(home, store, embed_model)

    def close(self) -> None:
        if hasattr(self.store, "close"):
            self.store.close()

    def __enter__(self) -> AssetStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------
    def replace_book(
        self, book_id: str, nodes: Sequence[TextNode], resolution: Resolution | None = None
    ) -> int:
        """The book's assets become ``nodes`` (embedded here) and its relations the graph's."""
        if self.embed_model is None:
            raise ValueError("AssetStore needs an embed_model to add assets")
        self.store.delete_nodes(filters=_filters(book_id))
        for start in range(0, len(nodes), 256):
            batch = self.embed_model(list(nodes[start : start + 256]))
            self.store.add(batch)
        if resolution is not None:
            write_graph(self.home, book_id, resolution)
        return len(nodes)

    def remove_book(self, book_id: str) -> None:
        self.store.delete_nodes(filters=_filters(book_id))
        remove_graph(self.home, book_id)

    # -- reads ------------------------------------------------------------------------------
    def get(
        self,
        book_id: str,
        asset_type: str | None = None,
        *,
        entity: str | None = None,
        upto_chapter: int | None = None,
        chapter: int | None = None,
    ) -> list[BaseNode]:
        """Asset nodes by filter, in chapter order; the spoiler limit is a store filter."""
        flt = _filters(
            book_id,
            asset_type=asset_type,
            entity=entity,
            upto_chapter=upto_chapter,
            chapter_index=chapter,
        )
        nodes = self.store.get_nodes(filters=flt)
        return sorted(nodes, key=lambda n: (n.metadata.get("chapter_index", 0), n.node_id))

    def has_book(self, book_id: str) -> bool:
        """Whether the book has any stored asset (one point read, not all of them)."""
        return bool(self.store.get_nodes(filters=_filters(book_id), limit=1))

    def count(self, book_id: str) -> int:
        return len(self.store.get_nodes(filters=_filters(book_id)))

    def profile(
        self, book_id: str, entity: str, upto_chapter: int | None = None
    ) -> BaseNode | None:
        """The profile of ``entity`` (a canonical id) as of ``upto_chapter``: its latest
        snapshot the store lets through the spoiler filter."""
        found = self.get(book_id, "entity_profile", entity=entity, upto_chapter=upto_chapter)
        return found[-1] if found else None

    def outline(
        self, book_id: str, chapter: int, upto_chapter: int | None = None
    ) -> BaseNode | None:
        if upto_chapter is not None and chapter > upto_chapter:
            return None
        found = self.get(book_id, "chapter_outline", chapter=chapter, upto_chapter=upto_chapter)
        return found[-1] if found else None

    def retriever(self, book_id: str, upto_chapter: int | None = None, **kwargs: Any) -> Any:
        """A ``BookRetriever`` over the assets: hybrid search, book and spoiler filter."""
        from litrag.retrieval.retriever import BookRetriever

        return BookRetriever(
            self.store, self.embed_model, book_id, upto_chapter=upto_chapter, **kwargs
        )


# -------------------------------------------------------------------------- property graph
def _load_graph(home: Path) -> Any:
    from llama_index.core.graph_stores import SimplePropertyGraphStore

    path = graph_path(home)
    if path.is_file():
        return SimplePropertyGraphStore.from_persist_path(str(path))
    return SimplePropertyGraphStore()


def _save_graph(home: Path, graph: Any) -> None:
    path = graph_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    graph.persist(str(tmp))
    os.replace(tmp, path)


def write_graph(home: Path, book_id: str, res: Resolution) -> int:
    """The book's entities and relations into the embedded property graph (old ones out)."""
    from llama_index.core.graph_stores.types import EntityNode, Relation

    graph = _load_graph(home)
    graph.delete(properties={"book_id": book_id})
    nodes = {
        eid: EntityNode(
            name=f"{book_id}:{eid}",
            label=info.type,
            properties={"book_id": book_id, "entity_id": eid, "display_name": info.name},
        )
        for eid, info in res.entities.items()
    }
    rels = []
    for it in res.items:
        if it.kind != "relation" or len(it.entities) != 2:
            continue
        a, b = it.entities
        for eid in (a, b):
            nodes.setdefault(
                eid,
                EntityNode(
                    name=f"{book_id}:{eid}",
                    label="entity",
                    properties={"book_id": book_id, "entity_id": eid, "display_name": eid},
                ),
            )
        phrase = it.text
        rels.append(
            Relation(
                label=phrase,
                source_id=nodes[a].id,
                target_id=nodes[b].id,
                properties={
                    "book_id": book_id,
                    "chapter_index": it.chapter,
                    "source_block": it.block,
                },
            )
        )
    graph.upsert_nodes(list(nodes.values()))
    graph.upsert_relations(rels)
    _save_graph(home, graph)
    return len(rels)


def graph_relations(
    home: Path, book_id: str, entity: str | None = None, upto_chapter: int | None = None
) -> list[tuple[str, str, str, int]]:
    """``(source id, relation, target id, chapter)`` of a book from the graph, spoiler-limited."""
    graph = _load_graph(home)
    out = []
    for src, rel, tgt in graph.get_triplets(properties={"book_id": book_id}):
        ch = int(rel.properties.get("chapter_index", 0))
        if upto_chapter is not None and ch > upto_chapter:
            continue
        a, b = src.properties.get("entity_id"), tgt.properties.get("entity_id")
        if entity is not None and entity not in (a, b):
            continue
        out.append((str(a), rel.label, str(b), ch))
    return sorted(out, key=lambda r: (r[3], r[0], r[2]))


def remove_graph(home: Path, book_id: str) -> None:
    if not graph_path(home).is_file():
        return
    graph = _load_graph(home)
    graph.delete(properties={"book_id": book_id})
    _save_graph(home, graph)


def remove_assets(
    home: Path,
    book_id: str,
    collection: str = "litrag",
    *,
    url: str | None = None,
    api_key: str | None = None,
) -> None:
    """Everything of a book's assets: its extractions file, graph entries and asset points.
    The asset collection is opened only where it exists (nothing is created to be emptied)."""
    extractions_path(home, book_id).unlink(missing_ok=True)
    remove_graph(home, book_id)
    if url is None and not (Path(home) / "index" / assets_collection(collection)).exists():
        return
    store = AssetStore.open(home, collection, url=url, api_key=api_key)
    try:
        store.store.delete_nodes(filters=_filters(book_id))
    except Exception:
        if url is None:
            raise  # a server without the collection: nothing to remove
    finally:
        store.close()


class AssetRemover:
    """The ``Library`` hook: a removed or replaced book loses its assets too."""

    def __init__(
        self, home: Path, collection: str, url: str | None = None, api_key: str | None = None
    ) -> None:
        self.home, self.collection, self.url, self.api_key = Path(home), collection, url, api_key

    def remove(self, book_id: str) -> None:
        remove_assets(self.home, book_id, self.collection, url=self.url, api_key=self.api_key)
