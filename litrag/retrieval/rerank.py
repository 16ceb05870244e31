"""Rerankers: LlamaIndex node postprocessors that reorder a retriever's candidates and keep the best
``top_n``. ``BookRetriever`` runs one on its spoiler-safe candidates (``BookRetriever.candidates``)
before cutting to ``top_k``; any ``BaseNodePostprocessor`` can take these ones' place.

- ``Qwen3Reranker``: Qwen3-Reranker's P(yes) (``litrag.models.qwen3_rerank`` loads the weights and
  scores the pairs).
- ``ServedReranker``: a ``/rerank`` server's ``relevance_score`` (``litrag.models.served_rerank``
  is the client); a failed call keeps the fused order and logs one warning.

Both return *new* ``NodeWithScore`` objects carrying the reranker's score, best first (ties keep
the order given); the input list and its nodes are not touched, so the caller still holds the
retrieval scores, and nothing is written into node metadata.

What is read: each candidate block's text as the answering LLM reads it (``MetadataMode.LLM``:
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from litrag.models.qwen3_rerank import LITERARY_INSTRUCTION, Qwen3RerankModel
from litrag.models.served_rerank import ServedRerankClient, ServedRerankError

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


def _reranked(
    reranker: BaseNodePostprocessor,
    nodes: list[NodeWithScore],
    query_bundle: QueryBundle | None,
    top_n: int | None,
    model_name: str,
    rank: Any,
) -> list[NodeWithScore]:
    """``rank(query, nodes, keep)`` inside LlamaIndex's rerank events and callback, so a
    reranker here is traced as any LlamaIndex reranker is."""
    if query_bundle is None:
        raise ValueError(f"{type(reranker).__name__} needs the query (query_bundle)")
    keep = top_n if top_n is not None else len(nodes)
    dispatcher.event(
        ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=keep, model_name=model_name)
    )
    if not nodes:
        dispatcher.event(ReRankEndEvent(nodes=[]))
        return []
    with reranker.callback_manager.event(
        CBEventType.RERANKING,
        payload={
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: model_name,
            EventPayload.QUERY_STR: query_bundle.query_str,
            EventPayload.TOP_K: top_n,
        },
    ) as event:
        kept = rank(query_bundle.query_str, nodes, keep)
        event.on_end(payload={EventPayload.NODES: kept})
    dispatcher.event(ReRankEndEvent(nodes=kept))
    return kept


class Qwen3Reranker(BaseNodePostprocessor):
    """Rerank retrieved nodes by Qwen3-Reranker's P(yes); keep the best ``top_n``."""

    model_path: str | None = Field(
        default=None,
        description="Local folder of a Qwen3-Reranker checkpoint (never downloaded); None when "
        "built with from_model().",
    )
    top_n: int | None = Field(
        default=5, description="Nodes kept after reranking (the paper: 5); None keeps all."
    )
    instruction: str = Field(
        default=LITERARY_INSTRUCTION,
        description="Task instruction put in the <Instruct> slot (the paper's literary one).",
    )
    max_length: int = Field(
        default=8192,
        description="Token budget of one whole prompt, prefix and suffix included; the document's "
        "tail is cut to fit.",
        gt=0,
    )
    batch_size: int = Field(default=8, description="Query-document pairs per forward pass.", gt=0)
    device: str = Field(default="auto", description="torch device: auto, cpu, cuda, cuda:1, ...")
    dtype: str = Field(
        default="auto",
        description="Weights dtype: auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16.",
    )
    attn_implementation: str | None = Field(
        default=None,
        description="transformers attention kernel (sdpa, flash_attention_2, eager); None lets "
        "transformers choose.",
    )
    metadata_mode: MetadataMode = Field(
        default=MetadataMode.LLM,
        description="Which view of a node is the Document: LLM (what the answering model reads), "
        "EMBED, ALL or NONE (text only).",
    )

    _scorer: Qwen3RerankModel = PrivateAttr()

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: Any = None,
        tokenizer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model_path=str(model_path) if model_path else None, **kwargs)
        prompt = {
            "instruction": self.instruction,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
        }
        where = {"device": self.device, "dtype": self.dtype}
        if model is None or tokenizer is None:
            if model is not None or tokenizer is not None:
                raise ValueError("pass both model and tokenizer, or neither")
            if not self.model_path:
                raise ValueError("Qwen3Reranker needs model_path (a local checkpoint folder)")
            self._scorer = Qwen3RerankModel.load(
                self.model_path, attn_implementation=self.attn_implementation, **where, **prompt
            )
        else:
            self._scorer = Qwen3RerankModel.wrap(model, tokenizer, **where, **prompt)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, **kwargs: Any) -> Qwen3Reranker:
        """Wrap an already built causal LM and tokenizer (tests, or a model shared with others)."""
        return cls(model=model, tokenizer=tokenizer, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "Qwen3Reranker"

    @property
    def scorer(self) -> Qwen3RerankModel:
        return self._scorer

    @property
    def model(self) -> Any:
        return self._scorer.model

    @property
    def tokenizer(self) -> Any:
        return self._scorer.tokenizer

    @property
    def pair_budget(self) -> int:
        return self._scorer.pair_budget

    def encode(self, query: str, docs: Sequence[str]) -> list[list[int]]:
        return self._scorer.encode(query, docs)

    def score(self, query: str, docs: Sequence[str]) -> list[float]:
        """P(yes) per document, in the order given (evaluation and benchmarks read these)."""
        return self._scorer.score(query, docs)

    def _model_name(self) -> str:
        return Path(self.model_path).name if self.model_path else self._scorer.name()

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        def rank(query: str, given: list[NodeWithScore], keep: int) -> list[NodeWithScore]:
            docs = [n.node.get_content(metadata_mode=self.metadata_mode) for n in given]
            scores = self.score(query, docs)
            ranked = sorted(
                (NodeWithScore(node=n.node, score=s) for n, s in zip(given, scores, strict=True)),
                key=lambda n: -(n.score or 0.0),
            )
            return ranked[:keep]

        return _reranked(self, nodes, query_bundle, self.top_n, self._model_name(), rank)


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

    _client: ServedRerankClient = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client = ServedRerankClient(self.url, self.model, self.api_key, self.timeout)

    @classmethod
    def class_name(cls) -> str:
        return "LitragServedReranker"

    def describe(self) -> str:
        """``MODEL at URL``: the retrieval line ``litrag ask`` prints names the reranker so."""
        return self._client.describe()

    def served_model(self) -> str:
        """``model``, else the server's only model (asked once, then remembered)."""
        return self._client.served_model()

    def rank(self, query: str, documents: list[str], top_n: int | None = None) -> list[tuple]:
        """``[(index, relevance_score), ...]`` best first; ``ServedRerankError`` otherwise."""
        return self._client.rank(query, documents, top_n)

    def score(self, query: str, documents: list[str]) -> list[float]:
        """The server's relevance score of every document, in the order given."""
        return self._client.score(query, documents)

    def close(self) -> None:
        self._client.close()

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        def rank(query: str, given: list[NodeWithScore], keep: int) -> list[NodeWithScore]:
            docs = [n.node.get_content(metadata_mode=self.metadata_mode) for n in given]
            try:
                ranked = self.rank(query, docs, keep)
            except ServedRerankError as exc:
                logger.warning(
                    "warning: the reranker at %s failed, the passages keep the fused order (%s)",
                    self.url,
                    exc,
                )
                return given[:keep]
            return [NodeWithScore(node=given[i].node, score=s) for i, s in ranked[:keep]]

        return _reranked(self, nodes, query_bundle, self.top_n, self.describe(), rank)
