"""The store's line of ``litrag doctor``: the registry is readable, and the store is reachable
(the Qdrant server) or its files agree with the registry (embedded Qdrant Edge; no store is
opened, so this works while the chat UI holds it)."""

from __future__ import annotations

import json
import urllib.error

from litrag.ingestion.damage import LibraryDamagedError
from litrag.ingestion.integrity import check_files
from litrag.ingestion.registry import read_registry
from litrag.models.checks import Check, _get
from litrag.settings import Settings


def check_store(s: Settings, held_by: str | None = None) -> Check:
    """The registry and the store of the library at ``s.home``. ``held_by``: who holds the
    embedded store now (the running chat UI, described by the caller), shown on the line."""
    try:
        books = read_registry(s.home)
    except (OSError, ValueError, TypeError, LibraryDamagedError) as exc:
        return Check("store", "fail", f"the registry {s.home / 'books.json'} is unreadable: {exc}")
    count = f"{len(books)} book{'s' if len(books) != 1 else ''}"
    if s.qdrant_url:
        try:
            headers = {"api-key": s.qdrant_api_key} if s.qdrant_api_key else {}
            version = json.loads(_get(s.qdrant_url.rstrip("/") + "/", headers=headers))
            where = f"Qdrant server {s.qdrant_url} (version {version.get('version', '?')})"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return Check(
                "store", "fail", f"the Qdrant server {s.qdrant_url} is unreachable: {reason}"
            )
        return Check("store", "ok", f"{where} · registry at {s.home}: {count}")
    problems = check_files(s.home, s.collection, books, embedded=True)
    if problems:  # the files alone say the library is damaged (no store opened)
        return Check("store", "fail", problems[0].line())
    held = f" · held by {held_by}" if held_by else ""
    index = s.home / "index"
    kind = "embedded Qdrant Edge" + ("" if index.is_dir() else " (not created yet)")
    return Check("store", "ok", f"{kind} at {index} · {count}{held}", {"books": len(books)})
