"""Find the books in a Project Gutenberg mirror (or any folder of Gutenberg texts).

A mirror keeps each ebook in ``1/2/3/4/12345/`` as ``12345-0.txt`` (UTF-8), ``12345-8.txt``
(Latin-1) and ``12345.txt`` (ASCII), each also as a ``.zip``, beside HTML, audio and older
editions; the generated ``cache/epub/12345/pg12345.txt`` layout holds one UTF-8 text. Discovery
keeps one text per ebook number (UTF-8 first, then Latin-1, then ASCII; a plain file before its
zip), skips what is not a book text and counts it by kind, so "ingest the mirror" does not load
the same novel three times or try to read an MP3.

A mirror is a folder nobody checked, so each entry is looked at (``lstat`` / ``stat``, which open
nothing) before a byte is read: only regular files are read (a FIFO would hang the scan, a link
to ``/dev/zero`` would never end), a file over the size limit is refused by its size, reads are
capped, and a symbolic link is followed only to a file inside the folder being scanned (unless
``follow_links``); a dangling link is no book. Each refusal is one line in ``MirrorScan.failed``
that names the file.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from litrag.ingestion.book_bytes import DEFAULT_MAX_BYTES, special_kind, zip_has_text

# 12345-0.txt, 12345-8.zip, 12345.txt, pg12345.txt, pg12345.txt.utf8, pg12345-0.txt
_MIRROR_NAME = re.compile(
    r"^(?:pg)?(?P<id>\d+)(?P<variant>-0|-8)?\.(?P<ext>txt|zip|txt\.utf-?8)$", re.IGNORECASE
)
# Any other text whose name starts with its number: pg158_emma.txt, 1342_pride.txt
_ID_PREFIX = re.compile(r"^(?:pg)?(?P<id>\d+)[_-]", re.IGNORECASE)
_NON_BOOK_NAME = re.compile(
    r"licen[cs]e|readme|copying|^gutindex|^index\b|^gutenberg\b|catalog|^ls-|^md5|^sha",
    re.IGNORECASE,
)
_AUDIO = {".mp3", ".ogg", ".oga", ".m4a", ".m4b", ".spx", ".wav", ".flac", ".mid", ".midi"}
_MARKUP = {".htm", ".html", ".xhtml", ".xml", ".rdf", ".tei", ".rst", ".tex", ".css"}
_EBOOK = {".epub", ".mobi", ".azw", ".azw3", ".kf8", ".pdb", ".lit", ".pdf", ".doc", ".rtf"}
_DATA = {".csv", ".json", ".tsv", ".gz", ".bz2", ".db", ".sqlite"}
_IMAGE = {".jpg", ".jpeg", ".png", ".gif", ".svg", ".tif", ".tiff", ".bmp"}
# Suffixes of a mirror file name that mark a non-text variant: 12345-h.zip (HTML), 12345-mp3.zip
_NON_TEXT_VARIANT = re.compile(r"^\d+-(?:h|t|x|r|pdf|mp3|ogg|m4b|spx|index|readme)\b", re.I)
# Rank of a variant: lower wins. UTF-8 first, then Latin-1, then ASCII, then any other name.
_RANK = {"-0": 0, "utf8": 0, "-8": 1, "": 2}
_OTHER_RANK = 3  # added to a sniffed rank: a mirror-named file wins a tie
_HEADER_ID = re.compile(rb"\bE-?(?:Book|text)\s*#\s*(\d+)", re.IGNORECASE)
_SNIFF_BYTES = 1 << 20  # what ranking a text reads of it: its header and first megabyte


@dataclass(frozen=True)
class MirrorFile:
    """One book text found: its file (a .txt, or the .zip that holds it) and ebook number."""

    path: Path
    ebook_id: int | None
    rank: int  # 0 UTF-8, 1 Latin-1, 2 ASCII (by name); +3 sniffed from the bytes; lower wins

    @property
    def variant(self) -> str:
        return {0: "UTF-8", 1: "Latin-1", 2: "ASCII"}.get(self.rank % _OTHER_RANK, "text")


@dataclass
class MirrorScan:
    """What discovery found under the given paths."""

    books: list[MirrorFile] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # kind -> files not book texts
    duplicates: int = 0  # other versions of an ebook already chosen
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line reason)

    @property
    def files(self) -> list[Path]:
        return [b.path for b in self.books]

    def summary(self) -> str:
        """``12 books; skipped 30 other versions, 5 audio, 2 readme/index`` (one line)."""
        parts = [f"{len(self.books)} book{'s' if len(self.books) != 1 else ''}"]
        skipped = []
        if self.duplicates:
            skipped.append(f"{self.duplicates} other version{'s' * (self.duplicates != 1)}")
        skipped += [f"{n} {kind}" for kind, n in sorted(self.skipped.items())]
        if skipped:
            parts.append("skipped " + ", ".join(skipped))
        return "; ".join(parts)


def name_kind(path: Path) -> str | None:
    """The kind of non-book file ``path`` is by its name alone (``audio``, ``readme/index``,
    ...), or None for a name a book text may have (a ``.txt`` or ``.zip``)."""
    name = path.name
    lower = name.lower()
    suffix = path.suffix.lower()
    if suffix in _AUDIO:
        return "audio"
    if suffix in _MARKUP:
        return "html/xml"
    if suffix in _EBOOK:
        return "epub/pdf/other formats"
    if suffix in _IMAGE:
        return "images"
    if suffix in _DATA:
        return "catalog/data files"
    if _NON_BOOK_NAME.search(path.stem) or lower in ("index", "readme", "gutindex.all"):
        return "readme/index"
    if path.parent.name.lower() == "old" and path.parent.parent.name.isdigit():  # 12345/old/
        return "older editions"
    if _NON_TEXT_VARIANT.match(name):
        return "audio" if re.search(r"mp3|ogg|m4b|spx", lower) else "html/xml"
    if _MIRROR_NAME.match(name) or suffix in (".txt", ".zip"):
        return None
    return "other files"


def classify(path: Path) -> tuple[MirrorFile | None, str | None]:
    """(the book text, None) or (None, the kind of non-book file it is)."""
    kind = name_kind(path)
    if kind is not None:
        return None, kind
    lower = path.name.lower()
    m = _MIRROR_NAME.match(path.name)
    if m:
        ext = m.group("ext").lower()
        variant = m.group("variant") or ""
        if ext.startswith("txt.utf") or (not variant and lower.startswith("pg")):
            variant = "utf8"  # the generated cache/epub/N/pgN.txt is UTF-8
        if ext == "zip" and not zip_has_text(path):
            return None, "zips without a text"
        return MirrorFile(path, int(m.group("id")), _RANK[variant]), None
    if path.suffix.lower() == ".txt":
        return _sniff(path), None
    if zip_has_text(path):
        return MirrorFile(path, None, _OTHER_RANK), None
    return None, "zips without a text"


def _sniff(path: Path) -> MirrorFile:
    """A text not named the mirror's way: its number from the name or the header's
    ``[EBook #N]``, its rank from its first megabyte (so pg1661_x.txt in Latin-1 beats an
    ASCII copy); called on regular files only, and reads no more than that."""
    m = _ID_PREFIX.match(path.name)
    ebook_id = int(m.group("id")) if m else None
    try:
        with path.open("rb") as f:
            data = f.read(_SNIFF_BYTES)
    except OSError:
        return MirrorFile(path, ebook_id, _OTHER_RANK)  # loading names the problem
    if ebook_id is None and (h := _HEADER_ID.search(data[:8192])):
        ebook_id = int(h.group(1))
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    if body.isascii():
        rank = _RANK[""]
    else:
        try:
            body.decode("utf-8", errors="strict") if len(data) < _SNIFF_BYTES else _utf8_head(body)
            rank = _RANK["-0"]
        except UnicodeDecodeError:
            rank = _RANK["-8"]
    return MirrorFile(path, ebook_id, rank + _OTHER_RANK)


def _utf8_head(body: bytes) -> None:
    """Raises ``UnicodeDecodeError`` unless ``body`` (a cut first megabyte) is UTF-8 but for
    a character cut at its end."""
    import codecs

    codecs.getincrementaldecoder("utf-8")().decode(body, final=False)


def refusal(path: Path, root: Path | None, max_bytes: int, follow_links: bool) -> str | None:
    """Why the entry ``path`` (found under ``root``) is not read, in one line; None: read it.

    Looks at the entry without opening it: a link (dangling, or leading out of ``root`` unless
    ``follow_links``), then what it is (a regular file only) and its size.
    """
    try:
        st = path.lstat()
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror or exc})"
    link = stat.S_ISLNK(st.st_mode)
    if link:
        try:
            st = path.stat()
        except OSError:
            return f"{path}: a dangling link (to {os.readlink(path)}): not a book"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: is not a regular file ({special_kind(st.st_mode)}): not a book"
    target = Path(os.path.realpath(path))
    if link and root is not None and not follow_links and not target.is_relative_to(root):
        return (
            f"{path}: a link out of the folder (to {target}): not followed "
            "(use --follow-links to read it)"
        )
    if st.st_size > max_bytes:
        return (
            f"{path}: file is {st.st_size:,} bytes, over the max_bytes limit of {max_bytes:,} "
            "bytes; raise the limit with `litrag ingest --max-mb`"
        )
    return None


def discover(
    paths: Iterable[str | os.PathLike[str]],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    follow_links: bool = False,
) -> MirrorScan:
    """The book texts under ``paths`` (files or folders, searched recursively), one per ebook.

    A file named explicitly is always kept (it is what was asked for). In folders, files
    whose names carry no ebook number are each kept; those that do compete per number. Entries
    that are not regular files, too big, dangling links or links out of their folder (unless
    ``follow_links``) are refused by name in ``failed``, read not at all.
    """
    scan = MirrorScan()
    best: dict[int, MirrorFile] = {}
    order: list[MirrorFile | int] = []  # books in discovery order; an int is an ebook slot
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            found, _ = classify(p)
            order.append(found or MirrorFile(p, None, _OTHER_RANK))
            continue
        if p.exists() and not p.is_dir():  # a device, a FIFO, a socket: named, never opened
            scan.failed.append((str(p), refusal(p, None, max_bytes, True) or f"{p}: not a book"))
            continue
        if not p.is_dir():
            scan.failed.append((str(p), f"{p}: no such file or folder"))
            continue
        n_before = len(order) + scan.duplicates
        refused = len(scan.failed)
        first = len(order)
        root = Path(os.path.realpath(p))
        for file in _walk(p):
            kind = name_kind(file)
            if kind is not None:  # not a book by its name: counted, never opened
                scan.skipped[kind] += 1
                continue
            why = refusal(file, root, max_bytes, follow_links)
            if why is not None:  # a book's name, but no file to read: said by name
                scan.failed.append((str(file), why))
                continue
            found, kind = classify(file)
            if found is None:
                scan.skipped[kind or "other files"] += 1
                continue
            if found.ebook_id is None:
                order.append(found)
                continue
            held = best.get(found.ebook_id)
            if held is None:
                best[found.ebook_id] = found
                order.append(found.ebook_id)
            else:
                scan.duplicates += 1
                if _better(found, held):
                    best[found.ebook_id] = found
        # A folder's books in ebook-number order (pg11, pg84, pg1342), then unnumbered ones.
        order[first:] = sorted(
            order[first:],
            key=lambda x: (0, x, "") if isinstance(x, int) else (1, 0, str(x.path)),
        )
        if len(order) + scan.duplicates == n_before and len(scan.failed) == refused:
            scan.failed.append((str(p), f"{p}: folder holds no .txt or .zip books"))
    seen: set[Path] = set()
    for item in order:
        book = best[item] if isinstance(item, int) else item
        if book.path not in seen:
            seen.add(book.path)
            scan.books.append(book)
    return scan


def _better(a: MirrorFile, b: MirrorFile) -> bool:
    """Lower rank wins; at equal rank a plain text beats its zip, then the shorter path."""
    key = lambda f: (f.rank, f.path.suffix.lower() == ".zip", len(str(f.path)), str(f.path))  # noqa: E731
    return key(a) < key(b)


def _walk(root: Path) -> list[Path]:
    """Every file under ``root``, sorted by path so discovery is deterministic."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        out.extend(Path(dirpath) / f for f in sorted(filenames) if not f.startswith("."))
    return sorted(
        out, key=lambda f: [(0, int(s), "") if s.isdigit() else (1, 0, s) for s in f.parts]
    )
