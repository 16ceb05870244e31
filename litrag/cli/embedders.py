"""`litrag reembed` (a library embedded again with another model) and `litrag models install`
(the quality embedder assembled now rather than at its first use)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from litrag.settings import EMBED_PRESETS, Settings


def _cmd_models_install(args: argparse.Namespace) -> int:
    """Assemble, check and quantise nomic-embed-text-v1.5 into the models folder."""
    from litrag.models.nomic import DEFAULT_QUANT
    from litrag.models.nomic_files import NOMIC_NAME, f16_path, quantized_path

    s = Settings()
    folder = s.models_dir or s.home / "models"
    f16 = f16_path(folder)
    print(f"{NOMIC_NAME} f16: {f16} (sha256 verified)")
    for quant in dict.fromkeys([DEFAULT_QUANT, *args.quant]):
        path = quantized_path(quant, folder)
        print(f"{NOMIC_NAME} {quant}: {path} ({path.stat().st_size:,} bytes)")
    return 0


def _cmd_reembed(args: argparse.Namespace) -> int:
    """Every book of the library embedded again with the named embedder (see
    ``litrag.ingestion.reembed``); segmentation is kept, vectors and collections are new."""
    from litrag.builders import (
        blocks_windowed,
        build_character_indexer,
        build_children_store,
        build_embed_model,
        build_llm,
        build_parser,
        build_store,
        build_window_encoder,
    )
    from litrag.ingestion import reembed as rb
    from litrag.ingestion.embedder_record import embedder_key
    from litrag.ingestion.library import Library
    from litrag.ingestion.registry import REGISTRY_NAME, write_rows
    from litrag.narrative.asset_store import AssetStore

    if args.served:  # the server at LITRAG_EMBED_URL
        s = Settings()
        if not s.embed_url:
            print(
                "error: --served embeds with the server at LITRAG_EMBED_URL: set it",
                file=sys.stderr,
            )
            return 2
    else:  # in process: the URL, if set, is not what was asked for
        flag = "--preset" if args.preset else "--embed-model"
        chosen = args.preset or args.embed_model
        s = Settings(names_={"embed_model": flag}, embed_model=chosen, embed_url=None)
    say = (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr))
    records = Library.read_registry(s.home)
    ids = [r.book_id for r in records]
    points = rb.read_journal(s.home)
    if points is None:
        if not records:
            print(f"no books in {s.home}: nothing to embed")
            return 0
        unfinished = [r.book_id for r in records if r.status != "complete"]
        if unfinished:
            print(
                f"error: {', '.join(unfinished)} not completely ingested: finish with "
                "`litrag ingest` or `litrag remove` first",
                file=sys.stderr,
            )
            return 2
        points = _read_points(s, ids, records)
        rb.write_journal(s.home, points, _command(args))
        say(f"saved {sum(map(len, points.values()))} points to {rb.journal_path(s.home)}")
    else:
        say(f"resuming the reembed saved in {rb.journal_path(s.home)}")
    embed = build_embed_model(s)  # first: a missing model leaves the collections as they were
    for store in _open_all(s, points):
        rb.drop_collection(store)
    dim = len(embed.get_text_embedding("dimension probe"))
    windows = build_window_encoder(embed)
    store = build_store(s, dense_dim=dim, window_doc_fn=windows, new_windowed=blocks_windowed(s))
    kids = build_children_store(s, dim, windows) if points["children"] else None
    try:
        rb.add_points(store, embed, points["blocks"], say, "blocks")
        if kids is not None:
            rb.add_points(kids, embed, points["children"], say, "children")
        if points.get("assets"):
            with AssetStore.open(
                s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key, embed_model=embed
            ) as assets:
                rb.add_points(assets.store, embed, points["assets"], say, "assets")
        for st in (store, kids):
            if st is not None and hasattr(st, "optimize"):
                st.optimize()
        library = Library(
            s.home,
            store,
            embed,
            build_parser(s, build_llm(s)),
            children_store=kids,
            characters=build_character_indexer(s),
        )
        rows = rb.updated_records(records, embedder_key(embed), lambda r: _fingerprint(library, r))
        write_rows(s.home / REGISTRY_NAME, rows)
        rb.finish(s.home)
    finally:
        for st in (store, kids):
            if st is not None and hasattr(st, "close"):
                st.close()
    print(
        f"embedded {len(points['blocks'])} blocks and {len(points['children'])} children of "
        f"{len(ids)} books again with {embedder_key(embed)}"
    )
    return 0


def _command(args: argparse.Namespace) -> str:
    """The ``litrag reembed`` command line that resumes this run, as its journal records it."""
    if args.served:
        return "litrag reembed --served"
    if args.preset:
        return f"litrag reembed --preset {args.preset}"
    return f"litrag reembed --embed-model {args.embed_model}"


def _read_points(s: Settings, ids: list[str], records: list[Any]) -> dict[str, list[Any]]:
    """The library's stored points, by collection (blocks, children, assets), vectors left out."""
    from litrag.builders import build_children_store, build_store, has_children, open_asset_store
    from litrag.ingestion import reembed as rb

    out: dict[str, list[Any]] = {"blocks": [], "children": [], "assets": []}
    stores = {"blocks": build_store(s)}
    if has_children(s, records, ids):
        stores["children"] = build_children_store(s)
    for role, store in stores.items():
        try:
            out[role] = rb.stored_points(store, ids)
        finally:
            if hasattr(store, "close"):
                store.close()
    assets = open_asset_store(s)
    if assets is not None:
        with assets:
            out["assets"] = rb.stored_points(assets.store, ids)
    return out


