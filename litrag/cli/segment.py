"""``litrag segment``: cut a book into plot blocks and print them, or save them as JSONL."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from litrag import settings
from litrag.cli.common import (
    BUNDLED_BOOK,
    add_backend_flag,
    llm_from_args,
    local_server_llm,
    seconds,
)


def _row(node: Any) -> dict[str, Any]:
    """One block as a JSON-ready record."""
    m = node.metadata
    return {
        "book_id": m.get("book_id"),
        "chapter_index": m.get("chapter_index"),
        "chapter_title": m.get("chapter_title"),
        "subtitle": m["subtitle"],
        "sentence_from": m["sentence_from"],
        "sentence_to": m["sentence_to"],
        "context_idx": m["context_idx"],
        "start_char_idx": node.start_char_idx,
        "end_char_idx": node.end_char_idx,
        "words": len(node.get_content().split()),
        "outcome": m["segmentation_outcome"],
        "attempts": m["segmentation_attempts"],
        "text": node.get_content(),
    }


def _cmd_segment(args: argparse.Namespace) -> int:
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import BookLoadError, load_book
    from litrag.segment import LitSegNodeParser

    if args.book is None:
        args.book = BUNDLED_BOOK
        print(f"no BOOK given: segmenting the bundled {BUNDLED_BOOK.name}", file=sys.stderr)
    try:
        book = load_book(args.book)
    except BookLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    docs = split_chapters(book)
    if args.chapters:
        wanted = {int(x) for x in args.chapters.split(",")}
        docs = [d for d in docs if d.metadata.get("chapter_index") in wanted]
    server = None
    llm = llm_from_args(args)
    if llm is None and args.local_llm:
        from litrag.builders import local_server
        from litrag.settings import Settings

        server = local_server(Settings(), args.local_llm, n_ctx=args.n_ctx, start=False)
        server.__enter__()
        llm = local_server_llm(args, server, args.n_ctx)
    segmenter = args.segmenter or ("litseg-lite" if llm is not None else "offline")
    try:
        parser = LitSegNodeParser.from_defaults(
            llm=llm,
            segmenter=segmenter,
            max_unit_words=args.max_unit_words,
            max_retries=args.max_retries,
            num_workers=args.workers,
            cache_dir=args.cache_dir or (settings.home() / "cache" if llm is not None else None),
            request_timeout=args.timeout,
        )
        t0 = time.perf_counter()
        nodes = parser.get_nodes_from_documents(docs, show_progress=not args.quiet)
        elapsed = time.perf_counter() - t0
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    rows = [_row(node) for node in nodes]
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    elif not args.quiet:
        for row in rows:
            print(
                f"{row['chapter_index']!s:>4} [{row['sentence_from']}-{row['sentence_to']}]"
                f" {row['words']:>4}w  {row['subtitle']}"
            )
    summary = parser.summary.as_dict()
    summary.update(
        book=book.title,
        segmenter=segmenter,
        seconds=round(elapsed, 2),
        words_per_second=round(sum(len(d.text.split()) for d in docs) / max(elapsed, 1e-9)),
    )
    print(json.dumps(summary, indent=None if args.quiet else 2), file=sys.stderr)
    return 0


def add_parsers(sub: Any) -> None:
    """The ``segment`` command and its flags."""
    seg = sub.add_parser("segment", help="cut a book into plot blocks and print or save them")
    seg.add_argument(
        "book",
        type=Path,
        nargs="?",
        help="a Project Gutenberg (or plain) .txt file (default: the bundled novel)",
    )
    seg.add_argument("--segmenter", choices=["offline", "litseg-lite", "litseg"])
    seg.add_argument("--llm-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    seg.add_argument("--model", help="model name at --llm-url")
    add_backend_flag(seg)
    seg.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-1.5b"],
        help="start the packaged llama.cpp model as the LLM (needs the local-llm extra)",
    )
    seg.add_argument("--n-ctx", type=int, default=8192, help="context of the local LLM")
    seg.add_argument("--chapters", help="only these chapter indices, e.g. 1,2,5")
    seg.add_argument("--max-unit-words", type=int, default=25_000)
    seg.add_argument("--max-retries", type=int, default=20)
    seg.add_argument("--workers", type=int, default=4, help="LLM calls in flight")
    seg.add_argument("--timeout", type=seconds, default=600.0, help="seconds per LLM call")
    seg.add_argument("--cache-dir", help="LLM reply cache (default: $LITRAG_HOME/cache)")
    seg.add_argument("--out", help="write blocks as JSONL here instead of printing them")
    seg.add_argument("-q", "--quiet", action="store_true")
    seg.set_defaults(func=_cmd_segment)
