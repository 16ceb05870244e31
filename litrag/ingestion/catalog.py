"""Project Gutenberg's catalog (``pg_catalog.csv``) and the selection it makes possible.

The catalog is the library's card index: title, authors, language, subjects and bookshelves per
ebook number. With it, "the English novels on the Adventure bookshelf" is a filter over the
mirror before a single book is read; a book's catalog row is what its registry entry records.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from litrag.ingestion.input_file import InputFileError, read_input_bytes
from litrag.ingestion.mirror import MirrorFile

MAX_CATALOG_BYTES = 256 * 1024 * 1024  # Gutenberg's whole catalog is ~15 MB
COLUMNS = (
    "Text#",
    "Type",
    "Issued",
    "Title",
    "Language",
    "Authors",
    "Subjects",
    "LoCC",
    "Bookshelves",
)
# Where a mirror keeps it: its root, or the generated feeds folder.
CATALOG_PLACES = ("pg_catalog.csv", "cache/epub/feeds/pg_catalog.csv", "feeds/pg_catalog.csv")
_DATES = re.compile(r",?\s*(?:BCE?\s*)?-?\d{1,4}\??(?:\s*BCE?)?-(?:\d{1,4}\??)?(?:\s*BCE?)?\s*$")
_ROLE = re.compile(r"\s*\[([^\]]+)\]\s*$")


class CatalogError(ValueError):
    """A catalog that cannot be read; the message names the file and what is wrong."""


MAX_ID_RANGE = 1_000_000


def parse_ids(text: str | None) -> list[int]:
    """``--ids``: ebook numbers and inclusive ranges, "11,84,pg1342,20001-40000" (a range lets
    several drivers each take a slice of a mirror)."""
    ids: list[int] = []
    for raw in (text or "").split(","):
        part = raw.strip().lower()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        lo, hi = lo.strip().removeprefix("pg"), hi.strip().removeprefix("pg")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise CatalogError(
                f"--ids takes ebook numbers like 11,84,1342 or ranges like 1-500, got {raw!r}"
            )
        if dash and int(hi) < int(lo):
            raise CatalogError(f"--ids range {raw.strip()!r} ends before it starts")
        if dash and int(hi) - int(lo) >= MAX_ID_RANGE:  # Gutenberg's numbers stay below 100,000
            raise CatalogError(f"--ids range {raw.strip()!r} spans over {MAX_ID_RANGE:,} numbers")
        ids.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    return ids


@dataclass(frozen=True)
class CatalogEntry:
    """One row of ``pg_catalog.csv``; list fields are its ``; ``-separated values."""

    ebook_id: int
    type: str
    issued: str
    title: str
    languages: tuple[str, ...]
    authors: tuple[str, ...]  # as the catalog writes them: "Austen, Jane, 1775-1817"
    subjects: tuple[str, ...]
    locc: tuple[str, ...]
    bookshelves: tuple[str, ...]

    @property
    def author(self) -> str | None:
        """The first author (not an illustrator, editor, translator) as a reader writes it."""
        plain = [a for a in self.authors if not _ROLE.search(a)] or list(self.authors)
        return display_name(plain[0]) if plain else None

    def as_record(self) -> dict[str, Any]:
        """What the registry keeps of it (JSON-ready)."""
        row = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in row.items()}


def display_name(catalog_name: str) -> str:
    """``Austen, Jane, 1775-1817`` -> ``Jane Austen``; ``Homer, 751? BCE-651? BCE`` -> ``Homer``."""
    name = _ROLE.sub("", catalog_name).strip()
    name = _DATES.sub("", name).strip().rstrip(",").strip()
    parts = [p.strip() for p in name.split(",") if p.strip()]
    if len(parts) >= 2:
        first = re.sub(r"\s*\(.*\)\s*$", "", parts[1]).strip() or parts[1]
        return f"{first} {parts[0]}"
    return parts[0] if parts else catalog_name.strip()


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(";") if v.strip())


def _rows(
    reader: csv.DictReader[str], path: Path, skipped: list[str]
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) for each row of ``reader``; a line the CSV reader refuses (a NUL byte, a
    field over the size limit) is named in ``skipped`` and the reading goes on."""
    while True:
        line = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            skipped.append(f"{path}, line {line}: {exc}")
            continue
        yield line, row


