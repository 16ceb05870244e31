"""``litrag export``: the embedded library to a Qdrant server (blocks, children, every vector),
and ``--from`` the way back into an empty embedded library."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from litrag.cli.common import check_at_least, settings_from_args


def _cmd_export(args: argparse.Namespace) -> int:
    from litrag.stores.export import open_target
    from litrag.stores.factory import children_collection

    s = settings_from_args(args)
    check_at_least(args, shards=1, replication_factor=1, shard_groups=1)
    if args.collection is not None and not args.collection.strip():
        print("error: --collection must name a collection, got ''", file=sys.stderr)
        return 2
    flag, url = ("--from", args.source) if args.source else ("--to", args.to)
    client = open_target(url, s.qdrant_api_key, flag)  # a bad or dead URL: one line, exit 2
    target = args.collection or s.collection
    # the blocks, and their paragraph children where the library keeps them
    pairs = [
        (s.collection, target),
        (children_collection(s.collection), children_collection(target)),
    ]
    if args.source:
        return _import_back(s.home / "index", client, [(b, a) for a, b in pairs])
    if not (s.home / "index" / s.collection).exists():
        print(f"error: no embedded library at {s.home / 'index' / s.collection}", file=sys.stderr)
        return 2
    code = 0
    for name, into in pairs:
        if (s.home / "index" / name).exists():
            code = max(code, _export_one(args, s.home, name, client, into))
    return code


def _export_one(args: argparse.Namespace, home: Path, name: str, client: Any, target: str) -> int:
    import warnings

    from litrag.stores.edge_store import QdrantEdgeVectorStore, StoreLockedError
    from litrag.stores.export import export_library

    try:
        source = QdrantEdgeVectorStore(path=home / "index", collection_name=name)
    except StoreLockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            report = export_library(
                source,
                client,
                target,
                progress_file=home / f"export-progress-{name}.json",
                shards=args.shards,
                replication_factor=args.replication_factor,
                shard_by_book=args.shard_by_book or args.shard_groups is not None,
                shard_groups=args.shard_groups,
            )
    except Exception as exc:  # the server went away mid-copy: say so; the progress is kept
        from litrag.settings import ServerUnreachableError, unreachable_reason

        reason = unreachable_reason(exc)
        if reason is None:
            raise
        fix = "rerun the command when it is back: the export resumes where it stopped"
        raise ServerUnreachableError("--to", "Qdrant server", args.to, reason, fix) from None
    finally:
        source.close()
    print(
        f"exported {report.exported} points to {args.to} collection {target!r}"
        f" (skipped {report.skipped} already there); source {report.source_count}, "
        f"target {report.target_count}: {'verified' if report.verified else 'COUNTS DIFFER'}"
    )
    return 0 if report.verified else 1


def _import_back(index: Path, client: Any, pairs: list[tuple[str, str]]) -> int:
    """``--from``: server collections into new embedded ones (never over an existing one)."""
    import warnings

    from litrag.stores.edge_store import QdrantEdgeVectorStore
    from litrag.stores.export import import_library
    from litrag.stores.server_store import DENSE_NAME, WINDOW_NAME

    code = 0
    for remote, name in pairs:
        if not client.collection_exists(remote):
            continue
        if (index / name).exists():
            print(
                f"error: {index / name} exists: remove it first, or pick another --collection",
                file=sys.stderr,
            )
            return 2
        vectors = client.get_collection(remote).config.params.vectors
        with (
            QdrantEdgeVectorStore(
                index, name, dense_dim=vectors[DENSE_NAME].size, new_windowed=WINDOW_NAME in vectors
            ) as target,
            warnings.catch_warnings(),
        ):
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            report = import_library(client, remote, target)
            target.optimize()
        ok = report.verified
        print(
            f"imported {report.exported} points from {remote!r} into {index / name}: "
            f"{'verified' if ok else 'COUNTS DIFFER'}"
        )
        code = max(code, 0 if ok else 1)
    return code


def add_parsers(sub: Any) -> None:
    """The ``export`` command and its flags."""
    exp = sub.add_parser("export", help="copy the embedded library to a Qdrant server/cluster")
    way = exp.add_mutually_exclusive_group(required=True)
    way.add_argument("--to", help="Qdrant URL (API key from QDRANT_API_KEY)")
    way.add_argument(
        "--from",
        dest="source",
        help="the way back: a Qdrant URL whose collection becomes the embedded library",
    )
    exp.add_argument("--collection", help="target collection (default: the same name)")
    exp.add_argument("--shards", type=int, help="shard_number of a new target collection")
    exp.add_argument("--replication-factor", type=int, help="of a new target collection")
    exp.add_argument(
        "--shard-by-book",
        action="store_true",
        help="custom sharding of a new target collection: a shard key per book",
    )
    exp.add_argument(
        "--shard-groups", type=int, help="with sharding by book: this many book groups (keys)"
    )
    exp.set_defaults(func=_cmd_export)
