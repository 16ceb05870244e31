"""Narrative files (character indexes, extractions) as pydantic JSON, replaced atomically so a
killed run leaves the old file or the new one, never half of either."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

from llama_index.core.bridge.pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def read_model(path: Path, cls: type[M]) -> M | None:
    """The model stored at ``path``, or None when there is no file."""
    if not path.is_file():
        return None
    return cls.model_validate_json(path.read_text(encoding="utf-8"))


def write_model(path: Path, model: BaseModel) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(model.model_dump_json(), encoding="utf-8")
    os.replace(tmp, path)
    return path
