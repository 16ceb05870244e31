"""Settings from the environment, and the one place that builds models and stores from them.

Every backend is chosen here (environment variables or CLI flags), never by editing code:
``LITRAG_HOME`` (data directory), ``QDRANT_URL`` / ``QDRANT_API_KEY`` (a Qdrant server instead
of the embedded store), ``LITRAG_LLM_URL`` / ``LITRAG_LLM_MODEL`` (an OpenAI-compatible server
such as ``vllm serve``), ``LITRAG_EMBED_MODEL`` (``minilm`` or a sentence-transformers folder).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litrag import settings

DEFAULT_COLLECTION = "litrag"


@dataclass
class Settings:
    home: Path = field(default_factory=settings.home)
    qdrant_url: str | None = field(default_factory=lambda: os.environ.get("QDRANT_URL") or None)
    qdrant_api_key: str | None = field(default_factory=lambda: os.environ.get("QDRANT_API_KEY"))
    llm_url: str | None = field(default_factory=lambda: os.environ.get("LITRAG_LLM_URL") or None)
    llm_model: str = field(default_factory=lambda: os.environ.get("LITRAG_LLM_MODEL", "local"))
    embed_model: str = field(default_factory=lambda: os.environ.get("LITRAG_EMBED_MODEL", "minilm"))
    segmenter: str | None = None  # None: litseg-lite when an LLM is configured, else offline
    workers: int = 4
    collection: str = DEFAULT_COLLECTION
    max_mb: float = 16.0


def build_embed_model(s: Settings) -> Any:
    from litrag.embeddings import WindowedEmbedding, minilm_path

    path = minilm_path() if s.embed_model == "minilm" else Path(s.embed_model)
    return WindowedEmbedding(path, embed_batch_size=32)


def build_llm(s: Settings) -> Any:
    if not s.llm_url:
        return None
    from litrag.local_llm import openai_like

    return openai_like(s.llm_url, s.llm_model, timeout=600)


def build_parser(s: Settings, llm: Any = None) -> Any:
    from litrag.embeddings import embedding_tokenizer, minilm_path
    from litrag.segment import LitSegNodeParser

    path = minilm_path() if s.embed_model == "minilm" else Path(s.embed_model)
    return LitSegNodeParser(
        llm=llm,
        segmenter=s.segmenter,  # type: ignore[arg-type]
        tokenizer=embedding_tokenizer(path),
        num_workers=s.workers,
        cache_dir=str(s.home / "cache") if llm is not None else None,
    )


def build_library(s: Settings) -> Any:
    from litrag.ingestion.library import Library
    from litrag.query.stores import make_vector_store

    embed = build_embed_model(s)
    parser = build_parser(s, build_llm(s))
    dim = len(embed.get_text_embedding("dimension probe"))
    store = make_vector_store(
        s.home, s.collection, dense_dim=dim, url=s.qdrant_url, api_key=s.qdrant_api_key
    )
    return Library(s.home, store, embed, parser, max_bytes=int(s.max_mb * 1024 * 1024))
