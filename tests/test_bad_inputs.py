"""Bad inputs the CLI met with raw exception text (issue 33, bug 9 and its weak points): a
catalog that is a folder or "", a port past 65535, an encrypted zip, a zip whose deflate stream
is corrupt, a file name holding a newline, a second book in one Gutenberg file. Each is one
line naming the input (exit 2 where the command refuses its input), and the library it was
given is left exactly as it was: real files, a real library home, the real CLI."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from test_integrity import FOOTER, error_line, first_chapter, run

from litrag.ingestion.gutenberg import load_book


@pytest.fixture(scope="module")
def wild(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first chapter of The Call of the Wild, as a Gutenberg file (header kept)."""
    return first_chapter(books_dir, tmp_path_factory.mktemp("books") / "215-0.txt")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A library home with a registry in it (one book), for a command to leave alone."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "books.json").write_text("{}", encoding="utf-8")
    return home


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: its size and modification time (what a change would move)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def encrypted_zip(text: Path, dest: Path) -> Path:
    """A zip of ``text`` with a password: by Info-ZIP's ``zip -P`` where installed, else the
    same archive with its members marked encrypted (the flag zipfile asks a password for)."""
    zip_tool = shutil.which("zip")
    if zip_tool:
        subprocess.run(
            [zip_tool, "-q", "-j", "-P", "secret", str(dest), str(text)], check=True, timeout=60
        )
        return dest
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(text, text.name)
    data = bytearray(dest.read_bytes())
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(sig)
        data[at + flag_at] |= 0x1
    dest.write_bytes(bytes(data))
    return dest


def corrupt_deflate_zip(text: Path, dest: Path) -> Path:
    """A zip whose central directory is sound but whose deflate stream is garbled midway."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(text, text.name)
    data = bytearray(dest.read_bytes())
    start = 30 + len(text.name)  # past the local header: inside the compressed stream
    for i in range(start + 200, start + 260):
        data[i] ^= 0xFF
    dest.write_bytes(bytes(data))
    return dest


def test_unusable_inputs_are_one_line_and_change_nothing(wild, home, tmp_path, capsys):
    """Each used to end in a traceback's last line (IsADirectoryError, RuntimeError of a
    ZipInfo, zlib's Error -3) or, for the port, in an ingest of the bundled book first."""
    enc = encrypted_zip(wild, tmp_path / "enc.zip")
    bad = corrupt_deflate_zip(wild, tmp_path / "bad.zip")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    cases = [
        (
            ["ingest", "--catalog", str(folder), str(wild)],
            f"error: {folder}: is a folder, not a catalog file (pg_catalog.csv)",
        ),
        (
            ["ingest", "--catalog", "", str(wild)],
            "error: --catalog is empty: give the path of a pg_catalog.csv",
        ),
        (
            ["chat", "--port", "70000", "--no-llm"],
            "error: --port must be between 1 and 65535, got 70000",
        ),
        (
            ["ingest", "-q", str(enc)],
            f"error: {enc}: zip archive is encrypted (215-0.txt needs a password): not read",
        ),
        (
            ["ingest", "-q", str(bad)],
            f"error: {bad}: damaged zip archive (its text does not inflate: Error -3 while "
            "decompressing data: ",
        ),
    ]
    before = snapshot(home)
    for args, line in cases:
        code, _, err = run(home, *args, capsys=capsys)
        assert (code, error_line(err)[: len(line)]) == (2, line), (args, err)
        assert snapshot(home) == before, args


def test_a_damaged_zip_in_a_folder_is_named_and_the_rest_ingested(wild, tmp_path, capsys):
    """A zip met in a folder is loaded with the rest: it fails by name, in one line, and the
    folder's sound book is ingested."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    corrupt_deflate_zip(wild, shelf / "12345-0.zip")
    shutil.copy(wild, shelf / "215-0.txt")
    home = tmp_path / "home"
    code, out, err = run(home, "ingest", "-q", str(shelf), capsys=capsys)
    assert code == 1 and "ingested 1, unchanged 0, failed 1" in out, out + err
    assert error_line(err).startswith(
        f"error: {shelf / '12345-0.zip'}: damaged zip archive (its text does not inflate"
    )


def test_a_newline_in_a_file_name_is_printed_escaped(wild, tmp_path, capsys):
    """A name holding a newline printed as two lines, the second one looking like output of its
    own (here a forged ``ingested 9`` line); it is printed escaped, on one line."""
    evil = tmp_path / "book\ningested 9, unchanged 0, failed 0.txt"
    shutil.copy(wild, evil)
    code, out, err = run(tmp_path / "home", "ingest", "--dry-run", str(evil), capsys=capsys)
    assert code == 0, err
    assert "book\\ningested 9" in out
    assert not any(line.startswith("ingested 9") for line in (out + err).splitlines())
    empty = tmp_path / "empty\nerror: forged.txt"
    empty.write_text("", encoding="utf-8")
    code, out, err = run(tmp_path / "home", "ingest", "-q", str(empty), capsys=capsys)
    assert code == 1
    assert error_line(err) == f"error: {tmp_path}/empty\\nerror: forged.txt: empty file"


def test_a_second_gutenberg_block_is_left_out_with_a_warning(wild, tmp_path, capsys):
    """Two books in one file (a START/END block after the first END): the second was dropped
    without a word; it is still left out (one book per file), and the load says so."""
    first = wild.read_text(encoding="utf-8")
    second = "*** START OF THE PROJECT GUTENBERG EBOOK ANOTHER ***\nAn entirely other tale.\n"
    two = tmp_path / "two.txt"
    two.write_text(first + "\n" + second + FOOTER, encoding="utf-8")
    book = load_book(two)
    assert "entirely other tale" not in book.text
    assert book.text == load_book(wild).text
    line = first.count("\n") + 2
    assert book.warnings == [
        f"a second Project Gutenberg START marker at line {line} (then 4 words) was left out: "
        "only the first START/END block is loaded"
    ]
    code, _, err = run(tmp_path / "home", "ingest", "-q", str(two), capsys=capsys)
    assert code == 0, err
    assert f"warning: pg215: a second Project Gutenberg START marker at line {line}" in err


def test_a_timeout_outside_the_settings_is_finite_and_positive(capsys):
    """``assets`` and ``segment`` read ``--timeout`` themselves: ``inf``/``nan`` were taken."""
    from litrag.cli import main

    with pytest.raises(SystemExit) as exc:  # argparse's type: its usage line, then the error
        main(["assets", "pg215", "--timeout", "inf"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "--timeout: must be a finite number of seconds above 0, got" in err, err
    assert main(["segment", "--timeout", "nan"]) == 2  # segment checks its flags in one line
    err = capsys.readouterr().err
    assert err.strip() == "error: --timeout must be a finite number of seconds, got nan", err
