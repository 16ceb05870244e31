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


# ------------------------------------------------------- `litrag export` arguments (issue 34)
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--to", "notaurl"], "--to must be a Qdrant URL like http://host:6333 (or path:DIR), got"),
        (["--to", ""], "--to must be a Qdrant URL like http://host:6333 (or path:DIR), got ''"),
        (["--to", "http://:6333"], "--to must be a Qdrant URL"),
        (["--to", "path:"], "--to path: needs a folder after it"),
        (["--to", "DEAD"], "--to: the Qdrant server at DEAD is unreachable ("),
        (["--to", "DEAD", "--shards", "0"], "--shards must be at least 1, got 0"),
        (["--to", "DEAD", "--replication-factor", "-1"], "--replication-factor must be at least 1"),
    ],
)
def test_export_refuses_a_bad_target_in_one_line(tmp_path, monkeypatch, capsys, flags, message):
    """``--to notaurl``, ``""`` and a dead URL were qdrant-client's ResponseHandlingException,
    an "unexpected failure" without the URL; ``--shards 0`` was taken."""
    from test_answer import free_port

    from litrag.cli import main

    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    flags = [dead if f == "DEAD" else f for f in flags]
    message = message.replace("DEAD", dead)
    home = tmp_path / "home"
    monkeypatch.setenv("LITRAG_HOME", str(home))
    monkeypatch.delenv("QDRANT_URL", raising=False)
    code = main(["export", *flags])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {message}"), err
    assert not (home / "export-progress.json").exists()
