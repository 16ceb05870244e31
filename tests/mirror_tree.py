"""A small Project Gutenberg mirror built from the shared books, for the mirror and catalog tests.

Laid out as a real mirror is: ``1/1/11/11-0.zip`` (the UTF-8 text, zipped), Sherlock Holmes in
three encodings side by side (``-0`` UTF-8, ``-8`` Latin-1, plain ASCII) plus its zip, The Call
of the Wild in the ``cache/epub/215/pg215.txt`` layout, Emma as ``158-0.txt``, and what a mirror
also holds that is not a book text (HTML, audio, a readme, the index, an older edition, a cover).
Each book is cut to its opening (header kept, a Gutenberg footer added) to keep ingests short.
"""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

FOOTER = "\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n"

# A pg_catalog.csv excerpt: the columns of the real feed, the rows of these five ebooks (their
# catalog values), and an audio book (Type Sound) whose folder holds only MP3s.
ROWS = [
    ("Text#", "Type", "Issued", "Title", "Language", "Authors", "Subjects", "LoCC", "Bookshelves"),
    ("11", "Text", "2008-06-27", "Alice's Adventures in Wonderland", "en",
     "Carroll, Lewis, 1832-1898", "Fantasy fiction; Imaginary places -- Juvenile fiction", "PR",
     "Category: Novels; Children's Literature"),
    ("84", "Text", "1993-10-01", "Frankenstein; Or, The Modern Prometheus", "en",
     "Shelley, Mary Wollstonecraft, 1797-1851", "Science fiction; Horror tales", "PR",
     "Gothic Fiction; Category: Novels; Category: Horror"),
    ("158", "Text", "1994-08-01", "Emma", "en", "Austen, Jane, 1775-1817",
     "England -- Fiction; Young women -- Fiction; Love stories", "PR",
     "Best Books Ever Listings; Category: Novels; Category: Romance"),
    ("215", "Text", "1995-03-01", "The Call of the Wild", "en", "London, Jack, 1876-1916",
     "Adventure stories; Sled dogs -- Fiction; "
     "Klondike River Valley (Yukon) -- Gold discoveries -- Fiction", "PS",
     "Best Books Ever Listings; Category: Novels; Category: Adventure"),
    ("1661", "Text", "1999-03-01", "The Adventures of Sherlock Holmes", "en",
     "Doyle, Arthur Conan, 1859-1930",
     "Detective and mystery stories, English; Sherlock Holmes (Fictitious character) -- Fiction",
     "PR", "Category: Short Stories; Category: Crime, Thrillers and Mystery"),
    ("19994", "Sound", "2006-12-01", "The Call of the Wild (audio)", "en",
     "London, Jack, 1876-1916; Reader, A. [Narrator]", "Adventure stories", "PS", ""),
]  # fmt: skip


def _csv(rows: list[tuple[str, ...]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


CATALOG = _csv(ROWS)


def excerpt(src: Path, lines: int, encoding: str = "utf-8-sig") -> str:
    """The first ``lines`` lines of a shared book (its header and opening), with a footer."""
    raw = src.read_bytes().decode(encoding).replace("\r\n", "\n")
    return "\n".join(raw.split("\n")[:lines]) + FOOTER


def build_mirror(books: Path, root: Path, catalog: bool = True) -> Path:
    """The mirror tree under ``root``; returns ``root``."""
    variants = books / "variants"
    alice = excerpt(books / "pg11_alice_in_wonderland.txt", 120)
    d = root / "1" / "11"
    d.mkdir(parents=True)
    with zipfile.ZipFile(d / "11-0.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("11-0.txt", alice.encode("utf-8"))
    with zipfile.ZipFile(d / "11-h.zip", "w") as zf:  # the HTML edition: not a text
        zf.writestr("11-h/11-h.htm", "<html><body>Alice</body></html>")
    (d / "old").mkdir()
    (d / "old" / "alice30.txt").write_bytes(
        (variants / "alice30_1994_oldstyle_header.txt").read_bytes()
    )

    d = root / "1" / "6" / "6" / "1661"
    d.mkdir(parents=True)
    latin = excerpt(books / "pg1661_adventures_of_sherlock_holmes.txt", 140, "iso-8859-1")
    latin = latin.replace("Irene Adler", "Irène Adler", 1)  # a letter Latin-1 and UTF-8 differ in
    (d / "1661-8.txt").write_bytes(latin.encode("iso-8859-1"))
    (d / "1661-0.txt").write_bytes(latin.encode("utf-8"))
    (d / "1661.txt").write_text(excerpt(variants / "pg1661_sherlock_ascii.txt", 140, "ascii"))
    with zipfile.ZipFile(d / "1661-0.zip", "w") as zf:
        zf.writestr("1661-0.txt", latin.encode("utf-8"))
    (d / "1661-h").mkdir()
    (d / "1661-h" / "1661-h.htm").write_text("<html><body>Holmes</body></html>")
    (d / "1661-h" / "images").mkdir()
    (d / "1661-h" / "images" / "cover.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 64)

    d = root / "1" / "5" / "158"
    d.mkdir(parents=True)
    (d / "158-0.txt").write_text(excerpt(books / "pg158_emma.txt", 120), encoding="utf-8")

    d = root / "cache" / "epub" / "215"
    d.mkdir(parents=True)
    (d / "pg215.txt").write_text(
        excerpt(books / "pg215_call_of_the_wild.txt", 160), encoding="utf-8"
    )
    (d / "pg215.rdf").write_text("<rdf:RDF/>")
    (d / "pg215.epub").write_bytes(b"PK\x03\x04epub")

    d = root / "1" / "9" / "9" / "9" / "19994" / "19994-mp3"
    d.mkdir(parents=True)
    for k in (1, 2):
        (d / f"19994-{k:02d}.mp3").write_bytes(b"ID3\x03\0\0\0\0\0\0")
    (d.parent / "index.html").write_text("<html>audio book</html>")
    (d.parent / "19994-readme.txt").write_text("This is an audio book.\n")

    (root / "GUTINDEX.ALL").write_text("GUTINDEX listing\n")
    (root / "README.txt").write_text("A Project Gutenberg mirror.\n")
    if catalog:
        (root / "pg_catalog.csv").write_text(CATALOG, encoding="utf-8")
    return root
