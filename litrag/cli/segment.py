"""``litrag segment``: cut a book into plot blocks and print them, or save them as JSONL."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from litrag import settings
from litrag.cli.common import (
    BUNDLED_BOOK,
    add_backend_flag,
    chapter_indices,
    check_at_least,
    check_out_file,
    llm_from_args,
    local_server_llm,
    probe_llm_server,
)
from litrag.settings import SettingsError


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


def _span(indices: list[Any]) -> str:
    """Chapter indices as ``0-12`` when they run without a gap, else listed."""
    nums = sorted(i for i in indices if isinstance(i, int))
    if not nums:
        return "none"
    if nums == list(range(nums[0], nums[-1] + 1)):
        return f"{nums[0]}-{nums[-1]}" if len(nums) > 1 else str(nums[0])
    return ", ".join(map(str, nums))


def _cmd_segment(args: argparse.Namespace) -> int:
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import BookLoadError, load_book
    from litrag.segment import LitSegNodeParser
    from litrag.segment.llm_calls import LLMUnavailableError

    check_at_least(args, max_unit_words=1, max_retries=0, workers=1, n_ctx=256)
    if not math.isfinite(args.timeout):
        raise SettingsError(f"--timeout must be a finite number of seconds, got {args.timeout}")
    if not args.timeout > 0:
        raise SettingsError(f"--timeout must be greater than 0, got {args.timeout}")
    wanted = chapter_indices(args.chapters)
    check_out_file(args.out)
    if args.book is None:
        args.book = BUNDLED_BOOK
        print(f"no BOOK given: segmenting the bundled {BUNDLED_BOOK.name}", file=sys.stderr)
    try:
        book = load_book(args.book)
    except BookLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    docs = split_chapters(book)
    if wanted is not None:
        have = [d.metadata.get("chapter_index") for d in docs]
        missing = sorted(wanted - set(have))
        if missing:  # an empty run exited 0 with zero blocks
            raise SettingsError(
                f"--chapters {args.chapters}: {args.book} has no chapter "
                f"{', '.join(map(str, missing))} (its chapters: {_span(have)})"
            )
        docs = [d for d in docs if d.metadata.get("chapter_index") in wanted]
    if args.llm_url:
        probe_llm_server(args.llm_url, "--llm-url")
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
    except LLMUnavailableError as exc:  # it went away mid-run: the reply cache keeps what came
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: {first} (rerun to resume from the reply cache)", file=sys.stderr)
        return 2
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
        choices=["smollm2", "qwen2.5-coder-1.5b", "qwen2.5-1.5b"],
        help="start the packaged llama.cpp model as the LLM (needs the local-llm extra)",
    )
    seg.add_argument("--n-ctx", type=int, default=8192, help="context of the local LLM")
    seg.add_argument("--chapters", help="only these chapter indices, e.g. 1,2,5")
    seg.add_argument("--max-unit-words", type=int, default=25_000)
    seg.add_argument("--max-retries", type=int, default=20)
    seg.add_argument("--workers", type=int, default=4, help="LLM calls in flight")
    seg.add_argument("--timeout", type=float, default=600.0, help="seconds per LLM call")
    seg.add_argument("--cache-dir", help="LLM reply cache (default: $LITRAG_HOME/cache)")
    seg.add_argument("--out", help="write blocks as JSONL here instead of printing them")
    seg.add_argument("-q", "--quiet", action="store_true")
    seg.set_defaults(func=_cmd_segment)