def _open_all(s: Settings, points: dict[str, list[Any]]) -> list[Any]:
    """The library's collections as stores, to be dropped (each opened with its saved config)."""
    from litrag.builders import build_children_store, build_store, open_asset_store

    out = [build_store(s), build_children_store(s)]
    assets = open_asset_store(s) if points.get("assets") else None
    if assets is not None:
        out.append(assets.store)
    return out


def _fingerprint(library: Any, record: Any) -> str | None:
    """The book's fingerprint under the new embedder, where its source still reads."""
    from pathlib import Path

    from litrag.ingestion.gutenberg import BookLoadError, load_book

    src = Path(record.source) if record.source else None
    if not record.fingerprint or src is None or not src.is_file():
        return None
    try:
        return library.fingerprint(load_book(src, max_bytes=library.max_bytes).text)
    except (BookLoadError, OSError):
        return None


def add_parsers(sub: Any) -> None:
    """The ``reembed`` and ``models`` commands."""
    rem = sub.add_parser(
        "reembed", help="embed every book of the library again with another embedder"
    )
    which = rem.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--preset",
        choices=sorted(EMBED_PRESETS),
        help="fast: the packaged MiniLM; quality: nomic-embed-text-v1.5 (litrag[quality])",
    )
    which.add_argument("--embed-model", help="minilm, nomic, or a sentence-transformers folder")
    which.add_argument(
        "--served", action="store_true", help="the embedding server at LITRAG_EMBED_URL"
    )
    rem.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    rem.set_defaults(func=_cmd_reembed)

    mod = sub.add_parser("models", help="packaged models: assemble them now")
    msub = mod.add_subparsers(dest="models_command", required=True)
    ins = msub.add_parser(
        "install", help="assemble nomic-embed-text-v1.5 from its packages, check it, quantise it"
    )
    ins.add_argument("model", choices=["nomic"], help="the model to assemble")
    ins.add_argument(
        "--quant",
        action="append",
        default=[],
        choices=["q8_0", "q4_k_m"],
        help="another quantised copy to make beside the default (repeatable)",
    )
    ins.set_defaults(func=_cmd_models_install)
