"""The registry of a library (``books.json``): one ``BookRecord`` per book, by book id.

Read by the library (``litrag.ingestion.library``) and, without opening the store, by the
checks of ``litrag.ingestion.integrity``; a registry that does not parse, or whose rows are not
records, is a ``LibraryDamagedError`` naming the repair.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

from litrag.ingestion.damage import REPAIR, LibraryDamagedError, Problem, read_json

REGISTRY_NAME = "books.json"  # the registry's file, in the library's home


@dataclass
class BookRecord:
    """One row of ``litrag books``."""

    book_id: str
    title: str
    author: str | None
    chapters: int
    nodes: int
    segmenter: str
    source: str
    fingerprint: str
    status: str = "ingesting"  # "ingesting" until the last batch is stored, then "complete"
    ingested_at: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    catalog: dict[str, Any] = field(default_factory=dict)  # its pg_catalog.csv row, if given
    children: int = 0  # paragraph children stored to rank its blocks (0: ranked as blocks)
    embedder: str = ""  # the model that embedded it ("": before this was recorded: MiniLM)
    source_digest: str = ""  # sha256 of the source file as ingested ("": an older registry)


def read_registry(home: Path) -> list[BookRecord]:
    """The books of the library at ``home``, without opening its store; a damaged registry
    is a ``LibraryDamagedError`` naming the repair."""
    return [BookRecord(**r) for r in read_rows(Path(home) / REGISTRY_NAME).values()]


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The registry at ``path`` as JSON rows by book id (empty when there is none)."""
    if not path.exists():
        return {}
    rows = read_json(path, "registry-file", f"{REPAIR} (rebuilds it from the store)")
    needed = {
        name
        for name, f in BookRecord.__dataclass_fields__.items()
        if f.default is MISSING and f.default_factory is MISSING
    }
    wrong = None
    if not isinstance(rows, dict) or not all(
        isinstance(r, dict) and needed <= set(r) for r in rows.values()
    ):
        wrong = "not a registry"
    else:
        wrong = next(filter(None, (_wrong_type(book, r) for book, r in rows.items())), None)
    if wrong is not None:
        raise LibraryDamagedError(
            [
                Problem(
                    f"{path} is damaged: {wrong}",
                    f"{REPAIR} (rebuilds it from the store)",
                    "registry-file",
                )
            ]
        )
    fields = set(BookRecord.__dataclass_fields__)  # a newer litrag's fields are left aside
    return {book: {k: v for k, v in r.items() if k in fields} for book, r in rows.items()}


# The registry's fields a later step computes with, and the JSON types each must have: a row
# with ``"chapters": "seven"`` loaded, and ``ask --upto-chapter 1`` then failed with a TypeError.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "book_id": (str,),
    "title": (str,),
    "author": (str, type(None)),
    "chapters": (int,),
    "nodes": (int,),
    "children": (int,),
    "segmenter": (str,),
    "source": (str,),
    "fingerprint": (str,),
    "status": (str,),
    "seconds": (dict,),
    "catalog": (dict,),
}


def _wrong_type(book: str, row: dict[str, Any]) -> str | None:
    """What is wrong with one row's values (a count that is not a whole number), or None."""
    for name, types in _FIELD_TYPES.items():
        if name not in row:
            continue
        value = row[name]
        counted = types == (int,)
        if isinstance(value, bool) or not isinstance(value, types) or (counted and value < 0):
            want = "a count" if counted else "text" if str in types else "an object"
            return f"{book}'s {name} is {json.dumps(value)[:40]}, not {want}"
    return None


def file_digest(file: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes, read in pieces (a book may be hundreds of megabytes)."""
    h = hashlib.sha256()
    with open(file, "rb") as f:
        while piece := f.read(1 << 20):
            h.update(piece)
    return h.hexdigest()


def text_digest(*parts: str, piece: int = 1 << 20) -> str:
    """The sha256 of ``parts`` joined, as UTF-8: ``sha256("".join(parts).encode())``, encoded a
    piece at a time, without a joined copy and an encoded copy of a book of hundreds of MB."""
    h = hashlib.sha256()
    for part in parts:
        for start in range(0, len(part), piece):
            h.update(part[start : start + piece].encode("utf-8"))
    return h.hexdigest()


def refresh_record(
    rec: BookRecord,
    file: str | os.PathLike[str],
    catalog_row: dict[str, Any] | None,
    author: str | None,
) -> bool:
    """An unchanged book's row brought up to date without ingesting it: its catalog row (title,
    ``author``) and where its file is now (the same text, perhaps moved: ``verify`` checks the
    source it names). True when the row changed."""
    before = (rec.catalog, rec.title, rec.author, rec.source, rec.source_digest)
    if catalog_row and rec.catalog != catalog_row:
        rec.catalog = catalog_row
        rec.title = catalog_row.get("title") or rec.title
        rec.author = author or rec.author
    rec.source, rec.source_digest = source_path(file), file_digest(file)
    return (rec.catalog, rec.title, rec.author, rec.source, rec.source_digest) != before


def source_path(file: str | os.PathLike[str]) -> str:
    """A book's source as the registry keeps it: absolute and resolved, so that a repair run
    from any working directory finds the file the book was ingested from."""
    return str(Path(file).expanduser().resolve())


def migrate_sources(path: Path, bases: tuple[Path, ...] = ()) -> int:
    """Rewrite the relative sources of an older registry at ``path`` as absolute paths, where
    one of ``bases`` (default: the working directory) holds the file; a source found nowhere is
    left as it was (the repair says it is gone). Returns the rows rewritten."""
    try:
        rows = read_rows(path)
    except LibraryDamagedError:  # reported, with its repair, where the registry is read
        return 0
    changed = 0
    for row in rows.values():
        src = row.get("source") or ""
        if not src or Path(src).is_absolute():
            continue
        for base in bases or (Path.cwd(),):
            candidate = Path(base) / src
            if candidate.is_file():
                row["source"] = source_path(candidate)
                changed += 1
                break
    if changed:
        try:
            write_rows(path, rows)
        except OSError:  # a read-only library: resolved again at the next open
            return 0
    return changed


def ingest_running(home: Path, collection: str) -> str | None:
    """The ``litrag ingest`` holding the library's embedded store right now (a live process on
    this machine, not this one), else None. Read from the store's owner file, without opening
    the store: a book whose registry row still says "ingesting" is then being ingested, not
    left half-done."""
    path = Path(home) / "index" / collection / "owner.json"
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
        pid = int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid() or owner.get("host") != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:  # killed: its owner file was left behind
        return None
    except PermissionError:  # alive, another user's
        pass
    command = str(owner.get("command") or "")
    if " ingest" not in f" {command}":  # a chat UI or a verify holds it: no claim made
        return None
    return f"pid {pid} `{command}`"


def write_rows(path: Path, rows: dict[str, dict[str, Any]]) -> None:
    """Replace the registry at ``path`` with ``rows`` (atomically: a kill leaves old or new)."""
    _atomic_write(path, json.dumps(rows, indent=1, ensure_ascii=False))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
