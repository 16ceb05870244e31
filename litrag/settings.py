"""Settings from the environment: plain data and the readers that fill it, no models or stores.

Every backend is chosen by environment variables or CLI flags, never by editing code;
``litrag.builders`` builds the models and stores from these settings. ``LITRAG_HOME`` (data
directory, default ``~/.litrag``), ``QDRANT_URL`` / ``QDRANT_API_KEY`` (a Qdrant server instead
of the embedded store), ``LITRAG_LLM_URL`` / ``LITRAG_LLM_MODEL`` (an OpenAI-compatible server
such as ``vllm serve``), ``LITRAG_LLM_BACKEND`` (the client that talks to it: ``openai-like``,
``vllm`` or ``local``; see ``litrag.llm_backends``), ``LITRAG_LLM_API_KEY`` (the server's key),
``LITRAG_LLM_TEMPERATURE``, ``LITRAG_SEGMENT_URL`` / ``LITRAG_SEGMENT_MODEL`` (another server
for segmentation, through the same backend), ``LITRAG_EMBED_MODEL`` (``minilm`` or a
sentence-transformers folder).
Answering: ``LITRAG_LOCAL_LLM`` (the packaged model started when no URL is set),
``LITRAG_MODELS`` (its folder), ``LITRAG_LLM_TIMEOUT`` (seconds), ``LITRAG_LLM_CONTEXT`` (tokens),
``LITRAG_RETRIEVAL`` (preset, with ``LITRAG_RETRIEVAL_<FIELD>`` overrides; see
``litrag.query.retriever``), ``LITRAG_PASSAGE_ORDER`` (``score`` or ``story``: the order of the
passages in the answer prompt), ``LITRAG_FOCUS_WORDS`` (words of each passage the LLM reads;
``0``: whole passages; default: 110 for the packaged local model, whole for a server).

Standard library only (the default passage order is looked up when a ``Settings`` is made): every
command reads settings before it decides what else to import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_COLLECTION = "litrag"


def home() -> Path:
    """The data directory: index, docstore, caches, models and logs live under it."""
    return Path(os.environ.get("LITRAG_HOME") or Path.home() / ".litrag").expanduser()


@dataclass
class Settings:
    home: Path = field(default_factory=home)  # the function above
    qdrant_url: str | None = field(default_factory=lambda: os.environ.get("QDRANT_URL") or None)
    qdrant_api_key: str | None = field(default_factory=lambda: os.environ.get("QDRANT_API_KEY"))
    llm_url: str | None = field(default_factory=lambda: os.environ.get("LITRAG_LLM_URL") or None)
    llm_model: str = field(default_factory=lambda: os.environ.get("LITRAG_LLM_MODEL", "local"))
    segment_url: str | None = field(
        default_factory=lambda: os.environ.get("LITRAG_SEGMENT_URL") or None
    )  # a separate server for segmentation (e.g. Qwen3-4B-Instruct-2507); None: llm_url
    segment_model: str | None = field(
        default_factory=lambda: os.environ.get("LITRAG_SEGMENT_MODEL") or None
    )  # the model name at segment_url; None: llm_model
    llm_backend: str | None = field(
        default_factory=lambda: _env_choice("LITRAG_LLM_BACKEND", LLM_BACKENDS)
    )  # the client for every LLM (answers, segmentation, judge); None: see llm_backend()
    llm_api_key: str | None = field(
        default_factory=lambda: os.environ.get("LITRAG_LLM_API_KEY") or None
    )  # sent as a Bearer token (vllm serve --api-key); None: no key
    llm_temperature: float | None = field(
        default_factory=lambda: _env_number("LITRAG_LLM_TEMPERATURE", float)
    )  # answering temperature; None: 0.7 for a server (Qwen3's advice), 0 for the local model
    embed_model: str = field(default_factory=lambda: os.environ.get("LITRAG_EMBED_MODEL", "minilm"))
    segmenter: str | None = None  # None: litseg-lite when an LLM is configured, else offline
    workers: int = 4
    collection: str = DEFAULT_COLLECTION
    max_mb: float = 16.0
    # answering (litrag ask / chat)
    retrieval: str = field(default_factory=lambda: os.environ.get("LITRAG_RETRIEVAL", "embedded"))
    passage_order: str = field(
        default_factory=lambda: os.environ.get("LITRAG_PASSAGE_ORDER") or _default_order()
    )
    focus_words: int | None = field(
        default_factory=lambda: _env_number("LITRAG_FOCUS_WORDS", int)
    )  # words of each passage the LLM reads (0: whole); None: see focus_words()
    local_llm: str = field(
        default_factory=lambda: os.environ.get("LITRAG_LOCAL_LLM", "qwen2.5-1.5b")
    )
    llm_timeout: float | None = field(
        default_factory=lambda: _env_number("LITRAG_LLM_TIMEOUT", float)
    )  # seconds the LLM may be silent; None: 120 for a server URL, 900 for the local model
    llm_context: int = field(default_factory=lambda: _env_number("LITRAG_LLM_CONTEXT", int) or 4096)
    models_dir: Path | None = field(
        default_factory=lambda: (
            Path(os.environ["LITRAG_MODELS"]).expanduser()
            if os.environ.get("LITRAG_MODELS")
            else None
        )
    )  # where packaged models are assembled; None: <home>/models


class SettingsError(ValueError):
    """An environment variable holds a value litrag cannot use."""


# The clients an LLM can be reached through (``litrag.llm_backends`` builds them):
# openai-like: llama-index-llms-openai-like against any OpenAI-compatible server (vllm serve,
# llama.cpp); vllm: llama-index-llms-vllm (VllmServer against vllm serve, or in-process Vllm for
# segmentation); local: the packaged llama.cpp model, started on demand.
LLM_BACKENDS = ("openai-like", "vllm", "local")


def _env_choice(name: str, choices: tuple[str, ...]) -> str | None:
    """The value of ``name`` when it is one of ``choices`` (None when unset or empty)."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return None
    if raw not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def llm_backend(s: Settings) -> str:
    """The LLM client in use: the configured one, else ``openai-like`` when a server URL is set,
    else ``local`` (the packaged model)."""
    if s.llm_backend is not None:
        if s.llm_backend not in LLM_BACKENDS:
            raise SettingsError(
                f"the LLM backend must be one of {', '.join(LLM_BACKENDS)}, got {s.llm_backend!r}"
            )
        return s.llm_backend
    return "openai-like" if s.llm_url else "local"


def _env_number(name: str, kind: type[int] | type[float]) -> Any:
    """The number in environment variable ``name`` (None when unset or empty)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise SettingsError(f"{name} must be {what}, got {raw!r}") from None


def _default_order() -> str:
    from litrag.query.answer import DEFAULT_PASSAGE_ORDER

    return DEFAULT_PASSAGE_ORDER


DEFAULT_FOCUS_WORDS = 110


def focus_words(s: Settings) -> int:
    """Words per passage the answering LLM reads; 0 means whole passages.

    Default: focused excerpts for the packaged local model (a 1.5B model reading on two cores:
    shorter prompts are faster and it answers more questions right), whole passages for a
    configured server, whichever client reaches it (a large model with a long context reads
    whole scenes well).
    """
    if s.focus_words is not None:
        return max(s.focus_words, 0)
    return DEFAULT_FOCUS_WORDS if llm_backend(s) == "local" else 0
