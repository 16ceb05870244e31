"""Reranking by a served model: the Cohere/Jina ``/rerank`` schema that ``vllm serve
Qwen/Qwen3-Reranker-8B``, llama.cpp's ``llama-server --reranking`` and infinity all speak.

``POST {LITRAG_RERANK_URL}/rerank`` with ``{"model", "query", "documents": [...], "top_n"}``
answers ``{"results": [{"index", "relevance_score"}, ...]}``. ``LITRAG_RERANK_URL`` is the
server's ``/v1`` base, as ``LITRAG_EMBED_URL`` is: vLLM and llama.cpp answer ``/v1/rerank``.

Why a thin client of our own (httpx, already a dependency) rather than a LlamaIndex integration:
of the maintained postprocessors, only ``JinaRerank`` (llama-index-postprocessor-jinaai-rerank)
posts this schema to a base URL one can choose. It sends with ``requests`` and no timeout, so a
stalled server would hold the answer for ever; it reads an error reply as a missing ``detail``
key (a ``KeyError``); and it cannot take the model's name from the server. What litrag needs of a
reranker is the opposite of each: a time budget, and any failure (stalled, refused, an HTTP
error, a malformed reply) costing one warning line and the fused order, never the answer.
``CohereRerank`` goes through the cohere SDK (its own paths and schema version), the TEI one
speaks TEI's other schema (``texts``, ``score``).

What is sent: each candidate block's text as the answering LLM reads it (``MetadataMode.LLM``:
chapter title, book, the block), not the paragraph child that ranked it (``retrieval.evidence``).
The child was chosen by the first stage (MiniLM and BM25), whose mistakes the reranker is there
to correct: a block whose answering paragraph is not its best-scored child would be judged on the
wrong paragraph and sink. The block is also what the LLM reads, so its score is the score of the
reader's evidence. The cost is length: 20 blocks of a few hundred words each are ~10k tokens per
question, one batch for a served 0.6-8B cross-encoder on a GPU (Qwen3-Reranker reads 8k tokens a
pair; the paper reranks whole LitSeg blocks).
"""

from __future__ import annotations

import logging
import math

import httpx
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from litrag.models.served import ModelListError, listed_models, only_model

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


class ServedRerankError(RuntimeError):
    """The rerank server gave no usable ranking; the message is one line naming it and why."""


