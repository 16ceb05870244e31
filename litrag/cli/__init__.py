"""The ``litrag`` command line."""

from __future__ import annotations

import argparse
import sys

from litrag.cli import ask, doctor, library, segment
from litrag.cli import eval as evaluation
from litrag.cli.common import BUNDLED_BOOK
from litrag.settings import SettingsError

__all__ = ["BUNDLED_BOOK", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="litrag", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for group in (segment, library, ask, doctor, evaluation):  # the order of `litrag --help`
        group.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what reports quote as the command
    try:
        return args.func(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `litrag segment | head`
        sys.stderr.close()
        return 0
