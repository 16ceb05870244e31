"""The client of a served reranker: the Cohere/Jina ``/rerank`` schema that ``vllm serve
Qwen/Qwen3-Reranker-8B``, llama.cpp's ``llama-server --reranking`` and infinity all speak. The node
postprocessor that ranks retrieved nodes with it is ``litrag.retrieval.rerank.ServedReranker``.

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
"""

from __future__ import annotations

import math

import httpx

from litrag.models.served import ModelListError, listed_models, only_model


class ServedRerankError(RuntimeError):
    """The rerank server gave no usable ranking; the message is one line naming it and why."""


class ServedRerankClient:
    """Scores documents for a query at a ``/rerank`` server (``url`` is its ``/v1`` base).

    ``model`` None: the server's only model, asked once. ``timeout``: seconds to connect, and to
    wait for the reply's bytes (httpx's timeout for each phase).
    """

    def __init__(
        self, url: str, model: str | None = None, api_key: str | None = None, timeout: float = 10.0
    ) -> None:
        self.url = url
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self._client: httpx.Client | None = None
        self._served_model: str | None = None

    def describe(self) -> str:
        """``MODEL at URL``: the retrieval line ``litrag ask`` prints names the reranker so."""
        return f"{self.model or self._served_model or 'the served reranker'} at {self.url}"

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
