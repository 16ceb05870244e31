"""The library commands: ``litrag ingest``, ``books``, ``remove`` and ``export``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from litrag.cli.common import add_backend_flag, settings_from_args


def _cmd_ingest(args: argparse.Namespace) -> int:
    from litrag.builders import build_library
    from litrag.ingestion.library import Library
    from litrag.query.edge_store import StoreLockedError
    from litrag.query.stores import store_description

    s = settings_from_args(args)
    Library.read_registry(s.home)  # a damaged registry stops here, in one line
    print(f"library: {s.home} ({store_description(s.qdrant_url)})", file=sys.stderr)
    try:
        library = build_library(s)
    except StoreLockedError as exc:
        print(f"error: {_locked_message(s.home, exc)}", file=sys.stderr)
        return 2
    try:
        report = library.ingest(
            args.paths, show_progress=not args.quiet, on_event=lambda m: print(m, file=sys.stderr)
        )
    except KeyboardInterrupt:
        lead = "" if args.quiet else "\n"  # past the progress bar
        print(
            f"{lead}interrupted: {_saved(library)}; rerun the same command to resume",
            file=sys.stderr,
        )
        return 130
    finally:
        if hasattr(library.store, "close"):
            library.store.close()  # flushed: every batch stored so far is kept
    for book_id, secs in report.seconds.items():
        print(f"{book_id}: " + ", ".join(f"{k} {v:.1f}s" for k, v in secs.items()))
    print(
        f"ingested {len(report.ingested)}, unchanged {len(report.unchanged)}, "
        f"failed {len(report.failed)}"
    )
    for _path, reason in report.failed:
        print(f"error: {reason}", file=sys.stderr)
    return 0 if report.ok else 1


def _saved(library: Any) -> str:
    """What an interrupted ingest had saved, in words."""
    done = library.completed
    parts = [f"saved {', '.join(done)} complete"] if done else []
    if library.in_progress is not None:
        book_id, stored, total = library.in_progress
        parts.append(f"{stored} of {total} chapters of {book_id} stored")
    return "; ".join(parts) or "nothing of this run was stored yet"


def _cmd_books(args: argparse.Namespace) -> int:
    from litrag.ingestion.integrity import check_files
    from litrag.ingestion.library import Library

    s = settings_from_args(args)
    rows = Library.read_registry(s.home)
    problems = check_files(s.home, s.collection, rows, embedded=not s.qdrant_url)
    if problems:  # the table alone would describe a library that is not there
        if rows:
            _books_table(args, s, rows)
        print(f"error: {problems[0].line()}", file=sys.stderr)
        return 2
    return _books_table(args, s, rows)


def _books_table(args: argparse.Namespace, s: Any, rows: list[Any]) -> int:
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no books in {s.home}; add some with: litrag ingest BOOK.txt")
        return 0
    head = ("id", "title", "author", "chapters", "nodes", "segmenter", "ingested at")
    table = [
        (
            r.book_id,
            r.title,
            r.author or "",
            str(r.chapters),
            str(r.nodes),
            r.segmenter,
            r.ingested_at if r.status == "complete" else f"({r.status})",
        )
        for r in rows
    ]
    widths = [min(max(len(x[i]) for x in [head, *table]), 40) for i in range(len(head))]
    for row in [head, *table]:
        print("  ".join(cell[:40].ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    from litrag.ingestion.library import Library
    from litrag.query.stores import make_vector_store

    s = settings_from_args(args)
    if not any(r.book_id == args.book for r in Library.read_registry(s.home)):
        print(f"error: no book {args.book!r} in {s.home} (see: litrag books)", file=sys.stderr)
        return 2
    from litrag.query.edge_store import StoreLockedError

    try:
        store = make_vector_store(s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key)
    except StoreLockedError as exc:
        print(f"error: {_locked_message(s.home, exc)}", file=sys.stderr)
        return 2
    Library(s.home, store).remove(args.book)
    print(f"removed {args.book}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    import warnings

    from qdrant_client import QdrantClient

    from litrag.query.edge_store import QdrantEdgeVectorStore, StoreLockedError
    from litrag.query.export import export_library
    from litrag.query.stores import qdrant_client_settings

    s = settings_from_args(args)
    folder = s.home / "index" / s.collection
    if not folder.exists():
        print(f"error: no embedded library at {folder}", file=sys.stderr)
        return 2
    try:
        source = QdrantEdgeVectorStore(path=s.home / "index", collection_name=s.collection)
    except StoreLockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = QdrantClient(**qdrant_client_settings(args.to, s.qdrant_api_key))
    target = args.collection or s.collection
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect")
        report = export_library(
            source,
            client,
            target,
            progress_file=s.home / "export-progress.json",
            shards=args.shards,
            replication_factor=args.replication_factor,
        )
    source.close()
    print(
        f"exported {report.exported} points to {args.to} collection {target!r}"
        f" (skipped {report.skipped} already there); source {report.source_count}, "
        f"target {report.target_count}: {'verified' if report.verified else 'COUNTS DIFFER'}"
    )
    return 0 if report.verified else 1


def _locked_message(home: Path, exc: Exception) -> str:
    """A writing command met a held store: name the chat UI when it is the holder."""
    from litrag.app.handoff import running_ui

    ui = running_ui(home)
    if ui is None:
        return str(exc)
    return (
        f"the library {home} is held by {ui.describe()}: add books with its upload panel, "
        "or stop the UI first"
    )


def add_parsers(sub: Any) -> None:
    """The ``ingest``, ``books``, ``remove`` and ``export`` commands and their flags."""
    ing = sub.add_parser("ingest", help="add Gutenberg books (files or folders) to the library")
    ing.add_argument("paths", nargs="+", type=Path)
    ing.add_argument("--segmenter", choices=["offline", "litseg-lite", "litseg"])
    ing.add_argument("--workers", type=int, help="LLM calls in flight (LLM segmenters)")
    add_backend_flag(ing)
    ing.add_argument("--max-mb", type=float, help="refuse books larger than this (default 16)")
    ing.add_argument("-q", "--quiet", action="store_true")
    ing.set_defaults(func=_cmd_ingest)

    bks = sub.add_parser("books", help="list the books in the library")
    bks.add_argument("--json", action="store_true")
    bks.set_defaults(func=_cmd_books)

    rem = sub.add_parser("remove", help="remove a book from the library")
    rem.add_argument("book", help="book id, as `litrag books` shows it")
    rem.set_defaults(func=_cmd_remove)

    exp = sub.add_parser("export", help="copy the embedded library to a Qdrant server/cluster")
    exp.add_argument("--to", required=True, help="Qdrant URL (API key from QDRANT_API_KEY)")
    exp.add_argument("--collection", help="target collection (default: the same name)")
    exp.add_argument("--shards", type=int, help="shard_number of a new target collection")
    exp.add_argument("--replication-factor", type=int, help="of a new target collection")
    exp.set_defaults(func=_cmd_export)
