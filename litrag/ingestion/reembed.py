"""Embed a whole library again with another model (``litrag reembed --preset NAME``).

Another model means another vector space and often another dimension (MiniLM 384, nomic 768),
and nomic keeps no sentence windows: the collections are made anew, not updated in place. The
stored points (text, metadata, ids; no vectors) are first written to a journal under the
library's home, then the collections are dropped and filled again from it; a run killed midway
resumes from the journal, so nothing is lost even though the old collections are gone.
Segmentation is not redone: the blocks and children stay exactly as they were.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode
from llama_index.core.storage.docstore.utils import doc_to_json, json_to_doc

from litrag.ingestion.book_points import book_filter
from litrag.ingestion.registry import BookRecord

JOURNAL = "reembed-journal.jsonl"
BATCH = 64  # points embedded and stored at a time (progress, memory)


def journal_path(home: Path) -> Path:
    return Path(home) / JOURNAL


def stored_points(store: Any, book_ids: Iterable[str]) -> list[BaseNode]:
    """Every point of ``book_ids`` in ``store``, without its vectors."""
    out: list[BaseNode] = []
    for book_id in book_ids:
        for node in store.get_nodes(filters=book_filter(book_id)):
            node.embedding = None
            out.append(node)
    return out


def write_journal(home: Path, points: dict[str, Sequence[BaseNode]], command: str = "") -> Path:
    """``points`` by collection role (``blocks``, ``children``), one JSON line a point, after a
    first line naming the ``command`` that resumes it (``litrag reembed --preset quality``);
    written to a temporary name and renamed, so a journal is complete or absent."""
    path = journal_path(home)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"command": command}) + "\n")
        for role, nodes in points.items():
            for node in nodes:
                fh.write(json.dumps({"role": role, "node": doc_to_json(node)}) + "\n")
    os.replace(tmp, path)
    return path


def read_journal(home: Path) -> dict[str, list[BaseNode]] | None:
    """The journal's points by role, or None when no reembed is under way."""
    path = journal_path(home)
    if not path.is_file():
        return None
    out: dict[str, list[BaseNode]] = {"blocks": [], "children": []}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if "node" not in row:  # the first line: the command
                continue
            out.setdefault(row["role"], []).append(json_to_doc(row["node"]))
    return out


def journal_command(home: Path) -> str | None:
    """The command that resumes the reembed under way (its journal is there), or None. While it
    is there the collections are dropped or partly filled: nothing may answer from them."""
    path = journal_path(home)
    try:
        with path.open(encoding="utf-8") as fh:
            first = json.loads(fh.readline() or "{}")
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        first = {}
    command = first.get("command") if isinstance(first, dict) else None
    return str(command or "litrag reembed --preset NAME")


def drop_collection(store: Any) -> None:
    """Delete ``store``'s collection, whatever its dimension or vectors: an embedded shard's
    folder, or the server's collection."""
    folder = getattr(store, "folder", None)
    if folder is not None:  # Qdrant Edge
        with contextlib.suppress(AttributeError):
            store.close()
        shutil.rmtree(folder, ignore_errors=True)
        return
    client = getattr(store, "client", None)
    name = getattr(store, "collection_name", None)
    if client is not None and name and client.collection_exists(name):
        client.delete_collection(name)


def add_points(
    store: Any,
    embed: Callable[[list[BaseNode]], list[BaseNode]],
    nodes: Sequence[BaseNode],
    say: Callable[[str], None] = lambda _m: None,
    what: str = "points",
) -> int:
    """Embed ``nodes`` with ``embed`` (a LlamaIndex embedding is callable on nodes) and add
    them, ``BATCH`` at a time; ids are kept, so a rerun overwrites rather than duplicates."""
    for start in range(0, len(nodes), BATCH):
        store.add(embed(list(nodes[start : start + BATCH])))
        say(f"  {what}: {min(start + BATCH, len(nodes))}/{len(nodes)}")
    return len(nodes)


def updated_records(
    records: Sequence[BookRecord], key: str, fingerprint: Callable[[BookRecord], str | None]
) -> dict[str, dict[str, Any]]:
    """Registry rows after a reembed: each book's ``embedder`` is ``key``, and its fingerprint
    (which covers the embedder) is taken anew where ``fingerprint`` can read its source, so an
    ingest of the same file afterwards finds it unchanged."""
    from dataclasses import asdict

    rows = {}
    for record in records:
        record.embedder = key
        record.fingerprint = fingerprint(record) or record.fingerprint
        rows[record.book_id] = asdict(record)
    return rows


def finish(home: Path) -> None:
    """The reembed is complete: its journal goes."""
    with contextlib.suppress(FileNotFoundError):
        journal_path(home).unlink()