def _entry(number: int, row: dict[str, str]) -> CatalogEntry:
    title = (row.get("Title") or "").strip()
    return CatalogEntry(
        ebook_id=number,
        type=(row.get("Type") or "").strip(),
        issued=(row.get("Issued") or "").strip(),
        title=" ".join(title.splitlines()[0].split()) if title else "",
        languages=tuple(x.lower() for x in _split(row.get("Language"))),
        authors=_split(row.get("Authors")),
        subjects=_split(row.get("Subjects")),
        locc=_split(row.get("LoCC")),
        bookshelves=_split(row.get("Bookshelves")),
    )


@dataclass
class Catalog:
    """The rows of a ``pg_catalog.csv``, by ebook number."""

    path: Path
    entries: dict[int, CatalogEntry] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # "FILE, line N: why", one per row
    # ebook number -> the lines of its rows, for the numbers with more than one (the last used)
    duplicates: dict[int, list[int]] = field(default_factory=dict)

    def duplicates_note(self) -> str | None:
        """One line naming the repeated ebook numbers and their rows, or None. Why: a repeated
        number's last row silently replaced the first, title and bookshelves included."""
        if not self.duplicates:
            return None
        shown = [
            f"{n} (lines {', '.join(map(str, lines))})"
            for n, lines in list(self.duplicates.items())[:5]
        ]
        more = len(self.duplicates) - len(shown)
        rest = f" and {more} more" if more > 0 else ""
        count = len(self.duplicates)
        return (
            f"{self.path}: {count} ebook number{'s' if count != 1 else ''} on more than one row, "
            f"the last row used: {', '.join(shown)}{rest}"
        )

    @classmethod
    def from_csv(cls, path: str | Path) -> Catalog:
        """The catalog at ``path``. A row that cannot be read (no ebook number, a broken CSV
        line) is skipped and named in ``skipped``: one bad row of 70,000 used to refuse the
        whole catalog. A file that is no catalog at all is a ``CatalogError``."""
        p = Path(path)
        if str(path) == "":
            raise CatalogError("--catalog is empty: give the path of a pg_catalog.csv")
        skipped: list[str] = []
        try:  # a device or a FIFO is refused before a byte is read, and the read is capped
            text = read_input_bytes(p, "", MAX_CATALOG_BYTES).decode("utf-8-sig")
            with io.StringIO(text, newline="") as fh:
                reader = csv.DictReader(fh)
                missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
                if missing:
                    raise CatalogError(
                        f"{p}: not a Gutenberg catalog: no column {', '.join(missing)} "
                        f"(expected {', '.join(COLUMNS)})"
                    )
                entries: dict[int, CatalogEntry] = {}
                lines: dict[int, list[int]] = {}
                for line, row in _rows(reader, p, skipped):
                    number = (row.get("Text#") or "").strip()
                    if not number.isdigit():
                        skipped.append(f"{p}, line {line}: Text# {number!r} is not a number")
                        continue
                    lines.setdefault(int(number), []).append(line)
                    entries[int(number)] = _entry(int(number), row)
        except InputFileError as exc:
            reason = {
                "no such file": "no such catalog file",
                "is a folder, not a file": "is a folder, not a catalog file (pg_catalog.csv)",
            }.get(exc.reason, exc.reason)
            raise CatalogError(f"{p}: {reason}") from None
        except UnicodeDecodeError as exc:
            raise CatalogError(f"{p}: not UTF-8 text (byte {exc.start})") from None
        except csv.Error as exc:
            raise CatalogError(f"{p}: not a CSV file ({exc})") from None
        except OSError as exc:
            raise CatalogError(f"{p}: cannot read it ({exc.strerror or exc})") from None
        if skipped and not entries:
            raise CatalogError(f"{p}: no readable row ({skipped[0].split(': ', 1)[-1]})")
        repeated = {n: at for n, at in lines.items() if len(at) > 1}
        return cls(path=p, entries=entries, skipped=skipped, duplicates=repeated)

    @classmethod
    def find(cls, roots: Iterable[str | Path]) -> Catalog | None:
        """The catalog a mirror root keeps in one of its usual places, if any."""
        for root in roots:
            r = Path(root)
            if not r.is_dir():
                continue
            for place in CATALOG_PLACES:
                if (r / place).is_file():
                    return cls.from_csv(r / place)
        return None

    def get(self, ebook_id: int | None) -> CatalogEntry | None:
        return self.entries.get(ebook_id) if ebook_id is not None else None

    def __len__(self) -> int:
        return len(self.entries)


