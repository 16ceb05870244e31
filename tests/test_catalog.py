"""pg_catalog.csv: reading it, the ingest filters it answers, the dry run, ``litrag books``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mirror_tree import CATALOG, build_mirror

from litrag.ingestion.catalog import BookFilter, Catalog, CatalogError, display_name, select
from litrag.ingestion.mirror import discover


@pytest.fixture(scope="module")
def mirror(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_mirror(books_dir, tmp_path_factory.mktemp("mirror"))


@pytest.fixture(scope="module")
def catalog(mirror: Path) -> Catalog:
    found = Catalog.find([mirror])
    assert found is not None and found.path == mirror / "pg_catalog.csv"
    return found


def test_rows_and_their_lists(catalog):
    assert len(catalog) == 6
    wild = catalog.get(215)
    assert wild.title == "The Call of the Wild" and wild.languages == ("en",)
    assert wild.authors == ("London, Jack, 1876-1916",) and wild.author == "Jack London"
    assert wild.locc == ("PS",) and wild.issued == "1995-03-01"
    assert "Category: Adventure" in wild.bookshelves
    assert catalog.get(84).title == "Frankenstein; Or, The Modern Prometheus"
    assert catalog.get(19994).author == "Jack London"  # not the narrator
    assert catalog.get(999) is None and catalog.get(None) is None


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("Austen, Jane, 1775-1817", "Jane Austen"),
        ("Doyle, Arthur Conan, 1859-1930", "Arthur Conan Doyle"),
        ("Homer, 751? BCE-651? BCE", "Homer"),
        ("Tenniel, John, 1820-1914 [Illustrator]", "John Tenniel"),
        ("Anonymous", "Anonymous"),
        ("Wells, H. G. (Herbert George), 1866-1946", "H. G. Wells"),
    ],
)
def test_display_names(name, shown):
    assert display_name(name) == shown


def pick(mirror: Path, catalog: Catalog | None, **flt) -> list[int]:
    chosen = select(discover([mirror]).books, catalog, BookFilter(**flt))
    return [b.ebook_id for b, _ in chosen.books]


def test_filters(mirror, catalog):
    assert pick(mirror, catalog) == [11, 158, 215, 1661]
    assert pick(mirror, catalog, language=["en"], bookshelf="adventure") == [215]
    assert pick(mirror, catalog, language=["fr"]) == []
    assert pick(mirror, catalog, language=["fr", "EN"], author="austen") == [158]
    assert pick(mirror, catalog, author="Conan Doyle") == [1661]  # the name as readers write it
    assert pick(mirror, catalog, subject="juvenile fiction") == [11]
    assert pick(mirror, catalog, ids=[84, 215, 11]) == [11, 215]  # 84 is not in the mirror
    assert pick(mirror, catalog, bookshelf="Category: Novels", limit=2) == [11, 158]
    assert pick(mirror, None, ids=[1661], limit=5) == [1661]  # no catalog needed for these
    chosen = select(discover([mirror]).books, catalog, BookFilter(bookshelf="Romance"))
    assert chosen.summary() == "selected 1; left out 3 by --bookshelf"


def test_catalog_filters_without_a_catalog_are_refused(mirror):
    with pytest.raises(CatalogError, match=r"--language, --author need the Gutenberg catalog"):
        select(discover([mirror]).books, None, BookFilter(language=["en"], author="x"))


def test_sound_rows_are_not_books(tmp_path, catalog):
    from litrag.ingestion.mirror import MirrorFile

    audio = MirrorFile(tmp_path / "19994.txt", 19994, 2)
    chosen = select([audio], catalog)
    assert not chosen.books and chosen.excluded == {"catalog type Sound": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Text#,Title\n1,A\n", "not a Gutenberg catalog: no column Type, Issued, Language"),
        (CATALOG.split("\n")[0] + "\nx1,Text\n", "no readable row .Text# 'x1' is not a number"),
    ],
)
def test_a_bad_catalog_is_one_line(tmp_path, text, message):
    path = tmp_path / "pg_catalog.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError, match=message) as exc:
        Catalog.from_csv(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def test_one_bad_row_is_skipped_and_named_not_the_whole_catalog(mirror, tmp_path, capsys):
    """Issue 33: one row without an ebook number refused all 70,000 rows of a catalog."""
    from test_integrity import run

    path = tmp_path / "pg_catalog.csv"
    path.write_text(CATALOG.replace("\n84,", "\nx84,"), encoding="utf-8")
    catalog = Catalog.from_csv(path)
    assert len(catalog) == 5 and catalog.get(215) is not None and catalog.get(84) is None
    assert catalog.skipped == [f"{path}, line 3: Text# 'x84' is not a number"]
    home = tmp_path / "home"
    code, out, err = run(
        home, "ingest", str(mirror), "--dry-run", "--catalog", str(path), "--language", "en",
        capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert f"warning: {path}, line 3: Text# 'x84' is not a number: row skipped" in err
    assert "The Call of the Wild / Jack London" in out
    assert not home.exists()


def test_dry_run_refuses_what_max_mb_refuses(mirror, tmp_path, capsys):
    """Issue 33: the dry run listed books over ``--max-mb`` as if the ingest would take them."""
    from test_integrity import run

    named = next(mirror.rglob("pg215.txt"))  # a file named is kept by discovery, any size
    code, out, err = run(
        tmp_path / "home", "ingest", str(named), "--dry-run", "--max-mb", "0.001", capsys=capsys
    )
    assert code == 1, out + err
    assert f"refused: {named}: " in err and "over the --max-mb limit of 1,048 bytes" in err, err
    assert out.strip().splitlines()[-1].startswith("would ingest 0 books (0.0 MB")


def test_dry_run_lists_the_books_and_the_time(mirror, tmp_path, capsys):
    from test_integrity import run

    home = tmp_path / "home"
    code, out, err = run(
        home, "ingest", str(mirror), "--dry-run", "--language", "en", "--subject", "fiction",
        "--limit", "3", capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "found 4 books; skipped 3 other versions" in err
    assert "selected 3; left out 1 by --limit" in err
    lines = out.strip().splitlines()
    assert lines[0].startswith("ebook")
    assert "Alice's Adventures in Wonderland / Lewis Carroll [en]" in lines[1]
    assert "11-0.zip" in lines[1] and "Emma / Jane Austen" in lines[2]
    assert "The Call of the Wild / Jack London" in lines[3] and "pg215.txt" in lines[3]
    assert lines[-1].startswith("would ingest 3 books (")
    assert "s per MB" in lines[-1] and "nothing was ingested" in lines[-1]
    assert not (home / "books.json").exists() and not (home / "index").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bookshelf", "Adventure", "--catalog", "/nonexistent/pg.csv"], "no such catalog"),
        (["--ids", "11,abc"], "--ids takes ebook numbers like 11,84,1342 or ranges like 1-500"),
        (["--ids", "900-200"], "--ids range '900-200' ends before it starts"),
        (["--ids", "1-99999999"], "--ids range '1-99999999' spans over 1,000,000 numbers"),
        (["--limit", "0"], "--limit must be at least 1, got 0"),
    ],
)
def test_bad_selection_flags_are_one_error_line(mirror, tmp_path, capsys, args, message):
    from test_integrity import error_line, run

    code, _, err = run(tmp_path / "home", "ingest", str(mirror), "--dry-run", *args, capsys=capsys)
    assert code == 2 and message in error_line(err)


def test_ids_take_numbers_and_ranges():
    from litrag.ingestion.catalog import parse_ids

    assert parse_ids("11, pg84,1000-1003,PG7-pg8") == [11, 84, 1000, 1001, 1002, 1003, 7, 8]
    assert parse_ids(None) == [] and parse_ids(" , ") == []


def test_a_range_of_ids_takes_a_slice_of_the_mirror(mirror, tmp_path, capsys):
    """Several drivers can each ingest a slice of one mirror (docs/scale.md)."""
    from test_integrity import run

    code, out, err = run(
        tmp_path / "home", "ingest", str(mirror), "--dry-run", "--ids", "100-1000", capsys=capsys
    )
    assert code == 0, err
    books = [line.split()[0] for line in out.strip().splitlines()[1:-1]]
    assert books == ["158", "215"], out
    assert "selected 2; left out 2 by --ids" in err


def test_catalog_filter_without_catalog_is_one_error_line(books_dir, tmp_path, capsys):
    from test_integrity import error_line, run

    code, _, err = run(tmp_path / "h", "ingest", str(books_dir), "--language", "en", capsys=capsys)
    assert code == 2 and "--language need the Gutenberg catalog" in error_line(err)


def registry_of(home: Path, n: int) -> None:
    """A registry of ``n`` complete books (no store): what ``books`` pages through."""
    from dataclasses import asdict

    from litrag.ingestion.library import BookRecord

    authors = ["Jane Austen", "Jack London", "Mary Shelley"]
    rows = {}
    for i in range(n):
        rec = BookRecord(
            book_id=f"pg{1000 + i}",
            title=f"Volume {i} of the {['Sea', 'Snow', 'Moor'][i % 3]} stories",
            author=authors[i % 3],
            chapters=3,
            nodes=10,
            segmenter="offline",
            source="",
            fingerprint="x",
            status="complete",
        )
        rows[rec.book_id] = asdict(rec)
    home.mkdir(parents=True)
    (home / "books.json").write_text(json.dumps(rows), encoding="utf-8")


def test_books_pages_and_filters(tmp_path, capsys, monkeypatch):
    from litrag.cli import library as cli_library

    monkeypatch.setattr("litrag.ingestion.integrity.check_files", lambda *a, **k: [])
    home = tmp_path / "home"
    registry_of(home, 120)
    from test_integrity import run

    assert cli_library  # the command under test
    code, out, _ = run(home, "books", capsys=capsys)
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 1 + 50 + 1
    assert lines[1].startswith("pg1000") and lines[-1] == (
        "page 1 of 3: 120 of 120 books match; --page 2 for more"
    )
    code, out, _ = run(home, "books", "--page", "3", capsys=capsys)
    assert out.strip().splitlines()[-1] == "page 3 of 3: 120 of 120 books match"
    assert len(out.strip().splitlines()) == 1 + 20 + 1
    code, out, _ = run(home, "books", "--author", "LONDON", "--search", "snow", capsys=capsys)
    rows = out.strip().splitlines()[1:-1]
    assert len(rows) == 40 and all("Jack London" in r and "Snow" in r for r in rows)
    code, out, _ = run(home, "books", "--search", "pg1007", "--json", capsys=capsys)
    assert [b["book_id"] for b in json.loads(out)] == ["pg1007"]
    code, out, _ = run(home, "books", "--search", "nothing like this", capsys=capsys)
    assert "no book matches; the library holds 120 books" in out


def test_repeated_ebook_numbers_are_named_with_their_rows(mirror, tmp_path, capsys):
    """A number on two rows: the last row won silently (its title, its bookshelves); now the
    catalog names them, and the ingest's dry run says so in one warning line."""
    from test_integrity import run

    path = tmp_path / "pg_catalog.csv"
    # line 2 is Alice's row; a second Alice row (multi-line title) after the first five rows
    path.write_text(
        CATALOG.rstrip("\n") + '\n11,Text,2020-01-01,"Alice\nagain",en,"Carroll, Lewis",,PR,\n',
        encoding="utf-8",
    )
    catalog = Catalog.from_csv(path)
    last = 2 + len(CATALOG.rstrip("\n").splitlines()) - 1
    assert catalog.duplicates == {11: [2, last]} and catalog.get(11).title == "Alice"
    note = catalog.duplicates_note()
    assert note == (
        f"{path}: 1 ebook number on more than one row, the last row used: 11 (lines 2, {last})"
    )
    assert Catalog.find([mirror]).duplicates_note() is None  # the sound one: no warning
    code, _, err = run(
        tmp_path / "home", "ingest", str(mirror), "--dry-run", "--catalog", str(path),
        capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        f"warning: {note}"
    ]
