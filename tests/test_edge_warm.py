"""Opening an Edge store: it reads the files a query pages through (payloads, payload indexes,
the sparse vectors and their index) into the page cache on a background thread, so the first
question about a book does not page them in from disk one by one; and it loads the shard with
its config's run-time settings (one search thread a query)."""

from __future__ import annotations

import json
from pathlib import Path

from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from test_store_contract import Corpus, corpus, sparse_docs, sparse_queries  # noqa: F401

from litrag.stores.edge_open import WARM_DIRS, warm_files, warm_shard
from litrag.stores.edge_schema import SHARD_DIR, EdgeStoreConfig
from litrag.stores.edge_store import QdrantEdgeVectorStore


def _open(path: Path, **kw: object) -> QdrantEdgeVectorStore:
    return QdrantEdgeVectorStore(
        path, "c", sparse_doc_fn=sparse_docs, sparse_query_fn=sparse_queries, **kw
    )


def test_the_warmed_files_are_what_queries_page_through(tmp_path: Path, corpus: Corpus) -> None:  # noqa: F811
    with _open(tmp_path) as s:
        s.add(corpus.copy_nodes())
        s.optimize()
    shard = tmp_path / "c" / SHARD_DIR
    files = warm_files(shard)
    dirs = {f.relative_to(shard / "segments").parts[1] for f in files}
    assert any("payload_storage" in d for d in dirs) and any("text-sparse" in d for d in dirs)
    assert all(any(w in d for w in WARM_DIRS) for d in dirs)
    assert not any("text-dense" in d for d in dirs)  # Edge loads dense vectors itself
    assert warm_shard(shard) == sum(f.stat().st_size for f in files) > 0


def test_a_folder_gone_while_warming_is_passed_over(tmp_path: Path, corpus: Corpus) -> None:  # noqa: F811
    """Edge drops merged segments while it writes: the warm-up reads what is left, never raises."""
    with _open(tmp_path) as s:
        s.add(corpus.copy_nodes())
    shard = tmp_path / "c" / SHARD_DIR
    files = warm_files(shard)
    gone = files[0].parent
    for f in gone.iterdir():
        f.unlink()
    gone.rmdir()
    assert warm_shard(shard) == sum(f.stat().st_size for f in files if f.parent != gone)
    assert not any(f.parent == gone for f in warm_files(shard))


def test_a_store_warms_on_open_unless_told_not_to(tmp_path: Path, corpus: Corpus) -> None:  # noqa: F811
    with _open(tmp_path) as s:
        s.add(corpus.copy_nodes())
    query = VectorStoreQuery(
        query_str="rabbit watch waistcoat", similarity_top_k=3, mode=VectorStoreQueryMode.SPARSE
    )
    s = _open(tmp_path)
    try:
        warming = s._warming
        assert warming is not None
        warming.join(60)
        assert not warming.is_alive()
        assert s.query(query).ids  # the store answers as before
    finally:
        s.close()
    with _open(tmp_path, warm_on_open=False) as s:
        assert s._warming is None
        assert s.query(query).ids


def test_a_store_loads_with_its_search_threads(tmp_path: Path, corpus: Corpus) -> None:  # noqa: F811
    with _open(tmp_path) as s:
        s.add(corpus.copy_nodes())
    on_disk = tmp_path / "c" / SHARD_DIR / "edge_config.json"
    assert json.loads(on_disk.read_text())["max_search_threads"] == 1  # the default
    saved = EdgeStoreConfig.model_validate_json((tmp_path / "c" / "litrag_store.json").read_text())
    saved.search_threads = 2
    (tmp_path / "c" / "litrag_store.json").write_text(saved.model_dump_json())
    with _open(tmp_path) as s:  # reopened: the saved setting is what the shard loads with
        assert json.loads(on_disk.read_text())["max_search_threads"] == 2
        assert s.count() == len(corpus.copy_nodes())
