"""A library damaged on disk: the ``Problem`` found, the ``LibraryDamagedError`` that carries it,
and reading (or setting aside) a JSON file that may be damaged.

The library (``litrag.ingestion.library``), its registry and the checks of
``litrag.ingestion.integrity`` all raise and report these; they import nothing of litrag.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPAIR = "run `litrag verify --repair`"


@dataclass
class Problem:
    """One disagreement: what is wrong, and the command that repairs it."""

    what: str
    fix: str
    kind: str  # registry-file, docstore-file, cache-file, store-missing, store-config,
    # points, vectors, interrupted, unregistered, orphans, characters, store-damaged,
    # removing, reembedding, docstore
    book_id: str | None = None

    def line(self) -> str:
        return f"{self.what}: {self.fix}"


class LibraryDamagedError(ValueError):
    """The library's parts disagree; ``str()`` is one line: the first problem and its fix."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        more = len(self.problems) - 1
        tail = (
            f" ({more} more problem{'s' if more > 1 else ''}: see `litrag verify`)" if more else ""
        )
        super().__init__(self.problems[0].line() + tail)


def read_json(path: Path, kind: str, fix: str) -> Any:
    """``path``'s JSON; a file that is not JSON is a ``LibraryDamagedError`` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        reason = f"not text ({exc.reason})"
    except json.JSONDecodeError as exc:
        reason = f"not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno})"
    raise LibraryDamagedError([Problem(f"{path} is damaged: {reason}", fix, kind)])


def set_aside(path: Path) -> Path:
    """Move a damaged file out of the way (kept, never deleted): ``NAME.damaged-<time>``."""
    dest = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    path.replace(dest)
    return dest
