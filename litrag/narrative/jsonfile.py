"""Narrative files (character indexes, extractions) as pydantic JSON, replaced atomically so a
killed run leaves the old file or the new one, never half of either."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

from llama_index.core.bridge.pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class DamagedFileError(ValueError):
    """A narrative file that does not read back (cut short, overwritten): ``str()`` is one line
    naming the file and the repair, instead of pydantic's validation dump. The CLI and the UI
    show it as they show a damaged library."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        super().__init__(
            f"{path} is damaged ({reason}): run `litrag verify --repair` (rebuilds it)"
        )


def read_model(path: Path, cls: type[M]) -> M | None:
    """The model stored at ``path``, or None when there is no file; a file that does not parse
    as one is a ``DamagedFileError``."""
    if not path.is_file():
        return None
    try:
        return cls.model_validate_json(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DamagedFileError(path, f"not text: {exc.reason}") from None
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        kind = "not valid JSON" if first.get("type") == "json_invalid" else f"not {cls.__name__}"
        raise DamagedFileError(path, f"{kind}: {first.get('msg', exc.title)}") from None


def write_model(path: Path, model: BaseModel) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(model.model_dump_json(), encoding="utf-8")
    os.replace(tmp, path)
    return path
