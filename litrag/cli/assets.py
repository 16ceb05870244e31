"""``litrag assets BOOK``: build a book's narrative assets with the configured LLM; show them.

``AssetBuilder`` is the machinery ``litrag ingest --assets`` shares: one LLM (the packaged
model's server starts on the first call the reply cache cannot answer), the block store, the
embedder and the asset store, for as many books as asked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from types import TracebackType
from typing import Any

from litrag.cli.common import (
    add_backend_flag,
    backend_from_args,
    check_at_least,
    llm_from_args,
    seconds,
    settings_from_args,
)
from litrag.settings import LOCAL_MODEL_ALIASES, SettingsError

COST = (
    "one LLM call per plot block (and one per retry), cached; measured 126 s a block with the "
    "packaged 1.5B model on 2 CPU cores (a 500-block novel: about 17 h), estimated 5-10 blocks "
    "a second from vLLM on one GPU"
)


def _fail(line: str) -> int:
    print(f"error: {line}", file=sys.stderr)
    return 2


def parse_chapters(text: str | None, last: int, flag: str = "--chapters") -> set[int] | None:
    """``1-3,5`` as chapter numbers, each a chapter of the book (1..``last``); a word, a
    backward range or a chapter past the end is a ``SettingsError`` naming the flag: they gave
    an empty run, or a traceback, instead of an error."""
    if text is None:
        return None
    where = f"1-{last}" if last > 1 else "1"
    out: set[int] = set()
    for part in text.split(","):
        a, dash, b = (x.strip() for x in part.partition("-"))
        if not a.isdigit() or (dash and not b.isdigit()):
            raise SettingsError(
                f"{flag} wants chapter numbers like 1-3,5, got {text!r} ({part.strip()!r})"
            )
        lo, hi = int(a), int(b or a)
        if lo > hi:
            raise SettingsError(f"{flag}: the range {lo}-{hi} runs backwards (write {hi}-{lo})")
        if lo < 1 or hi > last:
            bad = lo if lo < 1 else hi
            raise SettingsError(f"{flag} must name chapters of the book ({where}), got {bad}")
        out.update(range(lo, hi + 1))
    return out


def check_chapter_flags(args: argparse.Namespace, last: int) -> set[int] | None:
    """The chapters asked for, with ``--upto-chapter`` a chapter of the book (1..``last``) and
    ``--max-blocks`` at least 1: checked before any store or LLM is opened, so a refused run
    leaves nothing behind (an empty run wrote an extractions file)."""
    chapters = parse_chapters(args.chapters, last)
    n = args.upto_chapter
    if n is not None and not 1 <= n <= last:
        where = f"1-{last}" if last > 1 else "1"
        raise SettingsError(f"--upto-chapter must be a chapter of the book ({where}), got {n}")
    if chapters is not None and n is not None and not any(c <= n for c in chapters):
        raise SettingsError(f"--chapters {args.chapters} lies past --upto-chapter {n}")
    check_at_least(args, max_blocks=1, workers=1, max_retries=0, max_tokens=1, n_ctx=256)
    return chapters


class AssetBuilder:
    """What building assets needs, opened once for any number of books; ``close()`` (or the
    ``with`` block's end, also on Ctrl-C) stops the local server if a call started it."""

    def __init__(
        self,
        args: argparse.Namespace,
        s: Any,
        *,
        block_store: Any = None,
        embed_model: Any = None,
    ) -> None:
        """``block_store`` / ``embed_model``: the caller's, when it has them open already (the
        embedded store admits one opener per process)."""
        from litrag.builders import build_embed_model, build_store
        from litrag.narrative.asset_store import AssetStore

        if getattr(args, "timeout", None) is None:  # ingest: LITRAG_LLM_TIMEOUT, else 600 s
            args = argparse.Namespace(**{**vars(args), "timeout": s.llm_timeout or 600.0})
        self.args, self.s = args, s
        self.lazy: Any = None
        self.llm = llm_from_args(args)
        self.mode = "json_schema" if self.llm is not None else "llama_cpp"
        self.identity: str | None = None
        self._own_blocks = block_store is None
        self.blocks = block_store
        self.assets: Any = None
        try:
            if self.blocks is None:
                self.blocks = build_store(s)
            embed = embed_model if embed_model is not None else build_embed_model(s)
            self.assets = AssetStore.open(
                s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key, embed_model=embed
            )
        except BaseException:
            self.close()
            raise
        if self.llm is None:
            self.llm = self.lazy = _lazy_local_llm(args)
            name = LOCAL_MODEL_ALIASES.get(args.local_llm, args.local_llm)
            self.identity = f"local:{name}"

    def extractor(self) -> Any:
        from litrag.narrative.assets import AssetExtractor

        a = self.args
        return AssetExtractor(
            self.llm,
            cache_dir=self.s.home / "cache",
            num_workers=a.workers or 2,
            max_retries=a.max_retries,
            max_tokens=a.max_tokens,
            timeout=a.timeout,
            schema_mode=self.mode,
            llm_identity=self.identity,
        )

    def build(
        self,
        book_id: str,
        title: str,
        *,
        chapters: set[int] | None = None,
        upto_chapter: int | None = None,
        max_blocks: int | None = None,
    ) -> Any:
        """Extract (what the reply cache holds is replayed) and store one book's assets."""
        from litrag.narrative.build import build_assets

        extractor = self.extractor()
        try:
            return build_assets(
                self.s.home,
                book_id,
                title,
                self.blocks,
                self.assets,
                extractor,
                chapters=chapters,
                upto_chapter=upto_chapter,
                max_blocks=max_blocks,
                show_progress=not self.args.quiet,
            )
        finally:
            extractor.close()

    def complete(self, book_id: str) -> bool:
        """Every stored block of the book has assets from this LLM, none failed."""
        from litrag.narrative.build import assets_complete

        extractor = self.extractor()
        try:
            identity = extractor.identity
        finally:
            extractor.close()
        return assets_complete(self.s.home, book_id, self.blocks, identity)

    def llm_note(self) -> str | None:
        """Whether the packaged model's server had to start (None: a server URL answered)."""
        if self.lazy is None:
            return None
        server = self.lazy.server
        if server is None:
            return (
                f"local LLM {self.args.local_llm}: not started (every call came from the "
                "reply cache)"
            )
        secs = server.startup_seconds
        return f"local LLM {self.args.local_llm}: started" + (
            f" in {secs:.1f} s" if secs is not None else ""
        )

    def close(self) -> None:
        try:
            if self.assets is not None:
                self.assets.close()
            if self._own_blocks and self.blocks is not None and hasattr(self.blocks, "close"):
                self.blocks.close()
        finally:
            if self.lazy is not None:
                self.lazy.close()

    def __enter__(self) -> AssetBuilder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _lazy_local_llm(args: argparse.Namespace) -> Any:
    """The packaged model behind llama.cpp's server, started on the first uncached call."""
    from litrag.builders import build_lazy_local_llm
    from litrag.settings import Settings

    def say() -> None:
        if not args.quiet:
            print(f"starting the local LLM ({args.local_llm}) ...", file=sys.stderr)

    s = Settings()
    return build_lazy_local_llm(
        s,
        args.local_llm,
        n_ctx=args.n_ctx,
        timeout=args.timeout,
        backend=backend_from_args(args, s),
        on_start=say,
    )


def assets_after_ingest(
    args: argparse.Namespace,
    s: Any,
    book_ids: list[str],
    *,
    block_store: Any = None,
    embed_model: Any = None,
) -> list[str]:
    """``litrag ingest --assets``: the assets of the books that ingested fine, one by one. A
    book whose build fails is reported and the next one goes on (an LLM that cannot be reached
    or started stops the rest: it would fail each the same way); nothing of the ingest is
    undone. Books whose assets are complete are skipped. Returns the books left with no
    assets, or with failed blocks."""
    from litrag.ingestion.library import Library
    from litrag.models.llama_server import LocalModelError
    from litrag.segment.llm_calls import LLMUnavailableError

    if not book_ids:
        return []
    titles = {r.book_id: r.title for r in Library.read_registry(s.home)}
    bad: list[str] = []
    try:
        builder = AssetBuilder(args, s, block_store=block_store, embed_model=embed_model)
    except Exception as exc:
        _not_built(book_ids, exc)
        return list(book_ids)
    with builder:
        for i, book_id in enumerate(book_ids):
            if builder.complete(book_id):
                print(f"assets {book_id}: complete, skipped (litrag assets {book_id} redoes them)")
                continue
            if not args.quiet:
                print(f"assets {book_id}: building ...", file=sys.stderr)
            t0 = time.perf_counter()
            try:
                report = builder.build(book_id, titles.get(book_id, book_id))
            except (LLMUnavailableError, LocalModelError, ImportError) as exc:
                _not_built(book_ids[i:], exc)
                bad += book_ids[i:]
                break
            except Exception as exc:  # this book's: the next one may build
                _not_built([book_id], exc)
                bad.append(book_id)
                continue
            d = report.as_dict()
            print(
                f"assets {book_id}: {d['blocks']} blocks ({d['valid']} valid, {d['repaired']} "
                f"repaired, {d['failed']} failed), {d['llm_calls']} calls ({d['cached_calls']} "
                f"cached), {sum(d['assets'].values())} assets, {time.perf_counter() - t0:.1f}s "
                f"(extraction {d['seconds']:.1f}s)"
            )
            if d["failed"]:
                bad.append(book_id)
        note = builder.llm_note()
    if note:
        print(note, file=sys.stderr)
    return bad


def _not_built(book_ids: list[str], exc: BaseException) -> None:
    first = str(exc).splitlines()[0] if str(exc) else ""
    print(
        f"error: assets of {', '.join(book_ids)} not built: {type(exc).__name__}: {first} "
        "(the books themselves are ingested; rerun with --assets to resume)",
        file=sys.stderr,
    )


def _cmd_assets(args: argparse.Namespace) -> int:
    from litrag.ingestion.library import Library
    from litrag.narrative.build import NoBlocksError

    s = settings_from_args(args)
    record = next((r for r in Library.read_registry(s.home) if r.book_id == args.book), None)
    if record is None:
        return _fail(f"no book {args.book!r} in {s.home} (see: litrag books)")
    chapters = check_chapter_flags(args, record.chapters)
    with AssetBuilder(args, s) as builder:
        try:
            report = builder.build(
                args.book,
                record.title,
                chapters=chapters,
                upto_chapter=args.upto_chapter,
                max_blocks=args.max_blocks,
            )
        except NoBlocksError as exc:
            return _fail(str(exc))
        note = builder.llm_note()
    if note:
        print(note, file=sys.stderr)
    print(json.dumps(report.as_dict(), indent=2))
    return 0


def add_llm_flags(p: Any, *, workers: bool = True, timeout: float | None = 600.0) -> None:
    """The flags that choose and pace the assets' LLM (``assets`` and ``ingest --assets``);
    ``workers`` False: the command has its own ``--workers``; ``timeout`` None: no default
    (``ingest``, where the flag also paces the LLM segmenters)."""
    p.add_argument("--llm-url", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    p.add_argument("--model", help="model name at --llm-url")
    p.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-coder-1.5b", "qwen2.5-1.5b"],
        default="qwen2.5-coder-1.5b",
        help="the packaged llama.cpp model when no --llm-url is given (default "
        "qwen2.5-coder-1.5b); its server starts only when a call is not in the reply cache",
    )
    p.add_argument("--n-ctx", type=int, default=4096)
    if workers:
        p.add_argument("--workers", type=int, default=2, help="LLM calls in flight")
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=700)
    p.add_argument(
        "--timeout",
        type=seconds,
        default=timeout,
        help=f"seconds per LLM call (default {timeout:g})"
        if timeout
        else "seconds per LLM call (default LITRAG_LLM_TIMEOUT, else 600 for the assets)",
    )


def add_parsers(sub: Any) -> None:
    """The ``assets`` command."""
    p = sub.add_parser(
        "assets",
        help="build a book's narrative assets with an LLM",
        description=f"Build a book's narrative assets: {COST}. A rerun resumes from the cache.",
    )
    p.add_argument("book", help="book id, as `litrag books` shows it")
    p.add_argument("--chapters", help="only these chapters, e.g. 1-3,5")
    p.add_argument("--upto-chapter", type=int, help="only chapters 1..N")
    p.add_argument("--max-blocks", type=int, help="first N blocks of each chapter")
    add_backend_flag(p)
    add_llm_flags(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=_cmd_assets)
