"""The library commands: ``litrag ingest``, ``books`` and ``remove`` (export: ``cli.export``)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from litrag.cli.common import add_backend_flag, printable, settings_from_args
from litrag.settings import SettingsError


def _cmd_ingest(args: argparse.Namespace) -> int:
    from litrag.ingestion.catalog import CatalogError, text_bytes
    from litrag.ingestion.library import Library

    s = settings_from_args(args)
    args.ray_address = _ray_address(args, s)
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:  # before any store is made: it was created empty, and then looked damaged
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise SettingsError(f"{missing[0]}: no such file or folder{more}")
    _check_segmenter_llm(s)
    records = Library.read_registry(s.home)  # a damaged registry stops here, in one line
    from litrag.ingestion.integrity import LibraryDamagedError, unfinished_reembed

    if (reembed := unfinished_reembed(s.home)) is not None:  # its books would mix two models
        raise LibraryDamagedError([reembed])
    bad = _unreadable_zip(args.paths, int(s.max_mb * 1024 * 1024))
    if bad is not None:  # before the library is opened: nothing there changes
        print(f"error: {printable(bad)}", file=sys.stderr)
        return 2
    try:
        chosen = _choose_books(args, int(s.max_mb * 1024 * 1024))
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if chosen is None:  # plain files and folders: the library discovers them itself
        return _run_ingest(args, s, list(args.paths), None, [])
    scan, selection = chosen
    _err(f"found {scan.summary()}; {selection.summary()}")
    if args.dry_run:
        for _path, reason in scan.failed:  # refused (a FIFO, a device, a link out): by name
            _err(f"  refused: {printable(reason)}")
        max_bytes = int(s.max_mb * 1024 * 1024)
        _dry_run(selection, records, max_bytes)
        fits = [b for b, _ in selection.books if text_bytes(b.path) <= max_bytes]
        return 0 if fits else 1
    if not selection.books:
        print("error: no book matches the filters: nothing to ingest", file=sys.stderr)
        return 1
    rows = {str(b.path): e.as_record() for b, e in selection.books if e is not None}
    return _run_ingest(args, s, [b.path for b, _ in selection.books], rows, scan.failed)


def _check_space(s: Any, paths: list[Any]) -> None:
    """``check_ingest_space`` for the files and folders given, before the library is opened."""
    from litrag.ingestion.library import check_ingest_space
    from litrag.stores.factory import children_collection

    sizes = []
    for path in map(Path, paths):
        if path.is_dir():
            books = (f for f in path.rglob("*") if f.suffix.lower() in (".txt", ".zip"))
            sizes += [f.stat().st_size for f in books if f.is_file()]
        elif path.is_file():
            sizes.append(path.stat().st_size)
    index = s.home / "index"
    names = [s.collection] + ([children_collection(s.collection)] if s.children else [])
    new = 0 if s.qdrant_url else sum(not (index / n / "shard").is_dir() for n in names)
    check_ingest_space(s.home, sum(sizes), new, len(sizes))


def _ray_address(args: argparse.Namespace, s: Any) -> str | None:
    """Where ``--ray`` / ``LITRAG_RAY_ADDRESS`` sends the ingest: an address, ``local`` (a cluster
    of this machine), or None (no Ray). A first path taken for the address is given back."""
    value = args.ray
    if value and Path(value).exists() and ":" not in value and value != "local":
        args.paths.insert(0, Path(value))  # `ingest --ray books/`: argparse gave it to --ray
        value = ""
    if not args.paths:
        raise SettingsError("ingest needs books: litrag ingest PATH... (files, folders, a mirror)")
    address = value or s.ray_address or ("local" if value is not None else None)
    if address is None:
        return None
    if args.ray_actors is not None and args.ray_actors < 1:
        raise SettingsError(f"--ray-actors must be at least 1, got {args.ray_actors}")
    try:
        import ray  # noqa: F401  (only here: no Ray import on the default path)
    except ImportError:
        raise SettingsError(
            "--ray / LITRAG_RAY_ADDRESS needs litrag[scale] (ray is not installed): "
            "pip install 'litrag[scale]'"
        ) from None
    return address


def _check_segmenter_llm(s: Any) -> None:
    """An LLM segmenter with no LLM to call is one line naming the flag and what to set, before
    the library is opened (it was the parser's ``segmenter='litseg-lite' needs an llm``)."""
    from litrag.settings import llm_backend

    if s.segmenter not in ("litseg-lite", "litseg"):
        return
    url = s.segment_url or s.llm_url
    backend = llm_backend(s)
    if (backend == "vllm" and not url) or (url and backend != "local"):
        return
    raise SettingsError(
        f"--segmenter {s.segmenter} needs an LLM server: set LITRAG_SEGMENT_URL or "
        "LITRAG_LLM_URL (or LITRAG_LLM_BACKEND=vllm for in-process vLLM)"
    )


def _unreadable_zip(paths: list[Path], max_bytes: int) -> str | None:
    """Why a ``.zip`` named on the command line cannot be read (encrypted, a corrupt deflate
    stream, no text in it), or None. Zips found in folders are loaded, and named, one by one."""
    from litrag.ingestion.book_bytes import BookLoadError, check_zip

    for path in paths:
        if path.suffix.lower() == ".zip" and path.is_file():
            try:
                check_zip(path, max_bytes)
            except BookLoadError as exc:
                return str(exc)
            except OSError as exc:
                return f"{path}: cannot read file ({exc.strerror or exc})"
    return None


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def _choose_books(args: argparse.Namespace, max_bytes: int) -> tuple[Any, Any] | None:
    """(scan, selection) when a catalog, a filter or a dry run asks for one, else None."""
    from litrag.ingestion.catalog import BookFilter, Catalog, CatalogError, parse_ids, select
    from litrag.ingestion.mirror import discover

    ids = parse_ids(args.ids)
    if args.limit is not None and args.limit < 1:
        raise CatalogError(f"--limit must be at least 1, got {args.limit}")
    languages = [x.strip() for x in (args.language or "").split(",") if x.strip()]
    flt = BookFilter(
        language=languages,
        bookshelf=args.bookshelf,
        subject=args.subject,
        author=args.author,
        ids=ids,
        limit=args.limit,
    )
    given = args.catalog is not None  # "" too: named as empty, not taken for no flag
    wanted = given or args.dry_run or ids or args.limit or flt.needs_catalog
    catalog = Catalog.from_csv(args.catalog) if given else Catalog.find(args.paths)
    if catalog is not None:
        _skipped_rows(catalog.skipped)
        note = catalog.duplicates_note()
        if note:
            print(f"warning: {note}", file=sys.stderr)
    if not wanted and catalog is None:
        return None
    scan = discover(args.paths, max_bytes=max_bytes, follow_links=args.follow_links)
    return scan, select(scan.books, catalog, flt)


def _skipped_rows(skipped: list[str], shown: int = 5) -> None:
    """One warning per catalog row that could not be read (the first few, then a count)."""
    for why in skipped[:shown]:
        _err(f"warning: {printable(why)}: row skipped")
    if len(skipped) > shown:
        _err(f"warning: {len(skipped) - shown} more catalog rows skipped")


def _dry_run(selection: Any, records: list[Any], max_bytes: int) -> None:
    """What would be ingested, and how long it would take at this library's own pace."""
    from litrag.ingestion.catalog import DEFAULT_SECONDS_PER_MB, text_bytes

    rate, basis = DEFAULT_SECONDS_PER_MB, "the six shared books on 2 cores"
    done = [
        (sum(r.seconds.values()), text_bytes(Path(r.source)))
        for r in records
        if r.status == "complete" and r.seconds and r.source and Path(r.source).is_file()
    ]
    if sum(b for _, b in done) > 100_000:
        rate = sum(t for t, _ in done) / (sum(b for _, b in done) / 1e6)
        basis = f"this library's {len(done)} ingested books"
    total_bytes = 0
    chosen = 0
    print("ebook  version  size KB  title / author  (file)")
    for book, entry in selection.books:
        size = text_bytes(book.path)
        if size > max_bytes:  # the ingest would refuse it: so does the dry run, by name
            _err(
                f"  refused: {printable(str(book.path))}: {size:,} bytes of text, over the "
                f"--max-mb limit of {max_bytes:,} bytes"
            )
            continue
        chosen += 1
        total_bytes += size
        title = entry.title if entry else book.path.name
        author = (entry.author or "") if entry else ""
        number = str(book.ebook_id) if book.ebook_id is not None else "-"
        lang = f" [{','.join(entry.languages)}]" if entry and entry.languages else ""
        row = f"{title}{' / ' + author if author else ''}{lang}  ({book.path})"
        print(f"{number:>6}  {book.variant:<7}  {size / 1000:>7.0f}  {printable(row)}")
    secs = total_bytes / 1e6 * rate
    print(
        f"would ingest {chosen} books ({total_bytes / 1e6:.1f} MB of text): about "
        f"{_duration(secs)} at {rate:.0f} s per MB (from {basis}); nothing was ingested"
    )


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _run_ingest(
    args: argparse.Namespace,
    s: Any,
    paths: list[Any],
    rows: dict[str, dict[str, Any]] | None,
    failed: list[tuple[str, str]],
) -> int:
    from litrag.stores.factory import store_description

    print(f"library: {s.home} ({store_description(s.qdrant_url)})", file=sys.stderr)
    if not args.dry_run:  # before the stores are made: a full tmpfs was a Bus error
        _check_space(s, paths)
    if args.ray_address is not None:
        with _ray_session(args, s) as on_ray:
            return _ingest_with(args, s, paths, rows, failed, on_ray)
    return _ingest_with(args, s, paths, rows, failed, None)


@contextlib.contextmanager
def _ray_session(args: argparse.Namespace, s: Any) -> Iterator[Callable[[Any], Any]]:
    """Joined to (or started) the Ray cluster for the ingest; yields what makes a library's
    ``prepare_with`` (``RayBooks``); the session ends with the ingest."""
    import ray

    from litrag.builders import build_book_parts
    from litrag.ingestion.ray_ingest import RayBooks, connect

    address = None if args.ray_address == "local" else args.ray_address
    try:
        where = connect(address)
    except Exception as exc:  # a dead or wrong address: one line naming it
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        msg = f"--ray {args.ray_address}: cannot join the Ray cluster ({first})"
        raise SettingsError(msg) from None
    res = ray.cluster_resources()
    _err(f"ray: {where} ({res.get('CPU', 0):.0f} CPUs, {res.get('GPU', 0):.0f} GPUs)")
    try:
        yield (
            lambda library: (
                lambda files: RayBooks(
                    files,
                    library,
                    functools.partial(build_book_parts, s),
                    actors=args.ray_actors or 1,
                    show_progress=not args.quiet,
                )
            )
        )
    finally:
        ray.shutdown()


def _ingest_with(
    args: argparse.Namespace,
    s: Any,
    paths: list[Any],
    rows: dict[str, dict[str, Any]] | None,
    failed: list[tuple[str, str]],
    on_ray: Callable[[Any], Any] | None,
) -> int:
    from litrag.builders import build_library
    from litrag.stores.edge_store import StoreLockedError

    try:
        library = build_library(s)
    except StoreLockedError as exc:
        print(f"error: {_locked_message(s.home, exc)}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a segmenter that needs an LLM none is set for, and the like
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    no_assets: list[str] = []
    try:
        report = library.ingest(
            paths,
            show_progress=not args.quiet,
            on_event=lambda m: print(printable(m), file=sys.stderr),
            catalog_rows=rows,
            follow_links=args.follow_links,
            prepare_with=on_ray(library) if on_ray is not None else None,
        )
        report.failed[:0] = failed
        _print_report(report)
        if args.assets:  # the books that ingested fine; the store is still open here
            from litrag.cli.assets import assets_after_ingest

            no_assets = assets_after_ingest(
                args,
                s,
                [*report.ingested, *report.unchanged],
                block_store=library.store,
                embed_model=library.embed_model,
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
            library.close()  # flushed: every batch stored so far is kept
    if no_assets and args.strict_assets:
        return 1
    return 0 if report.ok else 1


def _print_report(report: Any) -> None:
    for book_id, secs in report.seconds.items():
        print(f"{book_id}: " + ", ".join(f"{k} {v:.1f}s" for k, v in secs.items()))
    if report.optimize_s:
        print(f"optimize {report.optimize_s:.1f}s")
    print(
        f"ingested {len(report.ingested)}, unchanged {len(report.unchanged)}, "
        f"failed {len(report.failed)}"
    )
    for _path, reason in report.failed:
        print(f"error: {printable(reason)}", file=sys.stderr)


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


def _matching(args: argparse.Namespace, rows: list[Any]) -> list[Any]:
    """The books ``--author`` and ``--search`` (id, title or author; any case) leave."""
    author = (args.author or "").lower()
    words = (args.search or "").lower().split()
    out = []
    for r in rows:
        if author and author not in (r.author or "").lower():
            continue
        hay = f"{r.book_id} {r.title} {r.author or ''}".lower()
        if words and not all(w in hay for w in words):
            continue
        out.append(r)
    return out


def _books_table(args: argparse.Namespace, s: Any, rows: list[Any]) -> int:
    paged = not args.json or args.page is not None or args.per_page is not None
    page, per_page = args.page or 1, args.per_page or 50
    if page < 1 or per_page < 1:
        print("error: --page and --per-page must be at least 1", file=sys.stderr)
        return 2
    total = len(rows)
    rows = sorted(_matching(args, rows), key=_book_order)
    matched = len(rows)
    pages = max((matched + per_page - 1) // per_page, 1)
    if paged:
        rows = rows[(page - 1) * per_page : page * per_page]
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2, ensure_ascii=False))
        return 0
    if not total:
        print(f"no books in {s.home}; add some with: litrag ingest BOOK.txt")
        return 0
    if not rows:
        what = "no book matches" if not matched else f"no page {page} (of {pages})"
        print(f"{what}; the library holds {total} books")
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
    if pages > 1 or matched < total:
        more = f"; --page {page + 1} for more" if page < pages else ""
        print(f"page {page} of {pages}: {matched} of {total} books match{more}")
    return 0


def _book_order(record: Any) -> tuple[Any, ...]:
    """pg11 before pg84 before pg1342; other ids after, by name."""
    digits = record.book_id.removeprefix("pg")
    return (0, int(digits), "") if digits.isdigit() else (1, 0, record.book_id)


def _cmd_remove(args: argparse.Namespace) -> int:
    from litrag.builders import build_store
    from litrag.ingestion.library import Library
    from litrag.ingestion.removal import pending_removal

    s = settings_from_args(args)
    listed = any(r.book_id == args.book for r in Library.read_registry(s.home))
    if not listed and pending_removal(s.home) != args.book:  # else: finish that removal
        print(f"error: no book {args.book!r} in {s.home} (see: litrag books)", file=sys.stderr)
        return 2
    from litrag.builders import build_asset_remover, build_children_store, has_children
    from litrag.stores.edge_store import StoreLockedError

    records = Library.read_registry(s.home)
    try:
        store = build_store(s)
        kids = build_children_store(s) if has_children(s, records, [args.book]) else None
    except StoreLockedError as exc:
        print(f"error: {_locked_message(s.home, exc)}", file=sys.stderr)
        return 2
    Library(s.home, store, assets=build_asset_remover(s), children_store=kids).remove(args.book)
    print(f"removed {args.book}")
    return 0


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
    """The ``ingest``, ``books`` and ``remove`` commands and their flags."""
    ing = sub.add_parser("ingest", help="add Gutenberg books (files or folders) to the library")
    ing.add_argument("paths", nargs="*", type=Path, help="books: files, folders or a mirror")
    ing.add_argument("--segmenter", choices=["offline", "litseg-lite", "litseg"])
    ing.add_argument(
        "--workers", type=int, help="LLM calls in flight (LLM segmenters; --assets: default 2)"
    )
    add_backend_flag(ing)
    ing.add_argument("--max-mb", type=float, help="refuse books larger than this (default 16)")
    ing.add_argument(
        "--follow-links",
        action="store_true",
        help="in folders, read symbolic links that lead out of the folder too (default: a "
        "link is read only when it points at a file inside the folder)",
    )
    ing.add_argument("-q", "--quiet", action="store_true")
    scale = ing.add_argument_group(
        "distributed (litrag[scale])",
        "load, chapters and segmentation as Ray tasks, embedding in an actor pool, the store "
        "written here; the same nodes as without Ray",
    )
    scale.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="ingest on the Ray cluster at ADDRESS (default LITRAG_RAY_ADDRESS; none: a local "
        "cluster of this machine)",
    )
    scale.add_argument("--ray-actors", type=int, help="embedding actors (default 1)")
    mir = ing.add_argument_group(
        "a Gutenberg mirror",
        "PATHS may be a mirror's root (1/2/3/4/12345/12345-0.txt, .zip, cache/epub/N/pgN.txt): "
        "one version per ebook (UTF-8, then Latin-1, then ASCII), non-book files skipped",
    )
    mir.add_argument("--catalog", help="pg_catalog.csv (default: one at a mirror root, if any)")
    mir.add_argument("--language", help="catalog language codes, e.g. en or en,fr")
    mir.add_argument("--bookshelf", help="catalog bookshelf containing this, e.g. Adventure")
    mir.add_argument("--subject", help="catalog subject containing this, e.g. 'Sea stories'")
    mir.add_argument("--author", help="catalog author containing this, e.g. Austen")
    mir.add_argument("--ids", help="ebook numbers and ranges, e.g. 11,84,1342 or 1-20000")
    mir.add_argument("--limit", type=int, help="at most this many books (after the filters)")
    mir.add_argument(
        "--dry-run", action="store_true", help="list what would be ingested and how long"
    )
    from litrag.cli.assets import COST, add_llm_flags

    nar = ing.add_argument_group(
        "narrative assets (--assets)",
        f"after the ingest, each book that ingested fine (new or unchanged) gets its LLM "
        f"assets, as `litrag assets BOOK` builds them: {COST}. A book whose assets fail is "
        "named and the ingest stands (exit status as without --assets, unless "
        "--strict-assets); books whose assets are complete are skipped; a rerun resumes "
        "from the reply cache. The LLM flags below are the assets' (the segmenter's LLM is "
        "LITRAG_SEGMENT_URL / LITRAG_LLM_URL); --workers and --timeout pace both.",
    )
    nar.add_argument("--assets", action="store_true", help="build the books' narrative assets")
    nar.add_argument(
        "--strict-assets",
        action="store_true",
        help="exit 1 when a book's assets could not be built or have failed blocks",
    )
    add_llm_flags(nar, workers=False, timeout=None)
    ing.set_defaults(func=_cmd_ingest)

    bks = sub.add_parser("books", help="list the books in the library")
    bks.add_argument("--json", action="store_true")
    bks.add_argument("--author", help="books whose author contains this (any case)")
    bks.add_argument("--search", help="books whose id, title or author hold these words")
    bks.add_argument("--page", type=int, help="page of the list, sorted by ebook number (1)")
    bks.add_argument("--per-page", type=int, help="books per page (default 50; --json: all)")
    bks.set_defaults(func=_cmd_books)

    rem = sub.add_parser("remove", help="remove a book from the library")
    rem.add_argument("book", help="book id, as `litrag books` shows it")
    rem.set_defaults(func=_cmd_remove)
