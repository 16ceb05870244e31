"""Embeddings on disk: every run of the harness, with any chunker, reuses what was computed.

``CachedEmbedder`` embeds through an ``EmbeddingCache`` (SQLite) and loads its model only when
something is missing; ``CachedEmbedding`` puts it behind LlamaIndex's ``BaseEmbedding`` for the
chunkers that embed.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

Say = Callable[[str], None]


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors on disk (SQLite) keyed by model, kind (text/query/sentence) and text hash.

    Why SQLite: concurrent-safe appends, committed batch by batch, so a killed run keeps what it
    computed; one file that any later run, with any chunker, reuses.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=120)  # runs may share it
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS emb (model TEXT, kind TEXT, key TEXT, vec BLOB, "
            "PRIMARY KEY (model, kind, key))"
        )
        self._db.commit()

    def get(self, model: str, kind: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):
            part = uniq[i : i + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT key, vec FROM emb WHERE model=? AND kind=? AND key IN ({marks})",
                [model, kind, *part],
            )
            out.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return out

    def put(self, model: str, kind: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO emb VALUES (?, ?, ?, ?)",
            [(model, kind, k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()


class CachedEmbedder:
    """Embeds through the disk cache; the model is loaded only if something is missing.

    ``computed`` / ``cached`` count texts (not windows), so a test can assert that a second run
    computes nothing.
    """

    def __init__(
        self,
        cache: EmbeddingCache,
        model_key: str,
        load: Callable[[], Any],
        batch: int = 256,
        say: Say | None = None,
    ) -> None:
        self.cache, self.model_key, self._load, self.batch = cache, model_key, load, batch
        self._model: Any = None
        self.computed = 0
        self.cached = 0
        self.seconds = 0.0
        self._say = say or (lambda _m: None)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = self._load()
        return self._model

    def embed(self, texts: Sequence[str], kind: str = "text") -> np.ndarray:
        """Unit vectors, one row per text; ``kind`` "query" uses the model's query view."""
        keys = [text_key(t) for t in texts]
        have = self.cache.get(self.model_key, kind, keys)
        missing = list(dict.fromkeys(k for k in keys if k not in have))
        self.cached += len(texts) - sum(1 for k in keys if k not in have)
        if missing:
            t0 = time.perf_counter()
            text_of = dict(zip(keys, texts, strict=True))
            for i in range(0, len(missing), self.batch):
                part = missing[i : i + self.batch]
                batch = [text_of[k] for k in part]
                if kind == "query" and hasattr(self.model, "_embed"):  # WindowedEmbedding: batched
                    vecs = self.model._embed(batch, self.model.query_instruction)
                elif kind == "query":
                    vecs = [self.model.get_query_embedding(t) for t in batch]
                else:
                    vecs = self.model.get_text_embedding_batch(batch)
                arr = np.asarray(vecs, dtype=np.float32)
                self.cache.put(self.model_key, kind, zip(part, arr, strict=True))
                have.update(zip(part, arr, strict=True))
                if len(missing) > self.batch:
                    self._say(f"    embedded {min(i + self.batch, len(missing))}/{len(missing)}")
            missing_set = set(missing)
            self.computed += sum(1 for k in keys if k in missing_set)
            self.seconds += time.perf_counter() - t0
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([have[k] for k in keys])


def windowed_minilm_embedder(
    cache: EmbeddingCache, model_path: str | Path | None = None, say: Say | None = None
) -> CachedEmbedder:
    """The packaged MiniLM (or a sentence-transformers folder), windowed, through the cache.

    The runtime follows ``LITRAG_EMBED_BACKEND`` / ``LITRAG_EMBED_PRECISION`` as an ingest does.
    torch and OpenVINO f32 vectors agree to 1e-6 and share cache entries; bf16 ones are kept apart.
    """
    from litrag.models.embedders import minilm_path
    from litrag.settings import Settings

    path = Path(model_path) if model_path else minilm_path()
    name = path.name if model_path else "all-MiniLM-L6-v2"
    s = Settings()

    def load() -> Any:
        from litrag.builders import build_embed_model

        return build_embed_model(s, path)

    # windows of the model's max length - 2 word pieces, stride 32 (WindowedEmbedding's defaults)
    bf16 = ", openvino bf16" if s.embed_precision == "bf16" and s.embed_backend != "torch" else ""
    return CachedEmbedder(cache, f"{name} (windowed, stride 32{bf16})", load, say=say)


def nomic_embedder(cache: EmbeddingCache, say: Say | None = None) -> CachedEmbedder:
    """nomic-embed-text-v1.5 (the ``quality`` preset's quantisation) through the cache: whole
    texts with its ``search_document: `` / ``search_query: `` prefixes, no windows needed."""
    from litrag.models.nomic import DEFAULT_QUANT
    from litrag.models.nomic_files import NOMIC_NAME

    def load() -> Any:
        from litrag.builders import build_embed_model
        from litrag.settings import Settings

        return build_embed_model(Settings(embed_model="nomic"))

    # embedding a text costs ~0.4 s on 2 cores: commit to the cache every 32
    key = f"{NOMIC_NAME} {DEFAULT_QUANT} (search_document / search_query)"
    return CachedEmbedder(cache, key, load, batch=32, say=say)


def harness_embedder(cache: EmbeddingCache, name: str, say: Say | None = None) -> CachedEmbedder:
    """The harness's embedder by name: ``minilm`` (windowed, the default), ``nomic``, or a
    sentence-transformers folder."""
    if name == "nomic":
        return nomic_embedder(cache, say)
    return windowed_minilm_embedder(cache, None if name == "minilm" else name, say)


class CachedEmbedding(BaseEmbedding):
    """A LlamaIndex embedding over a ``CachedEmbedder``: chunkers that embed (the semantic
    splitter) share the harness's model and its disk cache, so a rerun embeds nothing."""

    _embedder: CachedEmbedder = PrivateAttr()

    def __init__(self, embedder: CachedEmbedder, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", embedder.model_key)
        kwargs.setdefault("embed_batch_size", 2048)  # the cache batches for the model itself
        super().__init__(**kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedding"

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed([query], kind="query")[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