@dataclass
class BookFilter:
    """Which books to ingest: catalog fields (substring, any case) and ebook numbers."""

    language: Sequence[str] = ()  # codes; a book matches if it has any of them
    bookshelf: str | None = None
    subject: str | None = None
    author: str | None = None
    ids: Sequence[int] = ()
    limit: int | None = None

    @property
    def needs_catalog(self) -> list[str]:
        """The flags set that only a catalog can answer."""
        named = {
            "--language": bool(self.language),
            "--bookshelf": bool(self.bookshelf),
            "--subject": bool(self.subject),
            "--author": bool(self.author),
        }
        return [flag for flag, on in named.items() if on]

    def matches(self, entry: CatalogEntry) -> str | None:
        """None when the entry passes, else the first filter it fails (for the counts)."""
        if self.language and not set(lang.lower() for lang in self.language) & set(entry.languages):
            return "language"
        if self.bookshelf and not _has(entry.bookshelves, self.bookshelf):
            return "bookshelf"
        if self.subject and not _has(entry.subjects, self.subject):
            return "subject"
        if (
            self.author
            and not _has(entry.authors, self.author)
            and not (entry.author and self.author.lower() in entry.author.lower())
        ):
            return "author"
        return None


def _has(values: Sequence[str], needle: str) -> bool:
    n = needle.lower()
    return any(n in v.lower() for v in values)


@dataclass
class Selection:
    """The books chosen, each with its catalog row (None when no catalog knows it)."""

    books: list[tuple[MirrorFile, CatalogEntry | None]] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)  # why -> books left out

    def summary(self) -> str:
        if not self.excluded:
            return f"selected {len(self.books)}"
        why = ", ".join(f"{n} by {k}" for k, n in sorted(self.excluded.items()))
        return f"selected {len(self.books)}; left out {why}"


def select(
    books: Sequence[MirrorFile], catalog: Catalog | None, flt: BookFilter | None = None
) -> Selection:
    """Apply the filter to discovered books; catalog filters without a catalog are an error."""
    flt = flt or BookFilter()
    if catalog is None and flt.needs_catalog:
        raise CatalogError(
            f"{', '.join(flt.needs_catalog)} need the Gutenberg catalog: pass "
            "--catalog pg_catalog.csv (or keep it at the mirror's root)"
        )
    out = Selection()
    wanted = set(flt.ids)
    for book in books:
        if wanted and book.ebook_id not in wanted:
            out.excluded["--ids"] += 1
            continue
        entry = catalog.get(book.ebook_id) if catalog is not None else None
        if catalog is not None and flt.needs_catalog:
            if entry is None:
                out.excluded["not in the catalog"] += 1
                continue
            failed = flt.matches(entry)
            if failed:
                out.excluded[f"--{failed}"] += 1
                continue
        if entry is not None and entry.type and entry.type.lower() != "text":
            out.excluded[f"catalog type {entry.type}"] += 1
            continue
        if flt.limit is not None and len(out.books) >= flt.limit:
            out.excluded["--limit"] += 1
            continue
        out.books.append((book, entry))
    return out


# Seconds per MB of book text for the whole ingest (load .. store, offline segmenter, packaged
# MiniLM, paragraph children with sentence windows, character index), measured on 2 quiet cores:
# the six shared books, 3.09 MB, 449.8 s (benchmarks/bench_ray_ingest.py, docs/ray-ingest.json).
# Used for the dry run until the library has figures of its own.
DEFAULT_SECONDS_PER_MB = 146.0


def text_bytes(path: Path) -> int:
    """The size of a book's text: the file, or the .txt inside its zip."""
    if path.suffix.lower() == ".zip":
        import zipfile

        try:
            with zipfile.ZipFile(path) as zf:
                sizes = [i.file_size for i in zf.infolist() if i.filename.lower().endswith(".txt")]
                return max(sizes) if sizes else 0
        except (zipfile.BadZipFile, OSError):
            return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0
