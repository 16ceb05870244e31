"""Load a Project Gutenberg plain-text file into one clean text plus its metadata.

Every later stage (chapters, sentence offsets, spoiler limits, evidence spans) indexes into
``Book.text``, so loading is deterministic and never silent: the encoding actually used is recorded,
line endings become LF, control characters and terminal escape sequences are removed (before any
offset is taken: ``litrag.segment.controls``), the Gutenberg header, footer and licence are cut
at their markers, and anything unusual (no markers, a non-UTF-8 file) lands in ``Book.warnings``.
Bad input raises ``BookLoadError`` with a one-line message that names the file.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from litrag.ingestion.book_bytes import DEFAULT_MAX_BYTES, BookLoadError, read_book_bytes
from litrag.segment.controls import count_controls, strip_controls

__all__ = ["DEFAULT_MAX_BYTES", "Book", "BookLoadError", "iter_book_files", "load_book"]

_F = re.IGNORECASE | re.MULTILINE
# Where the text starts: after the START line, or after the 1990s "SMALL PRINT" block.
_START = re.compile(
    r"^[ \t]*\*{3}[ \t]*START OF (?:THIS|THE) PROJECT GUTENBERG E-?(?:BOOK|TEXT)\b.*$"
    r"|^[ \t]*\*+[ \t]*END\*?[ \t]*THE SMALL PRINT\b.*$",
    _F,
)
# Where it stops: the END line, the "End of (the) Project Gutenberg ..." line, a licence block.
_END = re.compile(
    r"^[ \t]*\*{3}[ \t]*END OF (?:THIS|THE) PROJECT GUTENBERG E-?(?:BOOK|TEXT)\b"
    r"|^[ \t]*\**[ \t]*End of (?:the |this )?Project Gutenberg\b"
    r"|^[ \t]*\*{3}[ \t]*START:?[ \t]*FULL LICEN[SC]E"
    r"|^[ \t]*\*+[ \t]*START\*+[ \t]*THE SMALL PRINT",
    _F,
)
_CREDITS = re.compile(  # matched at the body's start (``match(raw, begin, end)``)
    r"\s*(?:Produced by|E-?text prepared by|Prepared by|Transcribed (?:by|from))\b"
    r"[^\n]*(?:\n[ \t]*\S[^\n]*)*",
    re.IGNORECASE,
)
_TITLE_LINE = re.compile(
    r"Project Gutenberg(?:(?:'s|’s)\s+|\s+E-?(?:Book|text)\s+of\s+)"
    r"(?P<title>.+?)(?:,\s+by\s+(?P<author>.+?))?[ \t*]*$",
    _F,
)
_EBOOK_ID = re.compile(r"\bE-?(?:Book|text)\s*#\s*(\d+)", re.IGNORECASE)
_ID_IN_NAME = re.compile(r"^(?:pg)?(\d+)(?:$|[_-])", re.IGNORECASE)  # pg158_emma, 1342-0
_DATE_WITH_ID = re.compile(
    r"^[ \t]*(?P<date>[A-Z][a-z]+\.?,?[ \t]+\d{4})[ \t]+\[E-?(?:Book|text)", re.MULTILINE
)
_CHARSET = re.compile(rb"Character set encoding:[ \t]*([\w.\- ]+?)[ \t]*\r?\n", re.IGNORECASE)
_MAGIC = {
    b"\x89PNG": "PNG image",
    b"%PDF": "PDF document",
    b"PK\x03\x04": "ZIP archive",
    b"\x1f\x8b": "gzip archive",
    b"\xff\xd8\xff": "JPEG image",
    b"GIF8": "GIF image",
    b"\x7fELF": "ELF executable",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
_NON_BOOK = re.compile(r"licen[cs]e|readme|copying", re.IGNORECASE)


@dataclass
class Book:
    """A book's stripped text (LF line endings) and what is known about it."""

    text: str
    book_id: str  # "pg158" from the ebook id, else a slug of the file name
    title: str
    author: str | None
    ebook_id: int | None
    language: str | None
    release_date: str | None
    encoding: str  # the codec used: ascii, utf-8, utf-8-sig, utf-16, iso-8859-1, cp1252, or
    # utf-8+cp1252 (utf-8+iso-8859-1): UTF-8 with some lines in the legacy codec
    source: str  # the path it was read from
    subtitle: str | None = None  # a continuation of the Title: field ("or The Modern Prometheus")
    warnings: list[str] = field(default_factory=list)


