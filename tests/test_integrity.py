"""Fault injection on a real small library (the first chapter of The Call of the Wild, offline
segmenter, packaged MiniLM, embedded Qdrant Edge): each test damages a copy of one clean library
the way a user's disk or a kill would, then checks the one line the CLI prints (problem and fix,
exit 2, no traceback) and that ``litrag verify --repair`` (or a rerun of ``ingest``) brings back
exactly the clean library's citations."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from litrag.cli import main

FOOTER = "\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n"
QUESTION = "Who stole Buck from Judge Miller's place?"


def first_chapter(books_dir: Path, path: Path) -> Path:
    """Write the first chapter of The Call of the Wild to ``path`` as a Gutenberg file (its
    header kept, the end marker added): a real book that ingests in seconds."""
    raw = (books_dir / "pg215_call_of_the_wild.txt").read_bytes().decode("utf-8-sig")
    raw = raw.replace("\r\n", "\n")
    path.write_text(raw[: raw.index("\nChapter II.")] + FOOTER, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def book(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return first_chapter(books_dir, tmp_path_factory.mktemp("books") / "wild.txt")


def default_sigint() -> None:
    """Run in a child before exec: Ctrl-C at its default. A signal ignored in the test process
    (something in the session may set SIGINT to SIG_IGN) would stay ignored in the child, and
    Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn_ingest(target: Path, home: Path) -> subprocess.Popen[str]:
    """``litrag ingest -q TARGET`` in a child process with its own home, ready for a Ctrl-C."""
    return subprocess.Popen(
        [sys.executable, "-m", "litrag.cli", "ingest", "-q", str(target)],
        env={**os.environ, "LITRAG_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )


@contextlib.contextmanager
def litrag_home(home: Path) -> Iterator[None]:
    """``LITRAG_HOME`` set to ``home`` for the block, then as it was (module fixtures have no
    monkeypatch)."""
    old = os.environ.get("LITRAG_HOME")
    os.environ["LITRAG_HOME"] = str(home)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LITRAG_HOME", None)
        else:
            os.environ["LITRAG_HOME"] = old


def run(home: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """One CLI command in this process (models load faster than in a fresh one)."""
    with litrag_home(home):
        code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def citations(home: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, out, err = run(home, "ask", QUESTION, "--no-llm", "--json", capsys=capsys)
    assert code == 0, err
    return [s["node_id"] for s in json.loads(out)["sources"]]


def error_line(err: str) -> str:
    """The one ``error:`` line of a failed command (and no traceback)."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


def quiet(home: Path, *args: str) -> tuple[int, str]:
    """A CLI command in this process, for module fixtures (which have no capsys): its stdout."""
    out = io.StringIO()
    with (
        litrag_home(home),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        code = main(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def clean(book: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("clean") / "home"
    assert quiet(home, "ingest", "-q", str(book))[0] == 0
    return home


@pytest.fixture(scope="module")
def windowed(book: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library made without children (``LITRAG_CHILDREN=0``), whose blocks keep their
    sentence-window vectors (with children, the children keep them). Its tests set the variable
    too (``windowed_copy``), so a repair ingests as it was made."""
    os.environ["LITRAG_CHILDREN"] = "0"
    try:
        home = tmp_path_factory.mktemp("windowed") / "home"
        assert quiet(home, "ingest", "-q", str(book))[0] == 0
    finally:
        os.environ.pop("LITRAG_CHILDREN", None)
    return home


@pytest.fixture
def windowed_copy(windowed: Path, tmp_path: Path, monkeypatch) -> tuple[Path, list[str]]:
    """A copy of the windowed library for one test to damage, and its clean citations."""
    monkeypatch.setenv("LITRAG_CHILDREN", "0")
    code, out = quiet(windowed, "ask", QUESTION, "--no-llm", "--json")
    assert code == 0
    home = tmp_path / "home"
    shutil.copytree(windowed, home)
    return home, [s["node_id"] for s in json.loads(out)["sources"]]


@pytest.fixture(scope="module")
def clean_citations(clean: Path) -> list[str]:
    """The node ids the clean library cites for QUESTION."""
    code, out = quiet(clean, "ask", QUESTION, "--no-llm", "--json")
    assert code == 0
    ids = [s["node_id"] for s in json.loads(out)["sources"]]
    assert ids
    return ids


@pytest.fixture
def damaged(clean: Path, tmp_path: Path) -> Path:
    """A copy of the clean library, for one test to damage."""
    home = tmp_path / "home"
    shutil.copytree(clean, home)
    return home


def index(home: Path) -> Path:
    return home / "index" / "litrag"


def test_deleted_index_is_named_and_ingest_restores_it(damaged, book, clean_citations, capsys):
    shutil.rmtree(damaged / "index")
    code, _, err = run(damaged, "books", capsys=capsys)
    line = error_line(err)
    assert code == 2 and "is missing" in line and "litrag verify --repair" in line
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    assert code == 2 and error_line(err) == line
    code, out, err = run(damaged, "ingest", "-q", str(book), capsys=capsys)
    assert code == 0, err
    assert "unchanged" not in err and "ingested 1, unchanged 0" in out
    assert "the store holds 0 of its" in err
    assert citations(damaged, capsys) == clean_citations


def test_deleted_shard_is_repaired_by_verify(damaged, clean_citations, capsys):
    shutil.rmtree(index(damaged) / "shard")
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    assert code == 2 and "litrag verify --repair" in error_line(err)
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and "problem:" in out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "repaired: pg215: ingested again" in out and "ok: 1 book" in out
    assert citations(damaged, capsys) == clean_citations


def test_deleted_store_config_is_named_and_rebuilt_from_the_shard(damaged, clean_citations, capsys):
    config = index(damaged) / "litrag_store.json"
    before = config.read_text()
    config.unlink()
    for command in (["ask", QUESTION, "--no-llm"], ["books"]):
        code, _, err = run(damaged, *command, capsys=capsys)
        line = error_line(err)
        assert code == 2 and "litrag_store.json is missing" in line, command
        assert "litrag verify --repair" in line
    assert not config.exists()  # never silently recreated without its window vectors
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert json.loads(config.read_text()) == json.loads(before)
    assert citations(damaged, capsys) == clean_citations


def test_blocks_keep_no_windows_where_children_rank(clean):
    cfg = json.loads((index(clean) / "litrag_store.json").read_text())
    assert cfg["window_vector_name"] is None  # the children's collection keeps them
    kids = json.loads((clean / "index" / "litrag-children" / "litrag_store.json").read_text())
    assert kids["window_vector_name"]


def test_store_config_that_lost_its_window_vectors_is_named(windowed_copy, capsys):
    damaged, clean_citations = windowed_copy
    config = index(damaged) / "litrag_store.json"
    cfg = json.loads(config.read_text())
    assert cfg["window_vector_name"]
    config.write_text(json.dumps({**cfg, "window_vector_name": None}))
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    assert code == 2 and "but the shard holds" in error_line(err)
    assert run(damaged, "verify", "--repair", capsys=capsys)[0] == 0
    assert citations(damaged, capsys) == clean_citations


def zero_vectors(home: Path, name: str) -> int:
    import qdrant_edge as qe

    shard = qe.EdgeShard.load(str(index(home) / "shard"))
    recs, _ = shard.scroll(qe.ScrollRequest(limit=10_000, with_payload=True, with_vector=True))
    points = []
    for r in recs:
        vectors = dict(r.vector)
        vectors[name] = [[0.0] * len(w) for w in vectors[name]]
        points.append(qe.Point(id=r.id, vector=vectors, payload=r.payload))
    shard.update(qe.UpdateOperation.upsert_points(points))
    shard.flush()
    shard.close()
    return len(points)


def test_zero_filled_window_vectors_are_named_and_embedded_again(windowed_copy, capsys):
    damaged, clean_citations = windowed_copy
    assert zero_vectors(damaged, "text-windows") > 0
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    line = error_line(err)
    assert code == 2 and "text-windows vectors are zero" in line and "--repair" in line
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert citations(damaged, capsys) == clean_citations


def test_zeroed_sparse_vectors_are_named_and_rebuilt(damaged, clean_citations, capsys):
    """Issue 33, bug 3: every BM25 sparse vector zeroed in the shard: ``verify`` said ok and
    the hybrid search's answers changed. Now asking and ``verify`` name them, the repair
    re-derives them."""
    import qdrant_edge as qe

    shard = qe.EdgeShard.load(str(index(damaged) / "shard"))
    recs, _ = shard.scroll(qe.ScrollRequest(limit=10_000, with_payload=True, with_vector=True))
    points = []
    for r in recs:
        vectors = dict(r.vector)
        sparse = vectors["text-sparse"]
        vectors["text-sparse"] = qe.SparseVector(list(sparse.indices), [0.0] * len(sparse.indices))
        points.append(qe.Point(id=r.id, vector=vectors, payload=r.payload))
    shard.update(qe.UpdateOperation.upsert_points(points))
    shard.flush()
    shard.close()
    assert points
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    line = error_line(err)
    assert code == 2 and "text-sparse vectors are zero" in line and "--repair" in line
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and "text-sparse vectors of some blocks are zero" in out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "repaired: pg215: ingested again" in out
    assert citations(damaged, capsys) == clean_citations


@pytest.mark.parametrize(
    "pattern",
    [
        "segments/*/segment.json",
        "segments/*/payload_storage/config.json",
        "segments/*/vector_storage-text-dense/vectors/status.dat",  # the engine panics on it
        "wal/first-index",
    ],
)
def test_a_store_file_cut_short_is_named_and_repaired(damaged, clean_citations, pattern, capsys):
    """Issue 33, bug 2: a shard file cut short gave the engine's "Service runtime error" (or a
    Rust panic) with no advice, ``verify`` did not name it and ``--repair`` could not fix it.
    Now asking says the store is damaged and how to repair it, ``verify`` names it, and the
    repair sets the shard aside and brings back the clean library's citations."""
    (path,) = (index(damaged) / "shard").glob(pattern)
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    line = error_line(err)
    assert code == 2 and f"the store {index(damaged) / 'shard'} is damaged (" in line, err
    assert line.endswith(
        "run `litrag verify --repair` (sets it aside and ingests the books again "
        "from their sources)"
    )
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and "problem: the store" in out and "is damaged" in out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "set the damaged store" in out and "repaired: pg215: ingested again" in out
    assert list(index(damaged).glob("shard.damaged-*"))  # kept, not deleted
    assert citations(damaged, capsys) == clean_citations


def test_a_children_store_file_cut_short_is_named_and_repaired(damaged, clean_citations, capsys):
    """Issue 33's "any one file of the store": a file of the paragraph children's shard cut
    short was named when asking, but ``verify`` failed on it and ``verify --repair`` too, each
    saying to run ``verify --repair``. Now it is named, set aside, and the children rebuilt."""
    kids = damaged / "index" / "litrag-children" / "shard"
    (path,) = kids.glob("segments/*/segment.json")
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and f"problem: the store {kids} is damaged (" in out, out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert f"repaired: set the damaged store {kids} aside as shard.damaged-" in out
    assert "repaired: pg215: ingested again" in out
    rows = json.loads((damaged / "books.json").read_text())
    assert rows["pg215"]["children"] > 0
    assert citations(damaged, capsys) == clean_citations


def test_truncated_registry_is_named_and_rebuilt_from_the_store(
    damaged, book, clean_citations, capsys
):
    registry = damaged / "books.json"
    registry.write_text(registry.read_text()[:40])
    for command in (["books"], ["ask", QUESTION, "--no-llm"], ["ingest", "-q", str(book)]):
        code, _, err = run(damaged, *command, capsys=capsys)
        line = error_line(err)
        assert code == 2 and "books.json is damaged" in line and "--repair" in line, command
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "pg215: restored to the registry from its" in out
    assert list(damaged.glob("books.json.damaged-*"))  # set aside, not deleted
    code, out, _ = run(damaged, "books", capsys=capsys)
    assert code == 0 and "The Call of the Wild" in out
    assert citations(damaged, capsys) == clean_citations


def test_deleted_registry_no_longer_hides_the_stored_books(damaged, clean_citations, capsys):
    (damaged / "books.json").unlink()
    for command in (["books"], ["ask", QUESTION, "--no-llm"]):
        code, _, err = run(damaged, *command, capsys=capsys)
        line = error_line(err)
        assert code == 2 and "books.json is missing but the store" in line, command
    assert run(damaged, "verify", "--repair", capsys=capsys)[0] == 0
    assert citations(damaged, capsys) == clean_citations


@pytest.mark.parametrize("name", ["docstore.json", "cache/ingestion.json"])
def test_truncated_docstore_or_cache_is_named_and_set_aside(damaged, book, name, capsys):
    path = damaged / name
    path.write_text(path.read_text()[:100])
    code, _, err = run(damaged, "ingest", "-q", str(book), capsys=capsys)
    line = error_line(err)
    assert code == 2 and f"{path} is damaged" in line and "litrag verify --repair" in line
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0 and f"set the damaged {path.name} aside" in out, out + err
    code, out, err = run(damaged, "ingest", "-q", str(book), capsys=capsys)
    assert code == 0 and "unchanged 1" in out, err


def test_verify_refuses_to_guess_without_the_source(damaged, book, tmp_path, capsys):
    moved = tmp_path / "elsewhere.txt"
    shutil.copy(book, moved)
    rows = json.loads((damaged / "books.json").read_text())
    rows["pg215"]["source"] = str(tmp_path / "gone.txt")
    (damaged / "books.json").write_text(json.dumps(rows))
    shutil.rmtree(index(damaged) / "shard")
    code, out, _ = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 1
    assert "cannot re-derive it: its source" in out and "is gone" in out
    assert "litrag ingest" in out


def test_a_source_that_is_missing_or_changed_is_named(damaged, book, tmp_path, capsys):
    """Issue 34: a registry row whose source file was deleted (a refused upload removed it) or
    replaced by another book's text passed verify. Both are named now; the repair does not
    re-ingest the wrong text, and ``litrag ingest`` from the book's new place clears it."""
    copy = tmp_path / "wild.txt"
    shutil.copy(book, copy)
    rows = json.loads((damaged / "books.json").read_text())
    assert rows["pg215"]["source_digest"]  # recorded at ingest
    rows["pg215"]["source"] = str(copy)  # the same bytes, somewhere this test may change
    (damaged / "books.json").write_text(json.dumps(rows))
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 0 and out.startswith("ok: 1 book"), out
    copy.write_text(book.read_text(encoding="utf-8").replace("Buck", "Bick"), encoding="utf-8")
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1
    assert f"problem: pg215 (The Call of the Wild): its source {copy} changed since it was" in out
    assert f"run `litrag ingest {copy}` to take the new text" in out
    code, out, _ = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 1 and f"error: pg215 (The Call of the Wild): its source {copy} changed" in out
    assert "repaired:" not in out  # nothing was ingested from the changed file
    copy.unlink()
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and f"its source {copy} is missing: its blocks still answer" in out
    code, out, err = run(damaged, "ingest", "-q", str(book), capsys=capsys)  # found elsewhere
    assert code == 0 and "unchanged 1" in out, err
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 0 and out.startswith("ok: 1 book"), out


def test_a_crash_between_the_store_write_and_the_registry_write(
    book, tmp_path, clean_citations, capsys, monkeypatch
):
    """Killed after the last batch is in the store, before the registry says complete: the
    book is reported as interrupted, and a rerun completes it to the clean library."""
    from litrag.builders import build_library
    from litrag.ingestion.library import Library
    from litrag.settings import Settings

    home = tmp_path / "home"
    saves: list[str] = []
    real = Library._save_record

    def save(self: Library, record) -> None:
        if record.status == "complete":  # the store holds every block by now
            saves.append(record.book_id)
            raise KeyboardInterrupt  # like a kill: nothing after this line runs
        real(self, record)

    monkeypatch.setattr(Library, "_save_record", save)
    library = build_library(Settings(home=home))
    with pytest.raises(KeyboardInterrupt):
        library.ingest([book])
    assert saves == ["pg215"]
    assert library.store.count() > 0
    library.close()
    monkeypatch.setattr(Library, "_save_record", real)
    code, _, err = run(home, "ask", QUESTION, "--no-llm", capsys=capsys)
    assert code == 2 and "its ingest did not finish: rerun it" in error_line(err)
    code, out, _ = run(home, "verify", capsys=capsys)
    assert code == 1 and "was interrupted while ingesting" in out and "litrag ingest" in out
    code, out, err = run(home, "ingest", "-q", str(book), capsys=capsys)
    assert code == 0 and "ingested 1" in out, err
    assert citations(home, capsys) == clean_citations


def test_ctrl_c_during_ingest_says_what_was_saved(book, tmp_path):
    home = tmp_path / "home"
    proc = spawn_ingest(book, home)
    registry = home / "books.json"
    deadline = time.time() + 300
    while time.time() < deadline and not registry.exists():  # the book is being ingested
        time.sleep(0.05)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert proc.returncode == 130, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("interrupted: ") and "rerun the same command to resume" in line
    assert "0 of 1 chapters of pg215 stored" in line


def test_a_book_being_ingested_is_said_so_not_called_unfinished(books_dir, tmp_path, capsys):
    """Issue 34: while an ingest ran, ``ask`` said "its ingest did not finish: rerun it" and
    ``characters`` said to install an extra that is installed. Asked while a real ``litrag
    ingest`` of the whole book holds the library, then after it is stopped with Ctrl-C."""
    whole = tmp_path / "wild.txt"
    shutil.copy(books_dir / "pg215_call_of_the_wild.txt", whole)
    home = tmp_path / "home"
    proc = spawn_ingest(whole, home)
    try:
        registry = home / "books.json"
        deadline = time.time() + 300
        while time.time() < deadline and not registry.exists():
            time.sleep(0.05)
        asked = run(home, "ask", QUESTION, "--no-llm", "--book", "pg215", capsys=capsys)
        listed = run(home, "characters", "pg215", capsys=capsys)
        assert proc.poll() is None, "the ingest ended before the book was asked about"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=300)
    for code, _, err in (asked, listed):
        line = error_line(err)
        assert code == 2 and line.startswith(
            f"error: pg215 is being ingested now (by pid {proc.pid} "
        )
        assert " ingest -q " in line and "rerun" not in line and "install" not in line
    assert error_line(asked[2]).endswith(": ask again when it finishes")
    assert error_line(listed[2]).endswith(": its characters are listed when it finishes")
    # stopped: now it is unfinished, and a rerun is the advice
    code, _, err = run(home, "ask", QUESTION, "--no-llm", "--book", "pg215", capsys=capsys)
    assert code == 2 and "its ingest did not finish: rerun it" in error_line(err)
    code, _, err = run(home, "characters", "pg215", capsys=capsys)
    assert code == 2 and error_line(err) == (
        f"error: pg215: its ingest did not finish: rerun it with litrag ingest {whole.resolve()}"
    )


def test_upto_chapter_past_the_book_is_refused(clean, capsys):
    code, _, err = run(clean, "ask", QUESTION, "--no-llm", "--upto-chapter", "999", capsys=capsys)
    assert code == 2
    assert error_line(err) == "error: --upto-chapter must be a chapter of the book (1), got 999"
    code, _, err = run(clean, "ask", QUESTION, "--no-llm", "--upto-chapter", "0", capsys=capsys)
    assert code == 2  # issue 34: 0 was taken (and asked about nothing)
    assert error_line(err) == "error: --upto-chapter must be a chapter of the book (1), got 0"


def test_points_of_no_book_are_found_and_dropped(damaged, clean_citations, capsys):
    import qdrant_edge as qe

    shard = qe.EdgeShard.load(str(index(damaged) / "shard"))
    (rec,), _ = shard.scroll(qe.ScrollRequest(limit=1, with_payload=True, with_vector=True))
    payload = {k: v for k, v in rec.payload.items() if k != "book_id"}
    payload["_node_id"] = "00000000-0000-4000-8000-000000000001"
    stray = qe.Point(id=payload["_node_id"], vector=dict(rec.vector), payload=payload)
    shard.update(qe.UpdateOperation.upsert_points([stray]))
    shard.flush()
    shard.close()
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and "problem: the store holds 1 points of no book" in out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0 and "repaired: dropped 1 points of no book" in out, out + err
    assert citations(damaged, capsys) == clean_citations


def test_a_registry_row_that_is_not_a_book_is_named(damaged, capsys):
    (damaged / "books.json").write_text(json.dumps({"pg215": {"book_id": "pg215"}}))
    code, _, err = run(damaged, "books", capsys=capsys)
    assert code == 2 and "books.json is damaged: not a registry" in error_line(err)


def test_a_book_ingested_by_a_relative_path_is_repaired_from_anywhere(
    book, tmp_path, clean_citations, capsys, monkeypatch
):
    """Issue 33, bug 1: the registry kept the path as typed (``wild.txt``), so a repair run from
    another folder could not find the book. It keeps the absolute, resolved path now."""
    home = tmp_path / "home"
    monkeypatch.chdir(book.parent)
    code, _, err = run(home, "ingest", "-q", book.name, capsys=capsys)
    assert code == 0, err
    rows = json.loads((home / "books.json").read_text())
    assert rows["pg215"]["source"] == str(book.resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    shutil.rmtree(index(home) / "shard")
    code, out, err = run(home, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert f"repaired: pg215: ingested again from {book.resolve()}" in out
    assert citations(home, capsys) == clean_citations


def test_an_older_registry_with_relative_paths_is_migrated_on_open(
    damaged, book, tmp_path, clean_citations, capsys, monkeypatch
):
    """A registry written before paths were resolved: opened from the folder its path is
    relative to, the path is made absolute, so a later repair from elsewhere finds the book."""
    registry = damaged / "books.json"
    rows = json.loads(registry.read_text())
    rows["pg215"]["source"] = book.name
    registry.write_text(json.dumps(rows))
    monkeypatch.chdir(book.parent)
    code, out, err = run(damaged, "verify", capsys=capsys)
    assert code == 0, out + err
    assert json.loads(registry.read_text())["pg215"]["source"] == str(book.resolve())
    monkeypatch.chdir(tmp_path)
    shutil.rmtree(index(damaged) / "shard")
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert citations(damaged, capsys) == clean_citations


def test_a_registry_emptied_to_braces_is_damage_not_an_empty_library(
    damaged, clean_citations, capsys
):
    """Issue 33, bug 5: ``books.json`` holding ``{}`` while the store holds a book was "no
    books" / "the library is empty"; it is a damaged registry, and the repair restores it."""
    (damaged / "books.json").write_text("{}")
    for command in (["books"], ["ask", QUESTION, "--no-llm"]):
        code, _, err = run(damaged, *command, capsys=capsys)
        line = error_line(err)
        assert code == 2, command
        assert "books.json is damaged: it lists no books, but the library holds 1 (pg215)" in line
        assert "litrag verify --repair" in line and "no books in" not in err
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "pg215: restored to the registry" in out
    assert citations(damaged, capsys) == clean_citations


def test_a_character_index_cut_short_is_named_and_rebuilt(damaged, clean_citations, capsys):
    """Issue 33, bug 4: a truncated ``characters/pg215.json`` was a pydantic dump on every
    question and ``verify`` said ok; now asking names the file and the repair in one line, and
    ``verify --repair`` rebuilds the index as it was."""
    path = damaged / "characters" / "pg215.json"
    before = json.loads(path.read_text())
    path.write_text(path.read_text()[:300])
    for command in (["ask", QUESTION, "--no-llm"], ["characters", "pg215"]):
        code, _, err = run(damaged, *command, capsys=capsys)
        line = error_line(err)
        assert code == 2 and f"{path} is damaged (not valid JSON" in line, command
        assert line.endswith("run `litrag verify --repair` (rebuilds it)")
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and "problem: pg215 (The Call of the Wild):" in out
    assert f"{path} is damaged" in out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "set the damaged character index aside" in out and "pg215: ingested again" in out
    assert json.loads(path.read_text()) == before
    assert citations(damaged, capsys) == clean_citations


def stored(home: Path, collection: str, book_id: str) -> int:
    """The points of ``book_id`` in one embedded collection of the library at ``home``."""
    from litrag.ingestion.book_points import count_points
    from litrag.stores.edge_store import QdrantEdgeVectorStore

    store = QdrantEdgeVectorStore(path=home / "index", collection_name=collection)
    try:
        return count_points(store, book_id)
    finally:
        store.close()


def test_a_removal_killed_midway_is_finished_by_the_repair_not_undone(damaged, capsys, monkeypatch):
    """``litrag remove`` killed after the blocks went and before the children did (issue 33):
    the repair used to take the half-removed book for damage and ingest it again. The journal
    names the unfinished removal, and ``verify --repair`` finishes it."""
    from litrag.stores.edge_store import QdrantEdgeVectorStore

    assert stored(damaged, "litrag-children", "pg215") > 0  # the library ranks by children
    real = QdrantEdgeVectorStore.delete_nodes

    def delete_nodes(self: QdrantEdgeVectorStore, *args, **kwargs) -> None:
        if self.collection_name.endswith("-children"):
            raise KeyboardInterrupt  # like a kill: the blocks are gone, the children not yet
        real(self, *args, **kwargs)

    monkeypatch.setattr(QdrantEdgeVectorStore, "delete_nodes", delete_nodes)
    code, _, _ = run(damaged, "remove", "pg215", capsys=capsys)
    monkeypatch.setattr(QdrantEdgeVectorStore, "delete_nodes", real)
    assert code == 130
    assert (damaged / "removing.json").is_file()
    assert stored(damaged, "litrag", "pg215") == 0 < stored(damaged, "litrag-children", "pg215")
    assert '"pg215"' in (damaged / "books.json").read_text(encoding="utf-8")

    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    assert code == 2 and "the removal of pg215 was interrupted" in error_line(err)
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1 and "problem: the removal of pg215 was interrupted" in out, out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "repaired: pg215: finished its interrupted removal" in out
    assert "ingested again" not in out
    assert json.loads((damaged / "books.json").read_text(encoding="utf-8")) == {}
    assert stored(damaged, "litrag", "pg215") == 0
    assert stored(damaged, "litrag-children", "pg215") == 0
    assert not (damaged / "removing.json").exists()


def test_an_ingest_after_a_killed_removal_finishes_it_first(damaged, book, capsys, monkeypatch):
    """Ingesting the book again after its removal was killed: the removal is finished first,
    so a later repair does not remove the book just ingested (its journal would still say so)."""
    from litrag.stores.edge_store import QdrantEdgeVectorStore

    real = QdrantEdgeVectorStore.delete_nodes

    def delete_nodes(self: QdrantEdgeVectorStore, *args, **kwargs) -> None:
        if self.collection_name.endswith("-children"):
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(QdrantEdgeVectorStore, "delete_nodes", delete_nodes)
    assert run(damaged, "remove", "pg215", capsys=capsys)[0] == 130
    monkeypatch.setattr(QdrantEdgeVectorStore, "delete_nodes", real)
    code, out, err = run(damaged, "ingest", "-q", str(book), capsys=capsys)
    assert code == 0 and "ingested 1" in out, out + err
    assert "finishing the interrupted removal of pg215" in err
    assert not (damaged / "removing.json").exists()
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0 and "repaired" not in out, out + err
    assert '"pg215"' in (damaged / "books.json").read_text(encoding="utf-8")


# ------------------------------------------------------------------------ issue 50
@pytest.mark.parametrize("content", ["null", "[]"])
def test_a_registry_of_null_or_a_list_is_repaired_not_a_loop(
    damaged, clean_citations, capsys, content
):
    """Issue 50, bug 7: ``books.json`` holding ``null`` or ``[]`` parsed as JSON, so the repair
    left it, and every command, ``verify --repair`` included, said to run the repair."""
    (damaged / "books.json").write_text(content)
    code, _, err = run(damaged, "books", capsys=capsys)
    assert code == 2 and "books.json is damaged: not a registry" in error_line(err)
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert "repaired: set the damaged books.json aside" in out
    assert "repaired: pg215: restored to the registry" in out
    assert citations(damaged, capsys) == clean_citations


def test_a_registry_count_that_is_not_a_number_is_named(damaged, capsys):
    """Issue 50: a row with ``"chapters": "seven"`` passed ``verify``, and ``ask
    --upto-chapter 1`` then failed with a TypeError."""
    registry = damaged / "books.json"
    rows = json.loads(registry.read_text())
    rows["pg215"]["chapters"] = "seven"
    registry.write_text(json.dumps(rows))
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1
    assert "problem: " in out and 'books.json is damaged: pg215\'s chapters is "seven"' in out
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", "--upto-chapter", "1", capsys=capsys)
    assert code == 2 and 'pg215\'s chapters is "seven", not a count' in error_line(err)
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0 and "restored to the registry" in out, out + err
    assert isinstance(json.loads(registry.read_text())["pg215"]["chapters"], int)


def test_a_deleted_docstore_is_named_and_rebuilt(damaged, book, clean_citations, capsys):
    """Issue 50: ``verify`` said ok with ``docstore.json`` deleted (then the chat's chapter
    list was empty and an ingest could not tell what it held)."""
    (damaged / "docstore.json").unlink()
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 1
    assert "docstore.json holds none of its" in out and "litrag verify --repair" in out
    code, out, err = run(damaged, "verify", "--repair", capsys=capsys)
    assert code == 0, out + err
    assert f"repaired: pg215: ingested again from {book}" in out
    assert "pg215:ch0001" in (damaged / "docstore.json").read_text(encoding="utf-8")
    assert citations(damaged, capsys) == clean_citations


def test_a_reembed_killed_among_the_children_is_refused_until_it_is_finished(
    damaged, book, clean_citations, capsys, monkeypatch
):
    """Issue 50, bug 1: ``litrag reembed`` killed while it stored the children (the blocks all
    back, the children partly) answered "Nothing in the book matches" with exit 0. Until the
    reembed is finished from its journal, every command names it and the command to rerun."""
    from litrag.ingestion import reembed as rb

    real = rb.add_points

    def add_points(store, embed, nodes, say=lambda _m: None, what="points"):
        if what != "children":
            return real(store, embed, nodes, say, what)
        real(store, embed, nodes[: len(nodes) // 3], say, what)
        raise KeyboardInterrupt  # like a kill: a third of the children stored

    monkeypatch.setattr(rb, "add_points", add_points)
    code, _, _ = run(damaged, "reembed", "--preset", "fast", "-q", capsys=capsys)
    monkeypatch.setattr(rb, "add_points", real)
    assert code == 130
    assert stored(damaged, "litrag-children", "pg215") > 0
    fix = "run `litrag reembed --preset fast` again (it resumes from the journal)"
    for command in (["ask", QUESTION, "--no-llm"], ["books"], ["ingest", "-q", str(book)]):
        code, _, err = run(damaged, *command, capsys=capsys)
        line = error_line(err)
        assert code == 2, command
        assert "a reembed of this library was interrupted" in line and fix in line, command
    for command in (["verify"], ["verify", "--repair"]):  # a repair would mix two embedders
        code, out, _ = run(damaged, *command, capsys=capsys)
        assert code == 1 and fix in out and "repaired" not in out, out
    code, out, err = run(damaged, "reembed", "--preset", "fast", "-q", capsys=capsys)
    assert code == 0, out + err
    assert citations(damaged, capsys) == clean_citations
    code, out, _ = run(damaged, "verify", capsys=capsys)
    assert code == 0, out


def test_missing_children_are_refused_not_answered_from(damaged, capsys):
    """Issue 50, bug 1: a book whose paragraph children are partly gone (the blocks all
    there) is ranked through what is left; asking is refused with the repair instead."""
    from litrag.stores.edge_store import QdrantEdgeVectorStore

    kids = QdrantEdgeVectorStore(path=damaged / "index", collection_name="litrag-children")
    try:
        ids = [n.node_id for n in kids.get_nodes()]
        kids.delete_nodes(node_ids=ids[: len(ids) // 2])
    finally:
        kids.close()
    code, _, err = run(damaged, "ask", QUESTION, "--no-llm", capsys=capsys)
    line = error_line(err)
    assert code == 2 and "paragraph children but the store holds" in line
    assert "litrag verify --repair" in line
