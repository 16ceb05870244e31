"""The store factory: Edge by default, qdrant-client when QDRANT_URL is set, same pipeline."""

from __future__ import annotations

from pathlib import Path

from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from test_library import short_book

from litrag.answering.answer_types import Source
from litrag.builders import build_library
from litrag.ingestion.book_points import count_points
from litrag.retrieval.retriever import BookRetriever
from litrag.settings import Settings
from litrag.stores.factory import make_vector_store, qdrant_client_settings, store_description


def test_url_settings_build_the_client_arguments():
    assert qdrant_client_settings("http://qdrant:6333", "k") == {
        "url": "http://qdrant:6333",
        "api_key": "k",
    }
    assert qdrant_client_settings("path:/data/q", None) == {"path": "/data/q"}
    assert store_description("http://qdrant:6333") == "Qdrant server at http://qdrant:6333"
    assert store_description("") == "embedded Qdrant Edge"


def test_default_is_edge_and_url_is_qdrant_client(tmp_path, monkeypatch):
    """QDRANT_URL reaches the store through the settings, never read by the store itself."""
    monkeypatch.delenv("QDRANT_URL", raising=False)
    edge = make_vector_store(tmp_path / "a", dense_dim=8, url=Settings().qdrant_url)
    assert type(edge).__name__ == "QdrantEdgeVectorStore"
    edge.close()
    monkeypatch.setenv("QDRANT_URL", f"path:{tmp_path / 'server'}")
    unset = make_vector_store(tmp_path / "c", dense_dim=8)  # no url given: embedded
    assert type(unset).__name__ == "QdrantEdgeVectorStore"
    unset.close()
    server = make_vector_store(tmp_path / "b", dense_dim=8, url=Settings().qdrant_url)
    assert type(server).__name__ == "QdrantServerStore"
    assert server.enable_hybrid


def test_same_pipeline_against_qdrant_client(books_dir, tmp_path, monkeypatch):
    """QDRANT_URL switches the backend with no code change (local mode stands in for a server)."""
    monkeypatch.setenv("QDRANT_URL", f"path:{tmp_path / 'server'}")
    book = short_book(
        books_dir / "pg215_call_of_the_wild.txt", tmp_path / "wild.txt", "Chapter II."
    )
    lib = build_library(Settings(home=tmp_path / "home"))
    report = lib.ingest([book])
    assert report.ingested == ["pg215"], report.failed
    assert lib.book("pg215").nodes > 5
    q = "Who stole Buck from Judge Miller's place?"
    res = lib.store.query(
        VectorStoreQuery(
            query_embedding=lib.embed_model.get_query_embedding(q),
            query_str=q,
            similarity_top_k=5,
            sparse_top_k=5,
            hybrid_top_k=5,
            mode=VectorStoreQueryMode.HYBRID,
            filters=MetadataFilters(
                filters=[MetadataFilter(key="book_id", value="pg215", operator=FilterOperator.EQ)]
            ),
        )
    )
    assert res.nodes and all(n.metadata["book_id"] == "pg215" for n in res.nodes)
    # the paragraph children sit in a collection of their own on the server, and the product's
    # retrieval ranks the blocks through them there too
    assert type(lib.children_store).__name__ == "QdrantServerStore"
    assert count_points(lib.children_store, "pg215") == lib.book("pg215").children > 5
    through = BookRetriever(lib.store, lib.embed_model, "pg215", children_store=lib.children_store)
    got = through.retrieve("Manuel doubled a piece of stout rope around Buck's neck")
    assert any("Manuel" in n.node.get_content() for n in got)
    assert all(Source.from_node(1, n).evidence for n in got)
    assert Path(tmp_path / "server").exists() and not (tmp_path / "home" / "index").exists()
