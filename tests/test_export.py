"""Export from the embedded store to qdrant-client (local mode standing in for a server)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from qdrant_client import QdrantClient
from test_store_contract import corpus  # noqa: F401  (fixture: real paragraphs, real vectors)

import litrag
from litrag.scoring.bm25 import BM25Encoder
from litrag.stores.edge_store import QdrantEdgeVectorStore
from litrag.stores.export import export_library


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

    # the copy answers through the server store like the source does
    from litrag.stores.server_store import QdrantServerStore

    target = QdrantServerStore(
        "books", client, sparse_doc_fn=enc.doc_fn, sparse_query_fn=enc.query_fn
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


# ------------------------------------------------------- both ways, every vector (issue 35)
def test_export_and_back_keep_every_vector_and_the_answers(tmp_path, data_dir):
    """The bundled book in a windowed embedded store, exported to qdrant-client and imported
    back: every vector (dense, BM25, sentence windows) and payload survives both ways, and the
    three stores give the same top 5 for the book's public questions."""
    import json

    import numpy as np
    from test_server_store import _book, _query, assert_same_top

    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book
    from litrag.scoring.windows import SentenceWindowEncoder
    from litrag.segment import LitSegNodeParser
    from litrag.segment.offline import StaticVectors
    from litrag.stores.export import import_library
    from litrag.stores.server_store import TERMS_KEY, WINDOW_NAME, QdrantServerStore

    book = load_book(Path(litrag.__file__).parent / "data" / "pg215_call_of_the_wild.txt")
    nodes = LitSegNodeParser().get_nodes_from_documents(split_chapters(book))
    sv = StaticVectors()
    for n, v in zip(nodes, sv.encode([n.get_content() for n in nodes]), strict=True):
        n.embedding = v.tolist()
    windows = SentenceWindowEncoder(lambda t: sv.encode(t).tolist())
    enc = BM25Encoder()
    kw = {"sparse_doc_fn": enc.doc_fn, "sparse_query_fn": enc.query_fn, "sparse_window_weight": 0.3}
    warnings.simplefilter("ignore")
    edge = QdrantEdgeVectorStore(
        tmp_path / "edge", "books", window_doc_fn=windows, sparse_idf_scope="filter", **kw
    )
    edge.add(nodes)
    client = QdrantClient(path=str(tmp_path / "server"))
    report = export_library(edge, client, "books", tmp_path / "progress.json")
    assert report.verified and report.target_count == len(nodes)
    back = QdrantEdgeVectorStore(
        tmp_path / "back",
        "books",
        dense_dim=len(nodes[0].embedding),
        new_windowed=True,
        sparse_idf_scope="filter",
        **kw,
    )
    assert import_library(client, "books", back).verified
    try:
        source = {p.id: p for p in edge.iter_points()}
        returned = {p.id: p for p in back.iter_points()}
        served = {
            str(r.id): r
            for r in client.scroll("books", limit=10_000, with_vectors=True, with_payload=True)[0]
        }
        assert set(source) == set(returned) == set(served)
        for pid, p in source.items():
            r, s = returned[pid], served[pid]
            assert p.windows and len(p.windows) == len(s.vector[WINDOW_NAME]) == len(r.windows)
            np.testing.assert_allclose(p.windows, s.vector[WINDOW_NAME], atol=1e-6)
            np.testing.assert_allclose(p.windows, r.windows, atol=1e-6)
            np.testing.assert_allclose(p.dense, s.vector["text-dense"], atol=1e-6)
            np.testing.assert_allclose(p.dense, r.dense, atol=1e-6)
            assert (
                p.sparse
                == r.sparse
                == (s.vector["text-sparse"].indices, s.vector["text-sparse"].values)
            )
            assert s.payload.pop(TERMS_KEY) == sorted(set(p.sparse[0]))
            assert p.payload == r.payload == s.payload
        server = QdrantServerStore("books", client, **kw)
        assert server.window_vector_name == WINDOW_NAME
        rows = [json.loads(x) for x in (data_dir / "gutenqa" / "questions.jsonl").open()]
        asked = [q for q in rows if q["book_file"].endswith("pg215_call_of_the_wild.txt")][:6]

        class Lib:
            vectors = sv

        for q in asked:
            query = _query(Lib, q["question"], "hybrid", _book("pg215"))
            want = edge.query(query)
            assert len(want.ids) == 5
            assert_same_top(want, server.query(query))
            assert_same_top(want, back.query(query))
    finally:
        edge.close()
        back.close()
        client.close()


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
    assert not list(home.glob("export-progress*.json"))


def test_cli_export_to_and_from_a_server_carries_blocks_and_children(
    tmp_path,
    monkeypatch,
    capsys,
    corpus,  # noqa: F811
):
    """`litrag export --to` copies the blocks and their children's collection; `--from` brings
    them back into an empty home, windows included."""
    from litrag.cli import main
    from litrag.scoring.windows import SentenceWindowEncoder
    from litrag.stores.factory import children_collection

    windows = SentenceWindowEncoder(lambda t: corpus.encode(t).tolist())
    enc = BM25Encoder()
    for name in ("litrag", children_collection("litrag")):
        with QdrantEdgeVectorStore(
            tmp_path / "home" / "index", name, sparse_doc_fn=enc.doc_fn, window_doc_fn=windows
        ) as s:
            s.add(corpus.copy_nodes()[:30])
    monkeypatch.delenv("QDRANT_URL", raising=False)
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    server = f"path:{tmp_path / 'server'}"
    assert main(["export", "--to", server]) == 0
    assert capsys.readouterr().out.count("verified") == 2
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "again"))
    assert main(["export", "--from", server]) == 0
    assert capsys.readouterr().out.count("verified") == 2
    for name in ("litrag", children_collection("litrag")):
        with (
            QdrantEdgeVectorStore(tmp_path / "home" / "index", name) as a,
            QdrantEdgeVectorStore(tmp_path / "again" / "index", name) as b,
        ):
            assert b.config.window_vector_name
            want = {p.id: (p.dense, p.sparse, p.windows) for p in a.iter_points()}
            assert {p.id: (p.dense, p.sparse, p.windows) for p in b.iter_points()} == want
    assert main(["export", "--from", server]) == 2  # never over an existing library
    assert "exists" in capsys.readouterr().err
