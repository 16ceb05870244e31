"""``litrag characters BOOK``: the character index of a book, cut to a spoiler limit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from litrag.cli.common import settings_from_args


def _fail(line: str) -> int:
    print(f"error: {line}", file=sys.stderr)
    return 2


def _cmd_characters(args: argparse.Namespace) -> int:
    from litrag.ingestion.library import Library
    from litrag.narrative.index import load_index

    s = settings_from_args(args)
    records = {r.book_id: r for r in Library.read_registry(s.home)}
    record = records.get(args.book)
    if record is None:
        have = ", ".join(sorted(records)) or "none"
        return _fail(f"no book {args.book!r} in {s.home} (loaded books: {have}; see: litrag books)")
    n = args.upto_chapter
    if n is not None and not 1 <= n <= record.chapters:  # 0 listed nobody: not a chapter
        return _fail(f"--upto-chapter must be a chapter of the book (1-{record.chapters}), got {n}")
    if args.top < 1:
        return _fail(f"--top must be at least 1, got {args.top}")
    index = load_index(s.home, args.book)
    if index is None:
        return _fail(_no_index(s, record))
    if args.profile:
        return _profile(s, args, index, n)
    people = index.upto(n)[: args.top]
    rows = [
        {
            "id": c.id,
            "name": c.name,
            "aliases": list(c.aliases),
            "mentions": c.mentions(),
            "per_chapter": c.per_chapter,
            "first_chapter": c.first_chapter,
            "first_block": c.first_block,
            "with": [{"id": o, "blocks": k} for o, k in index.companions(c.id, n)[:5]],
        }
        for c in people
    ]
    if args.json:
        out: dict[str, Any] = {
            "book_id": args.book,
            "upto_chapter": n,
            "model": index.model,
            "characters": rows,
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    limit = f", up to chapter {n}" if n is not None else ""
    print(f"{record.title} ({args.book}): {len(index.upto(n))} characters{limit}")
    head = ("id", "mentions", "first ch.", "aliases", "most with")
    table = [
        (
            r["id"],
            str(r["mentions"]),
            str(r["first_chapter"]),
            ", ".join(r["aliases"]),
            ", ".join(w["id"] for w in r["with"][:3]),
        )
        for r in rows
    ]
    widths = [min(max(len(x[i]) for x in [head, *table]), 48) for i in range(len(head))]
    for row in [head, *table]:
        print("  ".join(cell[:48].ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _no_index(s: Any, record: Any) -> str:
    """Why a book has no character index: its ingest is running now or did not finish (the
    index is written at its end), or the extra that builds it is missing."""
    from litrag.ingestion.registry import ingest_running
    from litrag.narrative import character_index_available

    source = record.source or "BOOK.txt"
    if record.status != "complete":
        holder = None if s.qdrant_url else ingest_running(s.home, s.collection)
        if holder is not None:
            return (
                f"{record.book_id} is being ingested now (by {holder}): its characters are "
                "listed when it finishes"
            )
        return f"{record.book_id}: its ingest did not finish: rerun it with litrag ingest {source}"
    if character_index_available():
        return f"{record.book_id} has no character index: build it with litrag ingest {source}"
    return (
        f"{record.book_id} has no character index: install it with pip install "
        f'"litrag[narrative]", then run litrag ingest {source}'
    )


def _profile(s: Any, args: argparse.Namespace, index: Any, n: int | None) -> int:
    """A character's profile as of the spoiler limit, from the book's assets (``litrag assets``)."""
    from litrag.narrative.asset_store import AssetStore, assets_collection
    from litrag.narrative.canon import Canonicalizer
    from litrag.narrative.characters import CharacterIndex

    none = f"{args.book} has no narrative assets: build them with litrag assets {args.book}"
    if not s.qdrant_url and not (s.home / "index" / assets_collection(s.collection)).exists():
        return _fail(none)
    # The name as a reader at the limit knows it: an alias first used later resolves to
    # nobody, instead of naming the character it turns out to be.
    met = CharacterIndex(book_id=index.book_id, model=index.model, characters=index.upto(n))
    cid = Canonicalizer(met).resolve(args.profile).id
    with AssetStore.open(s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key) as st:
        if not st.has_book(args.book):  # the collection holds other books' assets only
            return _fail(none)
        node = st.profile(args.book, cid, n)
    if node is None:
        limit = f" up to chapter {n}" if n is not None else ""
        return _fail(f"no profile of {args.profile!r} ({cid}){limit} in the assets of {args.book}")
    if args.json:
        print(json.dumps({"text": node.get_content(), **node.metadata}, indent=2))
    else:
        print(node.get_content())
        print(
            f"(sources: {len(node.metadata['source_blocks'])} blocks of chapters "
            f"{', '.join(map(str, node.metadata['source_chapters']))})"
        )
    return 0


def add_parsers(sub: Any) -> None:
    """The ``characters`` command."""
    p = sub.add_parser("characters", help="the characters of a book (offline character index)")
    p.add_argument("book", help="book id, as `litrag books` shows it")
    p.add_argument("--upto-chapter", type=int, help="only what a reader of chapters 1-N has met")
    p.add_argument("--top", type=int, default=20, help="how many characters (default 20)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--profile", help="this character's profile as of --upto-chapter (needs litrag assets)"
    )
    p.set_defaults(func=_cmd_characters)
