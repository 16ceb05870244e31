"""Discovery in a Project Gutenberg mirror tree built from the shared books, and an ingest of it
(real MiniLM, embedded Qdrant Edge, offline segmenter): the expected books, once, with their
catalog rows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from mirror_tree import build_mirror

from litrag.ingestion.gutenberg import BookLoadError, load_book
from litrag.ingestion.mirror import MirrorScan, discover


@pytest.fixture(scope="module")
def mirror(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_mirror(books_dir, tmp_path_factory.mktemp("mirror"))


def rel(root: Path, paths: list[Path]) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def test_one_version_per_ebook_and_the_rest_counted(mirror):
    scan = discover([mirror])
    assert [b.ebook_id for b in scan.books] == [11, 158, 215, 1661]
    assert rel(mirror, scan.files) == [
        "1/11/11-0.zip",  # read in place
        "1/5/158/158-0.txt",
        "cache/epub/215/pg215.txt",
        "1/6/6/1661/1661-0.txt",  # UTF-8 over Latin-1 (-8), ASCII (plain) and the zip
    ]
    assert [b.variant for b in scan.books] == ["UTF-8", "UTF-8", "UTF-8", "UTF-8"]
    assert scan.duplicates == 3
    assert dict(scan.skipped) == {
        "audio": 2,
        "catalog/data files": 1,
        "epub/pdf/other formats": 1,
        "html/xml": 4,  # 11-h.zip, 1661-h.htm, pg215.rdf, index.html
        "images": 1,
        "older editions": 1,
        "readme/index": 3,  # README.txt, GUTINDEX.ALL, 19994-readme.txt
    }
    assert scan.summary().startswith("4 books; skipped 3 other versions, 2 audio")


def test_latin1_before_ascii_when_there_is_no_utf8(mirror, tmp_path):
    import shutil

    d = tmp_path / "1661"
    shutil.copytree(mirror / "1" / "6" / "6" / "1661", d)
    (d / "1661-0.txt").unlink()
    (d / "1661-0.zip").unlink()
    (book,) = discover([tmp_path]).books
    assert book.path.name == "1661-8.txt" and book.variant == "Latin-1"
    assert "Irène Adler" in load_book(book.path).text  # decoded as Latin-1, not mojibake
    (d / "1661-8.txt").unlink()
    (book,) = discover([tmp_path]).books
    assert book.path.name == "1661.txt" and book.variant == "ASCII"


def test_zip_is_read_in_place(mirror, tmp_path):
    zipped = load_book(mirror / "1" / "11" / "11-0.zip")
    with zipfile.ZipFile(mirror / "1" / "11" / "11-0.zip") as zf:
        (tmp_path / "11-0.txt").write_bytes(zf.read("11-0.txt"))
    plain = load_book(tmp_path / "11-0.txt")
    assert zipped.text == plain.text and zipped.book_id == "pg11"
    assert zipped.source.endswith("11-0.zip")
    broken = tmp_path / "12-0.zip"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(BookLoadError, match="damaged zip archive") as exc:
        load_book(broken)
    assert "\n" not in str(exc.value)
    big = tmp_path / "13-0.zip"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("13-0.txt", "a" * 50_000)
    with pytest.raises(BookLoadError, match="over the max_bytes limit"):
        load_book(big, max_bytes=10_000)  # the text inside is checked, not the small archive


def test_a_folder_of_shared_books_keeps_the_best_of_each(books_dir):
    scan = discover([books_dir])
    names = {b.ebook_id: b.path.name for b in scan.books}
    # The six books with questions and the four of books/more/ that no default was chosen on.
    assert sorted(names) == [11, 36, 46, 74, 84, 158, 174, 215, 1342, 1661]
    # Sherlock Holmes: the ISO-8859-1 file over the plain-ASCII copy in variants/; Alice: the
    # UTF-8 file over the 1994 ASCII edition, whose number is only in its header.
    assert names[1661] == "pg1661_adventures_of_sherlock_holmes.txt"
    assert names[11] == "pg11_alice_in_wonderland.txt"
    assert scan.duplicates == 2 and scan.skipped == {"readme/index": 1}  # the GITenberg licence


def test_missing_path_and_empty_folder_are_one_line_each(tmp_path):
    (tmp_path / "empty").mkdir()
    scan = discover([tmp_path / "nope", tmp_path / "empty"])
    assert not scan.books
    reasons = [r for _, r in scan.failed]
    assert "no such file or folder" in reasons[0] and "holds no .txt or .zip books" in reasons[1]


def test_mirror_ingest_takes_the_expected_books_with_catalog_rows_once(mirror, tmp_path, capsys):
    from test_integrity import run

    home = tmp_path / "home"
    code, out, err = run(home, "ingest", "-q", str(mirror), "--ids", "11,215,1661", capsys=capsys)
    assert code == 0, err
    assert "ingested 3, unchanged 0, failed 0" in out
    assert "found 4 books; skipped 3 other versions" in err
    assert "selected 3; left out 1 by --ids" in err
    rows = json.loads((home / "books.json").read_text(encoding="utf-8"))
    assert sorted(rows) == ["pg11", "pg1661", "pg215"]
    assert Path(rows["pg11"]["source"]).name == "11-0.zip"
    assert Path(rows["pg1661"]["source"]).name == "1661-0.txt"
    assert Path(rows["pg215"]["source"]).name == "pg215.txt"
    assert rows["pg11"]["title"] == "Alice's Adventures in Wonderland"  # the catalog's
    assert rows["pg11"]["author"] == "Lewis Carroll"
    assert rows["pg1661"]["author"] == "Arthur Conan Doyle"
    assert rows["pg215"]["catalog"]["bookshelves"] == [
        "Best Books Ever Listings",
        "Category: Novels",
        "Category: Adventure",
    ]
    assert rows["pg215"]["catalog"]["subjects"][0] == "Adventure stories"
    stages = rows["pg215"]["seconds"]
    assert {"load", "chapters", "segment", "embed_blocks", "embed_windows", "store"} <= set(stages)
    assert all(r["status"] == "complete" and r["nodes"] > 0 for r in rows.values())

    code, out, err = run(home, "books", "--json", capsys=capsys)
    books = {b["book_id"]: b for b in json.loads(out)}
    assert set(books) == {"pg11", "pg1661", "pg215"}

    code, out, err = run(home, "ingest", "-q", str(mirror), "--ids", "11,215,1661", capsys=capsys)
    assert code == 0 and "ingested 0, unchanged 3, failed 0" in out, err  # once


# ------------------------------------------------------------- a mirror nobody checked
def hostile_mirror(books_dir: Path, root: Path) -> tuple[Path, dict[str, Path]]:
    """A mirror of two real books (one reached by a link inside the mirror) beside what a folder
    from the internet may hold: a ``.txt`` link to /dev/zero, a FIFO, a dangling link, and a
    link to a book outside the mirror (issue 34, bug 3)."""
    mirror, outside = root / "mirror", root / "outside"
    (mirror / "2" / "1" / "215").mkdir(parents=True)
    (mirror / "store").mkdir()
    outside.mkdir()
    wild = mirror / "2" / "1" / "215" / "215-0.txt"
    wild.write_bytes((books_dir / "pg215_call_of_the_wild.txt").read_bytes())
    (mirror / "store" / "alice.dat").write_bytes(
        (books_dir / "pg11_alice_in_wonderland.txt").read_bytes()
    )
    (outside / "pg84_frankenstein.txt").write_bytes(
        (books_dir / "pg84_frankenstein.txt").read_bytes()
    )
    named = {
        "zero": mirror / "999-0.txt",
        "fifo": mirror / "fifo.txt",
        "dangling": mirror / "gone.txt",
        "out": mirror / "84-0.txt",
        "in": mirror / "11-0.txt",
    }
    named["zero"].symlink_to("/dev/zero")
    os.mkfifo(named["fifo"])
    named["dangling"].symlink_to(mirror / "no-such-book.txt")
    named["out"].symlink_to(outside / "pg84_frankenstein.txt")
    named["in"].symlink_to(mirror / "store" / "alice.dat")
    return mirror, named


def discover_within(seconds: float, *args: object, **kwargs: object) -> MirrorScan:
    """``discover`` in a daemon thread: a scan that hangs (a FIFO) fails the test, not the run."""
    done: list[MirrorScan] = []
    thread = threading.Thread(target=lambda: done.append(discover(*args, **kwargs)), daemon=True)
    t0 = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert done, f"discover did not finish in {seconds} s"
    assert time.monotonic() - t0 < seconds
    return done[0]


def test_a_hostile_mirror_scans_in_seconds_and_refuses_by_name(books_dir, tmp_path):
    mirror, named = hostile_mirror(books_dir, tmp_path)
    scan = discover_within(10, [mirror])
    assert [b.ebook_id for b in scan.books] == [11, 215]  # the link inside the mirror is read
    reasons = dict(scan.failed)
    assert sorted(reasons) == sorted(str(named[k]) for k in ("zero", "fifo", "dangling", "out"))
    assert "is not a regular file (a device)" in reasons[str(named["zero"])]
    assert "is not a regular file (a FIFO (named pipe))" in reasons[str(named["fifo"])]
    assert "a dangling link" in reasons[str(named["dangling"])]
    assert "a link out of the folder" in reasons[str(named["out"])]
    assert "--follow-links" in reasons[str(named["out"])]
    # asked to, it follows the link out; /dev/zero and the FIFO are still no books
    scan = discover_within(10, [mirror], follow_links=True)
    assert [b.ebook_id for b in scan.books] == [11, 84, 215]
    assert sorted(dict(scan.failed)) == sorted(str(named[k]) for k in ("zero", "fifo", "dangling"))
    # a size over the limit is refused from the size alone
    scan = discover_within(10, [mirror], max_bytes=150_000)
    assert not scan.books  # both books are bigger: refused unread, the link too
    too_big = dict(scan.failed)[str(mirror / "2" / "1" / "215" / "215-0.txt")]
    assert "over the max_bytes limit of 150,000 bytes" in too_big


def test_loading_a_device_or_fifo_is_refused_without_reading(tmp_path):
    fifo = tmp_path / "book.txt"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.txt"
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO (named pipe)"), (zero, "a device")):
        with pytest.raises(BookLoadError, match=re.escape(f"is not a regular file ({kind})")):
            load_book(path)


def test_ingest_dry_run_of_a_hostile_mirror_names_what_it_refuses(books_dir, tmp_path):
    mirror, named = hostile_mirror(books_dir, tmp_path)
    env = {**os.environ, "LITRAG_HOME": str(tmp_path / "home")}
    r = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ingest", str(mirror), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "would ingest 2 books" in r.stdout
    for key in ("zero", "fifo", "dangling", "out"):
        assert str(named[key]) in r.stderr + r.stdout, key