def load_book(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> Book:
    """Read, decode, normalise and strip one plain-text book; ``BookLoadError`` if unusable."""
    p = Path(path)
    data = read_book_bytes(p, max_bytes)
    raw, encoding, warnings = _decode(data, p)
    del data  # a big book holds the text once or twice while loading, never its bytes too
    if "\r" in raw:
        raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    controls = count_controls(raw)
    if controls:  # ESC, BEL, OSC...: never part of a story, and never to reach a terminal
        raw = strip_controls(raw)
        warnings.append(f"removed {controls} control character(s) (terminal escapes and the like)")
    if not raw or raw.isspace():
        raise BookLoadError(p, "empty file (only whitespace)")
    body, header, marker_warnings = _strip_gutenberg(raw)
    warnings += marker_warnings
    if not body:
        raise BookLoadError(p, "nothing left after stripping the Project Gutenberg header/footer")
    meta = _metadata(header, p, body)
    return Book(text=body, encoding=encoding, source=str(p), warnings=warnings, **meta)


def iter_book_files(path: str | os.PathLike[str], *, recursive: bool = False) -> Iterator[Path]:
    """The .txt books at ``path``: the file itself, or a folder's files in sorted order.

    Checked before iterating, so a wrong path fails at the call. Licence/readme files (e.g.
    GITenberg_LICENSE.txt) are skipped, since they are not books.
    """
    p = Path(path)
    if p.is_file():
        return iter([p])
    if p.exists() and not p.is_dir():  # /dev/null, a pipe, a socket: there, but no book
        raise BookLoadError(p, "is not a regular file (a device, pipe or socket): not a book")
    if not p.is_dir():
        raise BookLoadError(p, "no such file or folder")
    pattern = "**/*.txt" if recursive else "*.txt"
    files = sorted(f for f in p.glob(pattern) if f.is_file() and not _NON_BOOK.search(f.stem))
    if not files:
        raise BookLoadError(p, "folder holds no .txt books")
    return iter(files)


def _decode(data: bytes, p: Path) -> tuple[str, str, list[str]]:
    """UTF-8 (with or without BOM) first; else the declared charset or Windows-1252/Latin-1."""
    for magic, kind in _MAGIC.items():
        if data.startswith(magic):
            raise BookLoadError(p, f"binary file ({kind}), not plain text")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return _check_text(data.decode("utf-16"), p), "utf-16", []
        except UnicodeDecodeError:
            raise BookLoadError(p, "invalid UTF-16 text after a UTF-16 byte-order mark") from None
    if b"\x00" in data:
        raise BookLoadError(p, "binary file (contains NUL bytes), not plain text")
    bom = data.startswith(codecs.BOM_UTF8)
    body = data[len(codecs.BOM_UTF8) :] if bom else data
    if body.isascii():
        return _check_text(body.decode("ascii"), p), "utf-8-sig" if bom else "ascii", []
    try:
        return _check_text(body.decode("utf-8"), p), "utf-8-sig" if bom else "utf-8", []
    except UnicodeDecodeError as e:
        bad_at = e.start
    declared = _declared_charset(data)
    encoding = declared if declared in ("iso-8859-1", "cp1252") else "cp1252"
    if encoding == "iso-8859-1" and re.search(rb"[\x80-\x9f]", body):
        encoding = "cp1252"  # C1 controls are never text: "Latin-1" files that use them are 1252
    mixed = _mixed_lines(body, encoding)
    if mixed is not None:
        text, repaired = mixed
        shown = ", ".join(map(str, repaired[:8])) + (", ..." if len(repaired) > 8 else "")
        note = (
            f"mixed encodings: UTF-8, but {len(repaired)} line{'s' * (len(repaired) > 1)} "
            f"{'were' if len(repaired) > 1 else 'was'} not; repaired as {encoding} "
            f"(line{'s' * (len(repaired) > 1)} {shown})"
        )
        return _check_text(text, p), f"utf-8+{encoding}", [note]
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError:  # bytes undefined in Windows-1252: Latin-1 decodes anything
        encoding = "iso-8859-1"
        text = body.decode(encoding)
    if declared == encoding:
        why = f"declared as {declared}"
    elif declared:
        why = f"the header declares {declared}, which does not fit the bytes; assumed"
    else:
        why = "undeclared; assumed"
    note = f"not valid UTF-8 (byte {bad_at}); decoded as {encoding} ({why})"
    return _check_text(text, p), encoding, [note]


def _mixed_lines(body: bytes, encoding: str) -> tuple[str, list[int]] | None:
    """A file of UTF-8 lines with some lines in a legacy codec (a book pasted together from two
    sources): each line decoded as what its bytes are, and the 1-based numbers of the lines
    decoded as ``encoding``. None when no line holds UTF-8 beyond ASCII: the file is legacy
    throughout (decoding it whole as cp1252 turned its UTF-8 lines into "Ã‰")."""
    lines = body.split(b"\n")
    out: list[str] = []
    repaired: list[int] = []
    utf8 = False
    for number, line in enumerate(lines, start=1):
        try:
            out.append(line.decode("utf-8"))
            utf8 = utf8 or not line.isascii()
        except UnicodeDecodeError:
            try:
                out.append(line.decode(encoding))
            except UnicodeDecodeError:  # a byte cp1252 leaves undefined: Latin-1 has them all
                out.append(line.decode("iso-8859-1"))
            repaired.append(number)
    return ("\n".join(out), repaired) if utf8 else None


def _declared_charset(data: bytes) -> str | None:
    m = _CHARSET.search(data[:8192])
    if not m:
        return None
    name = m.group(1).decode("ascii", "replace").strip().lower()
    if "8859-1" in name or "latin" in name:
        return "iso-8859-1"
    if "1252" in name:
        return "cp1252"
    return name


def _check_text(text: str, p: Path) -> str:
    sample = text[:65536]
    if sample and len(_CONTROL.findall(sample)) > 0.01 * len(sample):
        raise BookLoadError(p, "binary file (many control characters), not plain text")
    return text


def _strip_gutenberg(raw: str) -> tuple[str, str, list[str]]:
    """(body, header, warnings): the text between the START and END markers, stripped."""
    starts = list(_START.finditer(raw))
    first_end = _END.search(raw, starts[0].end()) if starts else _END.search(raw)
    warnings: list[str] = []
    if starts:
        limit = first_end.start() if first_end else len(raw)
        start_m = [m for m in starts if m.end() <= limit][-1]
        begin, header = start_m.end(), raw[: start_m.start()]
        end_m = _END.search(raw, begin)
    else:
        begin, header, end_m = 0, raw[:3000], first_end
    end = end_m.start() if end_m else len(raw)
    if not starts and not end_m:
        warnings.append("no Project Gutenberg markers found; kept the whole file")
    elif not starts:
        warnings.append("no Project Gutenberg start marker; kept the text from the file's start")
    elif not end_m:
        warnings.append("no Project Gutenberg end marker; kept the text to the file's end")
    later = [m for m in starts if end_m and m.start() >= end_m.end()]
    if later:  # two books in one file: the first is kept, the second said, not lost silently
        warnings.append(_second_block(raw, later[0]))
    if starts and (credits := _CREDITS.match(raw, begin, end)):
        begin = credits.end()
    while begin < end and raw[begin].isspace():  # stripped by index: one copy of the body
        begin += 1
    while end > begin and raw[end - 1].isspace():
        end -= 1
    return raw[begin:end], header, warnings


def _second_block(raw: str, start: re.Match[str]) -> str:
    """The warning for a START/END block after the first END marker (the text is left out)."""
    end = _END.search(raw, start.end())
    words = len(raw[start.end() : end.start() if end else len(raw)].split())
    line = raw.count("\n", 0, start.start()) + 1
    return (
        f"a second Project Gutenberg START marker at line {line} (then {words:,} words) was "
        "left out: only the first START/END block is loaded"
    )


def _field(header: str, name: str) -> tuple[str | None, str | None]:
    """A ``Name: value`` header field and its indented continuation line, if any."""
    m = re.search(rf"^[ \t]*{name}:[ \t]*(\S.*?)[ \t]*$(?:\n[ \t]+(\S.*?)[ \t]*$)?", header, _F)
    if not m:
        return None, None
    return " ".join(m.group(1).split()), (" ".join(m.group(2).split()) if m.group(2) else None)


def _titled_line(header: str) -> str | None:
    """The 1990s layout's title: the line just above ``March, 1994  [Etext #11]``."""
    m = _DATE_WITH_ID.search(header)
    if not m:
        return None
    above = [ln.strip() for ln in header[: m.start()].splitlines() if ln.strip()]
    if above and len(above[-1]) < 100 and "*" not in above[-1] and "Gutenberg" not in above[-1]:
        return " ".join(above[-1].split())
    return None


def _fold(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower().replace("’", "'")).strip()


def _title_page_author(body: str, title: str) -> str | None:
    """The name under the title on the book's own title page (``Lewis Carroll``)."""
    lines = [ln.strip() for ln in body[:3000].splitlines() if ln.strip()][:40]
    for i, line in enumerate(lines[:-1]):
        if _fold(line) == _fold(title):
            name = re.sub(r"^by\s+", "", lines[i + 1], flags=re.IGNORECASE)
            if _NAME.match(name):
                return name.title() if name.isupper() else name
    return None


_NAME = re.compile(r"^[A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*){1,4}$")


def _metadata(header: str, p: Path, body: str = "") -> dict[str, object]:
    title, subtitle = _field(header, "Title")
    author, _ = _field(header, "Author")
    if not title or not author:
        title = title or _titled_line(header)
        m = _TITLE_LINE.search(header)
        if m:
            title = title or " ".join(m.group("title").split())
            author = author or (" ".join(m.group("author").split()) if m.group("author") else None)
    if title and not author:
        author = _title_page_author(body, title)
    stem = p.stem
    name_title = re.sub(r"^pg\d+[_-]+", "", stem).replace("_", " ").replace("-", " ").strip()
    title = title or (name_title.title() if name_title else stem)

    release = None
    for name in ("Release Date", "First Posted", "Posting Date"):
        value, _ = _field(header, name)
        if value:
            release = re.sub(r"\s*\[.*$", "", value).strip() or None
            break
    if release is None and (m := _DATE_WITH_ID.search(header)):
        release = m.group("date")

    ebook_id: int | None = None
    if (m := _EBOOK_ID.search(header)) or (m := _ID_IN_NAME.match(stem)):
        ebook_id = int(m.group(1))
    slug = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "book"
    return {
        "book_id": f"pg{ebook_id}" if ebook_id is not None else slug,
        "title": title,
        "subtitle": subtitle,
        "author": author,
        "ebook_id": ebook_id,
        "language": _field(header, "Language")[0],
        "release_date": release,
    }
