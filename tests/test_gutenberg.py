"""Gutenberg loading on the six real books, their two variant layouts, and bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from litrag.ingestion.gutenberg import (
    DEFAULT_MAX_BYTES,
    Book,
    BookLoadError,
    iter_book_files,
    load_book,
)

# file, book_id, title, author, encoding, release_date, first words, last words of the text
BOOKS = [
    (
        "pg11_alice_in_wonderland.txt",
        "pg11",
        "Alice’s Adventures in Wonderland",
        "Lewis Carroll",
        "utf-8-sig",
        "March, 1994",
        "ALICE’S ADVENTURES IN WONDERLAND",
        "THE END",
    ),
    (
        "pg84_frankenstein.txt",
        "pg84",
        "Frankenstein",
        "Mary Wollstonecraft (Godwin) Shelley",
        "utf-8-sig",
        "June 17, 2008",
        "Frankenstein;",
        "lost in darkness and distance.",
    ),
    (
        "pg158_emma.txt",
        "pg158",
        "Emma",
        "Jane Austen",
        "utf-8-sig",
        "August, 1994",
        "EMMA",
        "FINIS",
    ),
    (
        "pg215_call_of_the_wild.txt",
        "pg215",
        "The Call of the Wild",
        "Jack London",
        "utf-8-sig",
        "July 1, 2008",
        "THE CALL OF THE WILD",
        "which is the song of the pack.",
    ),
    (
        "pg1342_pride_and_prejudice.txt",
        "pg1342",
        "Pride and Prejudice",
        "Jane Austen",
        "utf-8-sig",
        "June, 1998",
        "PRIDE AND PREJUDICE",
        "had been the means of uniting them.",
    ),
    (
        "pg1661_adventures_of_sherlock_holmes.txt",
        "pg1661",
        "The Adventures of Sherlock Holmes",
        "Arthur Conan Doyle",
        "iso-8859-1",
        "November 29, 2002",  # no Release Date field: its "First Posted" date
        "THE ADVENTURES OF SHERLOCK HOLMES",
        "has met with considerable success.",
    ),
]
# Anything of the Gutenberg wrapper that must not survive stripping.
WRAPPER = re.compile(r"project gutenberg|small print|\*\*\*|\r|\ufeff", re.IGNORECASE)


@pytest.mark.parametrize(
    ("name", "book_id", "title", "author", "encoding", "release", "first", "last"), BOOKS
)
def test_real_books_metadata_and_stripping(
    books_dir: Path,
    name: str,
    book_id: str,
    title: str,
    author: str,
    encoding: str,
    release: str,
    first: str,
    last: str,
) -> None:
    book = load_book(books_dir / name)
    assert (book.book_id, book.ebook_id) == (book_id, int(book_id[2:]))
    assert (book.title, book.author, book.language) == (title, author, "English")
    assert (book.encoding, book.release_date) == (encoding, release)
    assert book.source == str(books_dir / name)
    assert book.text.startswith(first)
    assert book.text.endswith(last)
    assert not WRAPPER.search(book.text)
    assert not book.text.lstrip().lower().startswith("produced by")
    if encoding == "iso-8859-1":
        assert book.warnings == [
            "not valid UTF-8 (byte 47068); decoded as iso-8859-1 (declared as iso-8859-1)"
        ]
        assert "IRENE NORTON, née ADLER." in book.text
    else:
        assert book.warnings == []


def test_title_continuation_is_the_subtitle(books_dir: Path) -> None:
    book = load_book(books_dir / "pg84_frankenstein.txt")
    assert book.subtitle == "or The Modern Prometheus"
    assert load_book(books_dir / "pg158_emma.txt").subtitle is None


def test_variant_1994_small_print_header(books_dir: Path) -> None:
    book = load_book(books_dir / "variants" / "alice30_1994_oldstyle_header.txt")
    assert (book.book_id, book.ebook_id, book.encoding) == ("pg11", 11, "ascii")
    # the title above "March, 1994  [Etext #11]"; the author from the book's own title page
    assert book.title == "Alice's Adventures in Wonderland"
    assert book.author == "Lewis Carroll" and book.language is None
    assert book.release_date == "March, 1994"
    assert book.text.startswith("ALICE'S ADVENTURES IN WONDERLAND")
    assert book.text.endswith("THE END")
    assert not WRAPPER.search(book.text)
    assert "Kramer, Attorney" not in book.text  # the end of the SMALL PRINT block
    assert book.warnings == ["no Project Gutenberg end marker; kept the text to the file's end"]


def test_variant_ascii_sherlock_matches_latin1_original(books_dir: Path) -> None:
    ascii_book = load_book(books_dir / "variants" / "pg1661_sherlock_ascii.txt")
    original = load_book(books_dir / "pg1661_adventures_of_sherlock_holmes.txt")
    assert (ascii_book.encoding, ascii_book.warnings) == ("ascii", [])
    assert (ascii_book.book_id, ascii_book.title) == (original.book_id, original.title)
    assert len(ascii_book.text) == len(original.text)
    assert "IRENE NORTON, nee ADLER." in ascii_book.text


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


NEW_STYLE = (
    "The Project Gutenberg eBook of Tiny Tale, by Ann Writer\n\n"
    "Title: Tiny Tale\n\nAuthor: Ann Writer\n\nRelease Date: May 1, 2020 [eBook #99999]\n\n"
    "Language: French\n\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK TINY TALE ***\n\n"
    "Produced by Someone Kind\nand a Friend.\n\n"
    "Once upon a time — “quoted” — the end.\n\n"
    "*** END OF THE PROJECT GUTENBERG EBOOK TINY TALE ***\n\n"
    "Section 1. General Terms of Use and Redistributing Project Gutenberg-tm\n"
)


def test_new_style_markers_crlf_and_bom(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + NEW_STYLE.replace("\n", "\r\n").encode("utf-8")
    book = load_book(_write(tmp_path, "tiny.txt", data))
    assert book.text == "Once upon a time — “quoted” — the end."
    assert (book.book_id, book.ebook_id, book.title, book.author) == (
        "pg99999",
        99999,
        "Tiny Tale",
        "Ann Writer",
    )
    assert (book.language, book.release_date, book.encoding) == (
        "French",
        "May 1, 2020",
        "utf-8-sig",
    )
    assert book.warnings == []


def test_utf8_without_bom_and_bare_cr(tmp_path: Path) -> None:
    book = load_book(_write(tmp_path, "mac.txt", NEW_STYLE.replace("\n", "\r").encode("utf-8")))
    assert book.encoding == "utf-8"
    assert book.text == "Once upon a time — “quoted” — the end."


def test_windows_1252_fallback_is_recorded(tmp_path: Path) -> None:
    text = "Plain words, “curly quotes” and a dash — here.\r\nSecond line."
    book = load_book(_write(tmp_path, "smart.txt", text.encode("cp1252")))
    assert book.encoding == "cp1252"
    assert book.text == "Plain words, “curly quotes” and a dash — here.\nSecond line."
    assert book.warnings[0] == "not valid UTF-8 (byte 13); decoded as cp1252 (undeclared; assumed)"


def test_latin1_declared_but_with_1252_bytes(tmp_path: Path) -> None:
    header = (
        "Character set encoding: ISO-8859-1\n\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n"
    )
    data = header + "He said “café” twice.\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n"
    book = load_book(_write(tmp_path, "x.txt", data.encode("cp1252")))
    assert book.encoding == "cp1252"
    assert book.text == "He said “café” twice."
    assert "header declares iso-8859-1" in book.warnings[0]


def test_plain_text_without_markers_is_kept_whole(tmp_path: Path) -> None:
    text = "  My Own Story\n\nIt was a dark night.\n"
    book = load_book(_write(tmp_path, "My Own_story.txt", text.encode("utf-8")))
    assert book.text == "My Own Story\n\nIt was a dark night."
    assert book.warnings == ["no Project Gutenberg markers found; kept the whole file"]
    assert (book.book_id, book.title, book.author, book.ebook_id) == (
        "my-own-story",
        "My Own Story",
        None,
        None,
    )


def test_ebook_id_and_title_from_file_name(tmp_path: Path) -> None:
    book = load_book(_write(tmp_path, "pg158_emma.txt", b"Emma Woodhouse, handsome."))
    assert (book.book_id, book.ebook_id, book.title) == ("pg158", 158, "Emma")
    book = load_book(_write(tmp_path, "1342-0.txt", b"It is a truth."))
    assert (book.book_id, book.ebook_id) == ("pg1342", 1342)


def _assert_error(path: Path, reason: str, **kwargs: int) -> BookLoadError:
    with pytest.raises(BookLoadError) as info:
        load_book(path, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert reason in message
    assert "\n" not in message
    assert isinstance(info.value, ValueError)
    return info.value


def test_empty_file(tmp_path: Path) -> None:
    _assert_error(_write(tmp_path, "empty.txt", b""), "empty file")
    _assert_error(_write(tmp_path, "blank.txt", b" \r\n\t\n"), "empty file (only whitespace)")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "binary file (PNG image)"),
        (b"%PDF-1.7\n...", "binary file (PDF document)"),
        (b"text then a NUL\x00 byte", "binary file (contains NUL bytes)"),
        (bytes(range(1, 32)) * 50, "binary file (many control characters)"),
    ],
)
def test_binary_file(tmp_path: Path, data: bytes, reason: str) -> None:
    _assert_error(_write(tmp_path, "binary.txt", data), reason)


def test_file_that_is_all_header(tmp_path: Path) -> None:
    only_wrapper = NEW_STYLE.replace("Once upon a time — “quoted” — the end.", "")
    path = _write(tmp_path, "hollow.txt", only_wrapper.encode("utf-8"))
    _assert_error(path, "nothing left after stripping the Project Gutenberg header/footer")


def test_unreadable_paths(tmp_path: Path) -> None:
    _assert_error(tmp_path / "missing.txt", "no such file")
    _assert_error(tmp_path, "is a folder, not a file")
    link = tmp_path / "dangling.txt"
    link.symlink_to(tmp_path / "nowhere.txt")
    _assert_error(link, "no such file")


def test_size_limit_says_how_to_raise_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "big.txt", b"word " * 1000)
    error = _assert_error(
        path, "file is 5,000 bytes, over the max_bytes limit of 4,096 bytes", max_bytes=4096
    )
    assert "--max-mb" in error.reason and "max_bytes=" in error.reason
    assert load_book(path, max_bytes=5000).text.startswith("word word")
    assert DEFAULT_MAX_BYTES == 16 * 1024 * 1024


def test_iter_book_files(books_dir: Path, tmp_path: Path) -> None:
    names = [p.name for p in iter_book_files(books_dir)]
    assert names == sorted(b[0] for b in BOOKS)  # GITenberg_LICENSE.txt is not a book
    assert [p.name for p in iter_book_files(books_dir / "variants")] == [
        "alice30_1994_oldstyle_header.txt",
        "pg1661_sherlock_ascii.txt",
    ]
    # six books, two variants, the four books of more/
    assert len(list(iter_book_files(books_dir, recursive=True))) == 12
    single = books_dir / "pg158_emma.txt"
    assert list(iter_book_files(single)) == [single]
    (tmp_path / "notes.md").write_text("not a book")
    with pytest.raises(BookLoadError, match=r"folder holds no \.txt books"):
        iter_book_files(tmp_path)
    with pytest.raises(BookLoadError, match="no such file or folder"):
        iter_book_files(tmp_path / "absent")


def test_every_book_loads(books_dir: Path) -> None:
    books = [load_book(p) for p in iter_book_files(books_dir, recursive=True)]
    assert all(isinstance(b, Book) and len(b.text) > 100_000 for b in books)
    assert len({b.book_id for b in books}) == 10  # the variants share their originals' ids


# Terminal control in a book from the internet: a window-title OSC ended by BEL, a CSI colour and
# screen clear, a lone bell, a C1 CSI and a form feed between chapters (issue 34, bug 4), in
# enough story that the file is not taken for binary.
STORY = " ".join(["The wind blew over the snow and the dogs ran on."] * 30)
ESCAPES = (
    "*** START OF THE PROJECT GUTENBERG EBOOK ESC ***\n\n"
    f"CHAPTER I.\n\n{STORY}\n\n"
    "The \x1b]0;owned\x07dog \x1b[31mran\x1b[0m home.\x07 It \x9b2Jbarked.\n"
    f"\x0cCHAPTER II.\n\n{STORY}\n\nThe \x1b[2Jend.\n\n"
    "*** END OF THE PROJECT GUTENBERG EBOOK ESC ***\n"
)


def test_control_characters_are_stripped_before_offsets(tmp_path: Path) -> None:
    from litrag.ingestion.chapters import split_chapters

    book = load_book(_write(tmp_path, "esc.txt", ESCAPES.encode("utf-8")))
    assert book.text == (
        f"CHAPTER I.\n\n{STORY}\n\nThe dog ran home. It barked.\n\nCHAPTER II.\n\n"
        f"{STORY}\n\nThe end."
    )
    assert book.warnings == ["removed 8 control character(s) (terminal escapes and the like)"]
    docs = split_chapters(book)
    assert [d.metadata["chapter_title"] for d in docs] == ["CHAPTER I.", "CHAPTER II."]
    for doc in docs:  # offsets index the cleaned text, and the chapters hold no control
        m = doc.metadata
        assert book.text[m["chapter_start_char"] : m["chapter_end_char"]] == doc.text
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", doc.text)


def test_a_file_of_utf8_with_some_latin1_lines_is_decoded_line_by_line(
    books_dir: Path, tmp_path: Path
) -> None:
    """Issue 50, bug 13: a UTF-8 book with a few lines saved as Windows-1252 (pasted from
    another source) was decoded whole as cp1252, so every UTF-8 accent and quote became
    mojibake ("Ã©", "â€œ"). Each line is now decoded as what its bytes are, and the warning
    says which lines were repaired."""
    original = books_dir / "pg84_frankenstein.txt"
    lines = original.read_bytes().split(b"\n")
    legacy = [n for n, line in enumerate(lines, 1) if "è".encode() in line or "ê".encode() in line]
    assert len(legacy) == 6  # Salêve, Montalègre, "chère" and others: accented words
    for n in legacy:
        lines[n - 1] = lines[n - 1].decode("utf-8").encode("cp1252")
    book = load_book(_write(tmp_path, "mixed.txt", b"\n".join(lines)))
    clean = load_book(original)
    assert book.text == clean.text
    assert "Ã" not in book.text and "â€" not in book.text
    assert book.encoding == "utf-8+cp1252"
    assert book.warnings == [
        f"mixed encodings: UTF-8, but 6 lines were not; repaired as cp1252 (lines "
        f"{', '.join(map(str, legacy))})"
    ]
