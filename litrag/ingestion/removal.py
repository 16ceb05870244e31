"""The removal journal (``removing.json``): which book a ``litrag remove`` was removing.

Why: removing a book deletes from several places one after the other (the blocks' collection,
the children's collection, the assets, the docstore, then the registry row). A removal killed
midway left the registry listing a book whose points were partly gone, and ``litrag verify
--repair`` then took the book for damaged and ingested it again: the removal was undone. The
journal is written before the first delete and cleared after the registry row is gone, so a
check can tell an unfinished removal from damage, and the repair finishes it instead.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

JOURNAL_NAME = "removing.json"  # in the library's home


def journal_path(home: Path) -> Path:
    return Path(home) / JOURNAL_NAME


def start_removal(home: Path, book_id: str) -> None:
    """Record that ``book_id`` is being removed (atomically, and flushed to disk before any
    delete starts)."""
    path = journal_path(home)
    tmp = path.with_suffix(".json.tmp")
    text = json.dumps({"book_id": book_id, "started_at": time.strftime("%Y-%m-%d %H:%M:%S")})
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def finish_removal(home: Path) -> None:
    """The removal is complete: forget the journal."""
    journal_path(home).unlink(missing_ok=True)


def pending_removal(home: Path) -> str | None:
    """The book an unfinished removal was removing, or None. A journal cut short (killed while
    being written, before any delete) names no book: None, and it is left for the next removal
    to replace."""
    path = journal_path(home)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    book = data.get("book_id") if isinstance(data, dict) else None
    return book if isinstance(book, str) and book else None
