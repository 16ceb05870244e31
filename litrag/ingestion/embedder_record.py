"""Which embedder built a library, and the refusal to mix two in one.

A library's vectors are comparable only with vectors of the same model: a question embedded by
nomic searched against MiniLM blocks (or the reverse, another dimension) ranks noise, silently.
So every book's registry row names the embedder that built it (``BookRecord.embedder``), and
opening a library to search it or to add books with another embedder is refused in one line that
names the fix: ``litrag reembed --preset NAME``, or the setting back as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from litrag.ingestion.registry import BookRecord
from litrag.models.nomic_files import NOMIC_NAME
from litrag.settings import EMBED_PRESETS, SettingsError


class EmbedderMismatchError(SettingsError):
    """Books embedded with one model, asked or added to with another (one line, the fix)."""


MINILM_KEY = "all-MiniLM-L6-v2"
SERVED = " (served)"  # a served model's key ends so


def embedder_key(embed: Any) -> str:
    """What the registry records for ``embed``: its model name (``all-MiniLM-L6-v2``,
    ``nomic-embed-text-v1.5 q8_0``, a folder's name). The packaged MiniLM's folder is named
    ``model``, and its ``model_name`` is part of every fingerprint, so it is named here."""
    name = str(getattr(embed, "model_name", "") or type(embed).__name__)
    if getattr(embed, "served", False):  # LITRAG_EMBED_URL's: not the in-process model's vectors
        return f"{name}{SERVED}"
    if name == "model" and "minilm" in str(getattr(embed, "model_path", "")).lower():
        return MINILM_KEY
    return name


def same_embedder(recorded: str, key: str) -> bool:
    """Whether vectors recorded as ``recorded`` can be searched with ``key``'s. A row from
    before the embedder was recorded (empty) was built by the windowed sentence-transformers
    embedder, never by nomic."""
    if not recorded:
        return not key.startswith(NOMIC_NAME)
    return recorded == key


def setting_for(key: str) -> str:
    """The ``LITRAG_EMBED_MODEL`` value that gives ``key``'s embedder back."""
    if key.startswith(NOMIC_NAME):
        return "nomic"
    return "minilm" if not key or "minilm" in key.lower() else key


def preset_flag(key: str) -> str:
    """``--preset NAME`` for a preset's embedder, ``--served`` for a served one, else
    ``--embed-model VALUE``."""
    if key.endswith(SERVED):
        return "--served"
    value = setting_for(key)
    named = {model: preset for preset, model in EMBED_PRESETS.items()}
    return f"--preset {named[value]}" if value in named else f"--embed-model {value}"


def check_embedder(
    records: Iterable[BookRecord], key: str, book_ids: Sequence[str] | None = None
) -> None:
    """Refuse (``EmbedderMismatchError``) when any of ``book_ids`` (default: every book) was
    embedded by another model than ``key``'s."""
    wanted = None if book_ids is None else set(book_ids)
    for record in records:
        if wanted is not None and record.book_id not in wanted:
            continue
        if record.status != "complete" or same_embedder(record.embedder, key):
            continue
        was = record.embedder or "the packaged MiniLM"
        setting = "LITRAG_EMBED_URL" if key.endswith(SERVED) else "LITRAG_EMBED_MODEL"
        raise EmbedderMismatchError(
            f"{record.book_id} was embedded with {was}, but {setting} gives {key}: "
            f"embed the library again with `litrag reembed {preset_flag(key)}`, or "
            f"{_back_to(record.embedder, key)}"
        )


def _back_to(recorded: str, key: str) -> str:
    """The settings that give ``recorded``'s embedder back, from ``key``'s."""
    if recorded.endswith(SERVED):
        return f"set LITRAG_EMBED_URL to a server of {recorded.removesuffix(SERVED)}"
    unset = "unset LITRAG_EMBED_URL and " if key.endswith(SERVED) else ""
    return f"{unset}set LITRAG_EMBED_MODEL={setting_for(recorded)}"
