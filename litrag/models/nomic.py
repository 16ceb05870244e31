"""nomic-embed-text-v1.5 through llama.cpp: the ``quality`` embedder.

Stronger than the packaged MiniLM as a retriever (768-d, trained for asymmetric search with task
prefixes) and it reads 8,192 tokens, so a block or a paragraph child is embedded whole: no
windows, nothing truncated. The price is speed on a CPU (a few passages a second on 2 cores
against MiniLM's ~25), measured in docs/lab/. The GGUF is assembled from registry packages
by ``litrag.models.nomic_files``; nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from litrag.models.nomic_files import NOMIC_NAME, QUALITY_EXTRA, NomicModelError, quantized_path

DEFAULT_QUANT = "q8_0"  # measured against f16 and Q4_K_M: docs/lab/ (issue 30)


class NomicEmbedding(BaseEmbedding):
    """nomic-embed-text-v1.5 (GGUF) on llama-cpp-python, L2-normalised, with its prefixes."""

    model_path: str = Field(description="The GGUF file (see litrag.models.nomic_files).")
    quant: str = Field(
        default=DEFAULT_QUANT,
        description="Which copy runs: 'f16' (as shipped), 'q8_0' or 'q4_k_m' (made from it).",
    )
    n_ctx: int = Field(
        default=2048,
        ge=64,
        description="Tokens one text may hold: a capped block (512 word pieces) with its "
        "metadata fits with room to spare, so nothing needs windows.",
    )
    n_threads: int | None = Field(
        default=None, description="CPU threads; None: every core the process may use."
    )
    texts_per_call: int = Field(
        default=1,
        ge=1,
        description="Texts decoded together in one llama.cpp batch; one at a time measured "
        "fastest on a CPU (no padding, no cross-sequence masking).",
    )
    query_prefix: str = Field(
        default="search_query: ", description="Task prefix of a question (nomic's convention)."
    )
    text_prefix: str = Field(
        default="search_document: ", description="Task prefix of a stored passage."
    )
    _llama: Any = PrivateAttr(default=None)

    def __init__(self, model_path: str | Path | None = None, **kwargs: Any) -> None:
        quant = kwargs.get("quant", DEFAULT_QUANT)
        path = str(model_path or quantized_path(quant))
        kwargs.setdefault("model_name", f"{NOMIC_NAME} {quant}")
        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(model_path=path, **kwargs)
        self._llama = self._load()

    @classmethod
    def class_name(cls) -> str:
        return "NomicEmbedding"

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise NomicModelError(
                f"{NOMIC_NAME} runs on llama-cpp-python; install it with {QUALITY_EXTRA}"
            ) from exc
        threads = self.n_threads or len(os.sched_getaffinity(0))
        return Llama(
            model_path=self.model_path,
            embedding=True,
            n_ctx=self.n_ctx,
            n_batch=self.n_ctx,
            n_ubatch=self.n_ctx,  # an encoder reads a whole text in one micro-batch
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )

    def tokens(self, text: str) -> int:
        """Tokens the model reads for ``text`` (its special tokens included)."""
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        """Unit vectors of ``prefix + text``; a text over ``n_ctx`` tokens is refused, never cut."""
        pieces = [prefix + t for t in texts]
        for piece in pieces:
            n = self.tokens(piece)
            if n > self.n_ctx:
                raise ValueError(
                    f"a text of {n} tokens exceeds the embedder's n_ctx={self.n_ctx}: "
                    "raise NomicEmbedding(n_ctx=...)"
                )
        rows: list[list[float]] = []
        step = self.texts_per_call
        for i in range(0, len(pieces), step):
            rows.extend(self._llama.embed(pieces[i : i + step], normalize=False, truncate=False))
        out = np.asarray(rows, dtype=np.float32).reshape(len(pieces), -1)
        out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-12
        return out

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.embed(texts, self.text_prefix).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.embed([text], self.text_prefix)[0].tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.embed([query], self.query_prefix)[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embedding(text)


@lru_cache(maxsize=2)
def _vocab(path: str) -> Any:
    import atexit

    from llama_cpp import Llama

    vocab = Llama(model_path=path, vocab_only=True, verbose=False)
    # freed before the interpreter tears llama_cpp down (else its finaliser fails noisily)
    atexit.register(vocab.close)
    return vocab


def nomic_tokenizer(model_path: str | Path) -> Callable[[str], list[int]]:
    """``text -> token ids`` with nomic's own vocabulary (the GGUF's, loaded without weights),
    no special tokens: the node parser's size cap then counts what the embedder reads."""
    vocab = _vocab(str(model_path))
    return lambda text: vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)


def reads_whole_texts(embed: Any) -> bool:
    """True for an embedder that takes a block whole (nomic: 2,048 tokens here): the store then
    keeps one vector per point, no sentence windows (they would multiply its slow ingest)."""
    return isinstance(embed, NomicEmbedding)