class ServedReranker(BaseNodePostprocessor):
    """Rerank nodes by a ``/rerank`` server's ``relevance_score``; keep the best ``top_n``.

    A failed call keeps the nodes in the order given (the fused order) and logs one warning
    naming the server and the cause: reranking improves an answer, it must never lose one.
    """

    url: str = Field(description="The server's /v1 base; requests go to {url}/rerank.")
    model: str | None = Field(
        default=None, description="The served model's name; None: the server's only model."
    )
    api_key: str | None = Field(
        default=None, exclude=True, repr=False, description="Sent as a Bearer token."
    )
    top_n: int | None = Field(
        default=5, ge=1, description="Nodes kept after reranking; None keeps all."
    )
    timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds to connect, and to wait for the reply's bytes, before the fused "
        "order is kept (httpx's timeout for each phase).",
    )
    metadata_mode: MetadataMode = Field(
        default=MetadataMode.LLM,
        description="Which view of a node is sent: LLM (what the answering model reads), EMBED, "
        "ALL or NONE (text only).",
    )

    _client: httpx.Client | None = PrivateAttr(default=None)
    _served_model: str | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "LitragServedReranker"

    def describe(self) -> str:
        """``MODEL at URL``: the retrieval line ``litrag ask`` prints names the reranker so."""
        return f"{self.model or self._served_model or 'the served reranker'} at {self.url}"

    # ------------------------------------------------------------------ the calls
    def _http(self) -> httpx.Client:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(self.timeout))
        return self._client

    def served_model(self) -> str:
        """``model``, else the server's only model (asked once, then remembered)."""
        if self.model:
            return self.model
        if self._served_model is None:
            try:
                listed = listed_models(
                    self.url,
                    self.api_key,
                    self.timeout,
                    what="rerank server",
                    key_var="LITRAG_RERANK_API_KEY",
                )
            except ModelListError as exc:
                raise ServedRerankError(str(exc)) from None
            try:
                self._served_model = only_model(self.url, listed)
            except ModelListError as exc:
                raise ServedRerankError(f"{exc}; name one with LITRAG_RERANK_MODEL") from None
        return self._served_model

    def rank(self, query: str, documents: list[str], top_n: int | None = None) -> list[tuple]:
        """``[(index, relevance_score), ...]`` best first (ties in the order given), as the
        server scores ``documents`` for ``query``; ``ServedRerankError`` (one line) otherwise."""
        if not documents:
            return []
        body = {
            "model": self.served_model(),
            "query": query,
            "documents": documents,
            "top_n": min(top_n or len(documents), len(documents)),
        }
        where = f"{self.url.rstrip('/')}/rerank"
        try:
            reply = self._http().post(where, json=body)
        except httpx.TimeoutException:
            raise ServedRerankError(f"no reply from {where} within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            first = (str(exc).splitlines() or [""])[0][:160]
            raise ServedRerankError(f"{where}: {type(exc).__name__}: {first}") from None
        if reply.status_code != 200:
            said = " ".join(reply.text.split())[:160]
            raise ServedRerankError(f"{where} answered HTTP {reply.status_code}: {said}")
        return _results(reply, where, len(documents))

    def score(self, query: str, documents: list[str]) -> list[float]:
        """The server's relevance score of every document, in the order given."""
        scores = [math.nan] * len(documents)
        for i, s in self.rank(query, documents):
            scores[i] = s
        return scores

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ------------------------------------------------------------------ the postprocessor
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("ServedReranker needs the query (query_bundle)")
        keep = self.top_n if self.top_n is not None else len(nodes)
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle, nodes=nodes, top_n=keep, model_name=self.describe()
            )
        )
        if not nodes:
            dispatcher.event(ReRankEndEvent(nodes=[]))
            return []
        with self.callback_manager.event(
            CBEventType.RERANKING,
            payload={
                EventPayload.NODES: nodes,
                EventPayload.MODEL_NAME: self.describe(),
                EventPayload.QUERY_STR: query_bundle.query_str,
                EventPayload.TOP_K: self.top_n,
            },
        ) as event:
            docs = [n.node.get_content(metadata_mode=self.metadata_mode) for n in nodes]
            try:
                ranked = self.rank(query_bundle.query_str, docs, keep)
            except ServedRerankError as exc:
                logger.warning(
                    "warning: the reranker at %s failed, the passages keep the fused order (%s)",
                    self.url,
                    exc,
                )
                kept = nodes[:keep]
            else:
                kept = [NodeWithScore(node=nodes[i].node, score=s) for i, s in ranked[:keep]]
            event.on_end(payload={EventPayload.NODES: kept})
        dispatcher.event(ReRankEndEvent(nodes=kept))
        return kept


def _results(reply: httpx.Response, where: str, count: int) -> list[tuple]:
    """The reply's ``(index, score)`` pairs, best first; a malformed reply is an error: an index
    out of range, twice, or a score that is no finite number would rank something at random."""
    try:
        results = reply.json()["results"]
        pairs = [(r["index"], r["relevance_score"]) for r in results]
    except (ValueError, KeyError, TypeError):
        raise ServedRerankError(
            f"{where} did not answer with results of index and relevance_score"
        ) from None
    seen: set[int] = set()
    for i, s in pairs:
        bad_index = isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < count
        bad_score = isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s)
        if bad_index or bad_score or i in seen:
            raise ServedRerankError(
                f"{where} answered a malformed result (index {i!r}, relevance_score {s!r}) for "
                f"{count} documents"
            )
        seen.add(i)
    return sorted(((i, float(s)) for i, s in pairs), key=lambda p: (-p[1], p[0]))
