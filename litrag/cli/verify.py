"""``litrag verify [--repair]``: does the library agree with itself, and mend what can be mended.

Checks the registry, the docstore, the ingestion cache and the store config as files, then every
point of the store against the registry (see ``litrag.ingestion.integrity``). ``--repair``
re-derives what can be re-derived and says what it did; what it cannot (a book whose points are
gone and whose source file is gone or changed) it leaves, naming the command that would.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from litrag.cli.common import settings_from_args


def _cmd_verify(args: argparse.Namespace) -> int:
    from litrag.ingestion.integrity import check_library_files, verify_library

    s = settings_from_args(args)
    if s.qdrant_url:
        print(
            "error: QDRANT_URL: litrag verify checks the embedded store; a Qdrant server keeps "
            "its own consistency (unset QDRANT_URL to verify the embedded library)",
            file=sys.stderr,
        )
        return 2
    if not s.home.is_dir():
        print(f"no library at {s.home}: nothing to verify")
        return 0
    problems, done = check_library_files(s.home, s.collection, args.repair)
    if problems:  # the files the library opens with are damaged: stop before opening it
        return _report(problems, done, args.repair)
    from litrag.builders import build_library

    library = build_library(s)
    try:
        more, fixed = verify_library(
            library, args.repair, say=lambda m: print(f"  {m}", file=sys.stderr)
        )
        if args.repair and fixed:  # what the repair left: checked again, from scratch
            more, _ = verify_library(library, repair=False)
        books = len(library.books())
        points = library.store.count() if hasattr(library.store, "count") else 0
    finally:
        if hasattr(library.store, "close"):
            library.close()
    code = _report(more, done + fixed, args.repair)
    if code == 0:
        print(f"ok: {books} book{'s' * (books != 1)}, {points} points; registry and store agree")
    return code


def _report(problems: list[Any], done: list[str], repair: bool) -> int:
    for line in done:
        print(f"repaired: {line}")
    for p in problems:
        print(f"error: {p.line()}" if repair else f"problem: {p.line()}")
    return 1 if problems else 0


def add_parsers(sub: Any) -> None:
    """The ``verify`` command."""
    ver = sub.add_parser(
        "verify", help="check that the registry, docstore and store agree (--repair: mend them)"
    )
    ver.add_argument(
        "--repair",
        action="store_true",
        help="re-derive what can be (re-ingest from the sources, rebuild the registry and store "
        "config, drop stray points)",
    )
    ver.set_defaults(func=_cmd_verify)
