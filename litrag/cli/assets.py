"""``litrag assets BOOK``: build a book's narrative assets with the configured LLM; show them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from litrag.cli.common import add_backend_flag, llm_from_args, local_server_llm, settings_from_args


def _fail(line: str) -> int:
    print(f"error: {line}", file=sys.stderr)
    return 2


def _chapters(text: str | None) -> set[int] | None:
    if not text:
        return None
    out: set[int] = set()
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def _cmd_assets(args: argparse.Namespace) -> int:
    from litrag.builders import build_embed_model
    from litrag.ingestion.library import Library
    from litrag.narrative.asset_store import AssetStore
    from litrag.narrative.assets import AssetExtractor
    from litrag.narrative.build import build_assets
    from litrag.query.stores import make_vector_store

    s = settings_from_args(args)
    record = next((r for r in Library.read_registry(s.home) if r.book_id == args.book), None)
    if record is None:
        return _fail(f"no book {args.book!r} in {s.home} (see: litrag books)")
    server = None
    llm = llm_from_args(args)
    mode = "json_schema" if llm is not None else "llama_cpp"
    if llm is None:
        from litrag.local_llm import LlamaServer, local_model_path

        server = LlamaServer(local_model_path(args.local_llm), n_ctx=args.n_ctx).start()
        llm = local_server_llm(args, server, args.n_ctx)
    blocks = make_vector_store(s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key)
    embed = build_embed_model(s)
    assets = AssetStore.open(
        s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key, embed_model=embed
    )
    extractor = AssetExtractor(
        llm,
        cache_dir=s.home / "cache",
        num_workers=args.workers,
        max_retries=args.max_retries,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        schema_mode=mode,
        llm_identity=f"local:{args.local_llm}" if server is not None else None,
    )
    try:
        report = build_assets(
            s.home,
            args.book,
            record.title,
            blocks,
            assets,
            extractor,
            chapters=_chapters(args.chapters),
            upto_chapter=args.upto_chapter,
            max_blocks=args.max_blocks,
            show_progress=not args.quiet,
        )
    finally:
        extractor.close()
        assets.close()
        if hasattr(blocks, "close"):
            blocks.close()
        if server is not None:
            server.stop()
    print(json.dumps(report.as_dict(), indent=2))
    return 0


def add_parsers(sub: Any) -> None:
    """The ``assets`` command."""
    p = sub.add_parser("assets", help="build a book's narrative assets with an LLM")
    p.add_argument("book", help="book id, as `litrag books` shows it")
    p.add_argument("--chapters", help="only these chapters, e.g. 1-3,5")
    p.add_argument("--upto-chapter", type=int, help="only chapters 1..N")
    p.add_argument("--max-blocks", type=int, help="first N blocks of each chapter")
    p.add_argument("--llm-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    p.add_argument("--model", help="model name at --llm-url")
    add_backend_flag(p)
    p.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-1.5b"],
        default="qwen2.5-1.5b",
        help="the packaged llama.cpp model when no --llm-url is given (default qwen2.5-1.5b)",
    )
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--workers", type=int, default=2, help="LLM calls in flight")
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=700)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=_cmd_assets)
