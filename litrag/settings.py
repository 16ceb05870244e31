"""Where litrag keeps its data: ``$LITRAG_HOME``, else ``~/.litrag``."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The data directory: index, docstore, caches, models and logs live under it."""
    return Path(os.environ.get("LITRAG_HOME") or Path.home() / ".litrag").expanduser()
