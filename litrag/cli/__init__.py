"""The ``litrag`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from litrag import settings
from litrag.cli import (
    api,
    ask,
    assets,
    characters,
    distill,
    doctor,
    embedders,
    export,
    library,
    segment,
    verify,
)
from litrag.cli import eval as evaluation
from litrag.cli.common import BUNDLED_BOOK
from litrag.settings import SettingsError

__all__ = ["BUNDLED_BOOK", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="litrag", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for group in (
        segment,
        library,
        export,
        embedders,
        verify,
        ask,
        api,
        characters,
        assets,
        doctor,
        evaluation,
        distill,
    ):  # the order of `litrag --help`
        group.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; whatever goes wrong ends in one ``error:`` line, never a traceback
    (``LITRAG_DEBUG=1`` shows it), with exit 2 for a bad setting or a damaged library."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what reports quote as the command
    try:
        settings.check_environment()  # a mistyped LITRAG_* variable stops every command
        return args.func(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `litrag segment | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(
            "interrupted: what was saved before is kept (every write is atomic); rerun the "
            "command to resume",
            file=sys.stderr,
        )
        return 130
    except Exception as exc:
        line = _known_error(exc)
        if line is not None:
            print(f"error: {line}", file=sys.stderr)
            return 2
        if settings.debug():
            raise
        log = _log_traceback()
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(
            f"error: {type(exc).__name__}: {first} (an unexpected failure; the traceback is in "
            f"{log}; LITRAG_DEBUG=1 shows it)",
            file=sys.stderr,
        )
        return 1


def _known_error(exc: BaseException) -> str | None:
    """The one-line message of a failure litrag explains itself (damaged library, held or
    misconfigured store); the store's classes are looked up only where they were loaded."""
    from litrag.ingestion.integrity import LibraryDamagedError

    if isinstance(exc, LibraryDamagedError):
        return str(exc)
    from litrag.models.disk_space import DiskSpaceError

    if isinstance(exc, DiskSpaceError):
        return str(exc)
    nomic = sys.modules.get("litrag.models.nomic_files")
    if nomic is not None and isinstance(exc, nomic.NomicModelError):
        return str(exc)
    narrative = sys.modules.get("litrag.narrative.jsonfile")
    if narrative is not None and isinstance(exc, narrative.DamagedFileError):
        return str(exc)
    edge = sys.modules.get("litrag.stores.edge_open")  # where the store's errors are defined
    names = ("StoreConfigError", "StoreLockedError", "StoreDamagedError", "StoreReadOnlyError")
    known = tuple(getattr(edge, name) for name in names) if edge else ()
    if edge is not None and isinstance(exc, known):
        return str(exc)
    return None


def _log_traceback() -> str:
    import time
    import traceback

    from litrag.settings import home

    try:
        folder = home() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "errors.log"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.ctime()} {' '.join(sys.argv)}\n{traceback.format_exc()}\n")
        return str(path)
    except OSError:
        import tempfile

        path = Path(tempfile.gettempdir()) / "litrag-errors.log"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(traceback.format_exc())
        return str(path)
