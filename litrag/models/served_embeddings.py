"""Embeddings from a served model: any OpenAI-compatible ``/v1/embeddings`` (``vllm serve
Qwen/Qwen3-Embedding-8B``, llama.cpp's server started with ``--embedding``, infinity).

LlamaIndex's ``OpenAILikeEmbedding`` does the talking (batches, the openai client's retries with
exponential backoff, a timeout); what it lacks is said here: the instruction or prefix a
retrieval embedder wants on each side (Qwen3-Embedding's ``Instruct: ...\\nQuery:`` on queries
only, nomic's ``search_query:`` / ``search_document:``, e5's ``query:`` / ``passage:``), unit
vectors whatever the server returns (the stores rank by cosine; a server's pooling may not
normalise), the model's name taken from the server when it serves one model, and one line naming
the server when it cannot be reached or answers with another dimension than the library's.
"""

from __future__ import annotations

import math
from typing import ClassVar

from llama_index.core.bridge.pydantic import Field
from llama_index.embeddings.openai_like import OpenAILikeEmbedding

from litrag.models.served import ModelListError, listed_models, only_model

# The LitSeg paper's retrieval instruction (Qwen3-Embedding, queries only; documents plain).
QWEN3_QUERY = (
    "Instruct: Given a literary question, retrieve relevant literature text chunks that answer "
    "the question\nQuery:"
)
# (query prefix, document prefix) by what the served model's name holds, first match wins.
KNOWN_PREFIXES: tuple[tuple[str, tuple[str, str]], ...] = (
    ("qwen3-embedding", (QWEN3_QUERY, "")),
    ("nomic-embed", ("search_query: ", "search_document: ")),
    ("e5-", ("query: ", "passage: ")),
    ("bge-", ("Represent this sentence for searching relevant passages: ", "")),
)


class ServedEmbeddingError(RuntimeError):
    """The embedding server cannot be used as configured; the message is one line naming it."""


def prefixes_for(model: str) -> tuple[str, str]:
    """The (query, document) prefixes a served model's family expects; none for the unknown."""
    name = model.lower()
    return next((p for key, p in KNOWN_PREFIXES if key in name), ("", ""))


def served_models(url: str, api_key: str | None = None, timeout: float = 10.0) -> list[str]:
    """The model ids the server at ``url`` (its ``/v1`` base) lists."""
    try:
        return listed_models(
            url, api_key, timeout, what="embedding server", key_var="LITRAG_EMBED_API_KEY"
        )
    except ModelListError as exc:
        raise ServedEmbeddingError(f"LITRAG_EMBED_URL: {exc}") from None


def choose_model(url: str, wanted: str | None, api_key: str | None, timeout: float) -> str:
    """``wanted``, else the server's only model; the models listed when it serves several."""
    if wanted:
        return wanted
    try:
        return only_model(url, served_models(url, api_key, timeout))
    except ModelListError as exc:
        raise ServedEmbeddingError(
            f"LITRAG_EMBED_SERVED_MODEL: {exc}; name the one to embed with"
        ) from None


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else vector


class ServedEmbedding(OpenAILikeEmbedding):
    """An OpenAI-compatible embedding server, with the model family's prefixes and unit vectors."""

    # Reads a passage whole (the server's context): the store keeps no sentence windows.
    reads_whole: ClassVar[bool] = True
    served: ClassVar[bool] = True  # the library records it as served (ingestion.embedder_record)
    query_prefix: str = Field(default="", description="Put before every question embedded.")
    document_prefix: str = Field(default="", description="Put before every passage embedded.")

    @classmethod
    def class_name(cls) -> str:
        return "LitragServedEmbedding"

    @classmethod
    def from_server(
        cls,
        url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        batch_size: int = 32,
        timeout: float = 60.0,
        max_retries: int = 3,
    ) -> ServedEmbedding:
        """The server at ``url`` (its ``/v1`` base): ``model`` or its only one, the family's
        prefixes unless given; one probe call, so a dead or odd server fails here, named."""
        name = choose_model(url, model, api_key, min(timeout, 10.0))
        q, d = prefixes_for(name)
        embed = cls(
            model_name=name,
            api_base=url.rstrip("/"),
            api_key=api_key or "none",
            embed_batch_size=batch_size,
            timeout=timeout,
            max_retries=max_retries,
            query_prefix=q if query_prefix is None else query_prefix,
            document_prefix=d if document_prefix is None else document_prefix,
        )
        embed.probe()
        return embed

    def probe(self) -> int:
        """The served dimension (one short call); a failure is one line naming the server."""
        try:
            return len(self._get_text_embedding("dimension probe"))
        except Exception as exc:  # the openai client's errors, after its retries
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            raise ServedEmbeddingError(
                f"LITRAG_EMBED_URL: the embedding server at {self.api_base} failed to embed with "
                f"{self.model_name!r} ({type(exc).__name__}: {first})"
            ) from None

    def check_dimension(self, expected: int) -> None:
        """Refuse a server whose vectors do not fit the library's (another model)."""
        got = self.probe()
        if got != expected:
            raise ServedEmbeddingError(
                f"LITRAG_EMBED_URL: {self.model_name} at {self.api_base} gives {got}-d vectors, "
                f"the library holds {expected}-d ones: serve the model that built it, or embed "
                "the library again (litrag reembed)"
            )

    # The prefixes go on here, the unit length comes off the server's answer.
    def _get_query_embedding(self, query: str) -> list[float]:
        return unit(super()._get_query_embedding(self.query_prefix + query))

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return unit(await super()._aget_query_embedding(self.query_prefix + query))

    def _get_text_embedding(self, text: str) -> list[float]:
        return unit(super()._get_text_embedding(self.document_prefix + text))

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return unit(await super()._aget_text_embedding(self.document_prefix + text))

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        got = super()._get_text_embeddings([self.document_prefix + t for t in texts])
        return [unit(v) for v in got]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        got = await super()._aget_text_embeddings([self.document_prefix + t for t in texts])
        return [unit(v) for v in got]
