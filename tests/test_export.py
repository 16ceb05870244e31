"""Export from the embedded store to qdrant-client (local mode standing in for a server)."""

from __future__ import annotations

import warnings

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from qdrant_client import QdrantClient
from test_store_contract import corpus  # noqa: F401  (fixture: real paragraphs, real vectors)

from litrag.query.bm25 import BM25Encoder
from litrag.query.edge_store import QdrantEdgeVectorStore
from litrag.query.export import export_library


@pytest.fixture
def source(tmp_path, corpus):  # noqa: F811
    enc = BM25Encoder()
    nodes = corpus.copy_nodes()
    store = QdrantEdgeVectorStore(
        path=tmp_path / "index",
        dense_dim=len(nodes[0].embedding),
        sparse_doc_fn=enc.doc_fn,
        sparse_query_fn=enc.query_fn,
    )
    store.add(nodes)
    yield store, nodes, enc
    store.close()


def test_export_copies_verifies_and_resumes(source, tmp_path):
    store, nodes, enc = source
    client = QdrantClient(path=str(tmp_path / "server"))
    progress = tmp_path / "progress.json"
    warnings.simplefilter("ignore")

    class Interrupted(Exception):
        pass

    calls = {"n": 0}
    real_upsert = client.upsert

    def flaky_upsert(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise Interrupted
        return real_upsert(*args, **kwargs)

    client.upsert = flaky_upsert
    with pytest.raises(Interrupted):
        export_library(store, client, "books", progress, batch_size=40)
    assert progress.exists()
    client.upsert = real_upsert
    report = export_library(store, client, "books", progress, batch_size=40)
    assert report.skipped == 40 and report.exported == len(nodes) - 40
    assert report.verified and report.target_count == len(nodes)
    assert not progress.exists()

    # the copy answers LlamaIndex's QdrantVectorStore queries like the source does
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    target = QdrantVectorStore(
        collection_name="books",
        client=client,
        enable_hybrid=True,
        dense_vector_name="text-dense",
        sparse_vector_name="text-sparse",
        sparse_doc_fn=enc.doc_fn,
        sparse_query_fn=enc.query_fn,
    )
    probe = nodes[17]
    query = VectorStoreQuery(
        query_embedding=probe.embedding,
        query_str=probe.get_content(),
        similarity_top_k=3,
        sparse_top_k=3,
        hybrid_top_k=3,
        mode=VectorStoreQueryMode.HYBRID,
    )
    got = target.query(query)
    want = store.query(query)
    assert got.ids[0] == want.ids[0] == probe.node_id
    assert got.nodes[0].get_content() == probe.get_content()
    assert got.nodes[0].metadata == probe.metadata
