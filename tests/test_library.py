"""Ingesting real (shortened) Gutenberg books into the embedded store, like a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from litrag.builders import build_library
from litrag.settings import Settings

FOOTER = "\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n"


def short_book(src: Path, dest: Path, cut_before: str) -> Path:
    """The book up to the heading line ``cut_before`` (header kept), with a Gutenberg footer."""
    raw = src.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
    dest.write_text(raw[: raw.index("\n" + cut_before)] + FOOTER, encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def shelf(books_dir, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("shelf")
    short_book(books_dir / "pg11_alice_in_wonderland.txt", folder / "alice.txt", "CHAPTER III.")
    short_book(books_dir / "pg215_call_of_the_wild.txt", folder / "wild.txt", "Chapter II.")
    return folder


def library_at(home: Path):
    s = Settings(home=home)
    return build_library(s)


def all_points(library) -> dict[str, str]:
    return {n.node_id: n.get_content() for n in library.store.get_nodes()}


@pytest.fixture(scope="module")
def clean(shelf, tmp_path_factory):
    home = tmp_path_factory.mktemp("clean")
    lib = library_at(home)
    report = lib.ingest([shelf])
    points = all_points(lib)
    yield lib, report, points
    lib.close()


@pytest.mark.quick
def test_ingest_lists_books_and_filters_by_book(clean):
    lib, report, points = clean
    assert sorted(report.ingested) == ["pg11", "pg215"] and report.ok
    books = {b.book_id: b for b in lib.books()}
    assert books["pg11"].title == "Alice’s Adventures in Wonderland"
    assert books["pg11"].author == "Lewis Carroll"
    assert books["pg215"].author == "Jack London"
    assert books["pg11"].chapters == 2 and books["pg215"].chapters == 1
    assert books["pg11"].nodes + books["pg215"].nodes == len(points)
    assert all(b.status == "complete" and b.segmenter == "offline" for b in books.values())
    q = "Alice fell down the rabbit hole"
    query = VectorStoreQuery(
        query_embedding=lib.embed_model.get_query_embedding(q),
        query_str=q,
        similarity_top_k=10,
        sparse_top_k=10,
        hybrid_top_k=10,
        mode=VectorStoreQueryMode.HYBRID,
        filters=MetadataFilters(
            filters=[MetadataFilter(key="book_id", value="pg215", operator=FilterOperator.EQ)]
        ),
    )
    res = lib.store.query(query)
    assert res.nodes and all(n.metadata["book_id"] == "pg215" for n in res.nodes)


def test_reingest_unchanged_does_nothing(clean, shelf):
    lib, _, points = clean
    blocks_before = lib.parser.summary.blocks
    report = lib.ingest([shelf])
    assert sorted(report.unchanged) == ["pg11", "pg215"] and not report.ingested
    assert lib.parser.summary.blocks == blocks_before  # nothing was even segmented
    assert all_points(lib) == points


def test_changed_book_replaces_its_nodes(shelf, tmp_path):
    folder = tmp_path / "books"
    folder.mkdir()
    text = (shelf / "alice.txt").read_text(encoding="utf-8")
    (folder / "alice.txt").write_text(text, encoding="utf-8")
    lib = library_at(tmp_path / "home")
    lib.ingest([folder])
    changed = text.replace("Alice was beginning to get very tired", "Alice was growing weary")
    (folder / "alice.txt").write_text(changed, encoding="utf-8")
    report = lib.ingest([folder])
    assert report.ingested == ["pg11"]
    texts = all_points(lib).values()
    assert any("Alice was growing weary" in t for t in texts)
    assert not any("Alice was beginning to get very tired" in t for t in texts)
    assert lib.book("pg11").nodes == len(texts)
    lib.close()


def test_another_file_of_the_same_ebook_replaces_it_and_says_so(shelf, books_dir, tmp_path):
    lib = library_at(tmp_path / "home")
    lib.ingest([shelf / "alice.txt"])
    raw = (books_dir / "variants" / "alice30_1994_oldstyle_header.txt").read_text(encoding="ascii")
    old_style = tmp_path / "alice30.txt"  # the 1994 "SMALL PRINT" edition of the same ebook #11
    old_style.write_text(raw[: raw.index("CHAPTER III")], encoding="ascii")
    said: list[str] = []
    report = lib.ingest([old_style], on_event=said.append)
    assert report.ingested == ["pg11"]
    assert any(f"was {shelf / 'alice.txt'}, now {old_style}" in line for line in said), said
    assert [b.book_id for b in lib.books()] == ["pg11"]
    assert lib.book("pg11").source == str(old_style)
    lib.close()


def test_one_bad_book_does_not_stop_the_others(shelf, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a_empty.txt").write_text("")
    (folder / "b_picture.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    (folder / "c_alice.txt").write_text((shelf / "alice.txt").read_text(encoding="utf-8"))
    lib = library_at(tmp_path / "home")
    report = lib.ingest([folder, tmp_path / "missing.txt"])
    assert report.ingested == ["pg11"]
    reasons = dict(report.failed)
    assert len(reasons) == 3
    assert "empty" in reasons[str(folder / "a_empty.txt")]
    assert "binary" in reasons[str(folder / "b_picture.txt")].lower()
    assert "no such file" in reasons[str(tmp_path / "missing.txt")]
    assert all("\n" not in r for r in reasons.values())
    assert [b.book_id for b in lib.books()] == ["pg11"]
    lib.close()


def test_size_limit_is_clear_and_raisable(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("It was a dark and stormy night. " * 600_000)  # ~19 MB
    lib = library_at(tmp_path / "home")
    report = lib.ingest([big])
    ((path, reason),) = report.failed
    assert path == str(big) and "--max-mb" in reason
    assert lib.books() == []
    lib.close()


def cli(home: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "LITRAG_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "litrag.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_killed_ingest_resumes_to_a_clean_result(clean, shelf, tmp_path):
    _, _, clean_points = clean
    home = tmp_path / "home"
    proc = cli(home, "ingest", "-q", str(shelf))
    registry = home / "books.json"
    deadline = time.time() + 300
    while time.time() < deadline:  # kill as soon as the first book is in the store
        if registry.exists() and '"complete"' in registry.read_text(encoding="utf-8"):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = json.loads(registry.read_text(encoding="utf-8"))
    assert any(r["status"] == "complete" for r in rows.values())
    done = cli(home, "ingest", "-q", str(shelf))
    _, err = done.communicate(timeout=600)
    assert done.returncode == 0, err
    lib = library_at(home)
    assert all_points(lib) == clean_points
    assert all(b.status == "complete" for b in lib.books())
    lib.close()


def test_second_process_gets_a_clear_error(shelf, tmp_path):
    home = tmp_path / "home"
    lib = library_at(home)  # this process holds the embedded store
    proc = cli(home, "ingest", "-q", str(shelf / "alice.txt"))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2
    assert "QDRANT_URL" in err and "one process" in err
    lib.close()


def test_books_and_remove_commands(clean, shelf, tmp_path):
    home = tmp_path / "home"
    assert cli(home, "ingest", "-q", str(shelf / "wild.txt")).wait(timeout=600) == 0
    out, _ = cli(home, "books").communicate(timeout=60)
    assert "pg215" in out and "The Call of the Wild" in out and "Jack London" in out
    proc = cli(home, "remove", "pg215")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    out, _ = cli(home, "books").communicate(timeout=60)
    assert "no books" in out
    proc = cli(home, "remove", "pg215")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "no book 'pg215'" in err


def test_library_searches_children_by_their_sentence_windows(clean):
    """Dense search scores a paragraph child by its best 3-sentence window (MaxSim), with the
    real MiniLM: a question about one detail is not averaged away by the rest of the piece."""
    import numpy as np

    from litrag.scoring.windows import SentenceWindowEncoder

    lib, _, _ = clean
    store = lib.children_store  # with children, the children keep the windows and rank
    assert store.config.window_vector_name and not lib.store.config.window_vector_name
    enc = SentenceWindowEncoder(lib.embed_model.get_text_embedding_batch)
    flt = MetadataFilters(filters=[MetadataFilter(key="book_id", value="pg215")])
    blocks = [n for n in store.get_nodes(filters=flt) if len(enc.windows(n.get_content())) >= 3]
    assert blocks
    block = blocks[len(blocks) // 2]
    probe = enc.windows(block.get_content())[1]
    qv = np.array(lib.embed_model.get_query_embedding(probe))
    res = store.query(
        VectorStoreQuery(query_embedding=qv.tolist(), similarity_top_k=3, filters=flt)
    )
    assert res.ids[0] == block.node_id
    own = np.array(enc([block.get_content()])[0])
    cos = own @ qv / (np.linalg.norm(own, axis=1) * np.linalg.norm(qv))
    assert res.similarities[0] == pytest.approx(float(cos.max()), abs=1e-3)
    whole = np.array(block.embedding)  # the block's one (mean-pooled) vector scores lower
    assert float(whole @ qv / (np.linalg.norm(whole) * np.linalg.norm(qv))) < cos.max() - 0.01


def test_ingest_shows_one_progress_bar_per_book_in_chapters(shelf, tmp_path):
    proc = cli(tmp_path / "home", "ingest", str(shelf / "alice.txt"))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    lines = err.replace("\r", "\n").splitlines()
    bars = [line for line in lines if "chapter" in line and "|" in line]
    assert bars and all(line.lstrip().startswith("pg11:") for line in bars), err
    assert any("2/2" in line for line in bars), err
    assert "Applying transformations" not in err  # the pipeline's per-batch bars stay off


def test_a_big_book_says_each_stage_before_its_chapter_bar(shelf, tmp_path, monkeypatch):
    """Issue 34: a 200 MB book went minutes without a word before its bar. Any book this big
    says reading, chapters found and the character index (with progress shown; never with -q)."""
    import litrag.ingestion.library as library_module

    monkeypatch.setattr(library_module, "BIG_BOOK_BYTES", 0)  # alice counts as big here
    lib = library_at(tmp_path / "home")
    said: list[str] = []
    lib.ingest([shelf / "alice.txt"], show_progress=True, on_event=said.append)
    size = (shelf / "alice.txt").stat().st_size
    stages = [f"  reading {size / 1e6:.0f} MB of text", "  pg11: ", "  pg11: 2 chapters found"]
    assert said[1].startswith(stages[0]) and said[2].startswith(stages[1]), said
    assert "finding chapters" in said[2] and said[3] == stages[2], said
    if lib.characters is not None:
        assert "  pg11: building the character index (2 chapters)" in said, said
    quiet: list[str] = []
    lib.ingest([shelf / "wild.txt"], show_progress=False, on_event=quiet.append)
    assert not [m for m in quiet if "reading" in m or "chapters found" in m], quiet
    lib.close()
