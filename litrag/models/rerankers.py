"""Qwen3-Reranker as a LlamaIndex node postprocessor.

Qwen3-Reranker is a causal LM asked "does this Document meet the Query and Instruct? yes/no"; the
relevance score is P(yes) from the last-token logits restricted to the "yes" and "no" tokens. This
follows the model card's transformers recipe token for token: the chat prefix and suffix are
tokenised on their own, the formatted pair is truncated to what is left of ``max_length`` *before*
they are added (so the suffix, which holds the question to the model, is never cut; the document's
tail is), and batches are padded on the left so the last position is every row's last real token.

Two departures that change cost, not scores: only the last position's logits are computed
(``logits_to_keep=1``; the full ``[batch, length, vocab]`` tensor of a 151k vocabulary is gigabytes)
and position ids are taken from the attention mask, so a padded row sees the same positions as it
would alone (RoPE makes that equal in exact arithmetic anyway; in bf16 it keeps batched scores
equal to one-by-one scores). Candidates are batched longest first to keep padding small.

Scores: ``postprocess_nodes`` returns *new* ``NodeWithScore`` objects whose ``score`` is P(yes),
sorted by it (ties keep the retrieval order), cut to ``top_n``. The input list and its nodes are not
touched, so the caller still holds the retrieval scores; nothing is written into node metadata.
``score(query, texts)`` gives the raw probabilities for evaluation and benchmarks.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

if TYPE_CHECKING:
    import torch

dispatcher = get_dispatcher(__name__)

SYSTEM_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
    'the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
)
ASSISTANT_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
PAIR_TEMPLATE = "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}"
LITERARY_INSTRUCTION = (
    "Given a literary question, retrieve relevant literature text chunks that answer the question."
)
_DTYPES = ("auto", "float32", "bfloat16", "float16")


def resolve_device(device: str) -> str:
    """``auto`` means the GPU when torch sees one, else the CPU."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    """``auto``: bf16 on a GPU (the checkpoints' dtype), fp32 on a CPU (where bf16 is slow)."""
    import torch

    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


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

    _model: Any = PrivateAttr()
    _tokenizer: Any = PrivateAttr()
    _prefix_ids: list[int] = PrivateAttr()
    _suffix_ids: list[int] = PrivateAttr()
    _yes_id: int = PrivateAttr()
    _no_id: int = PrivateAttr()
    _pad_id: int = PrivateAttr()
    _keep_last_only: bool = PrivateAttr()

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: Any = None,
        tokenizer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model_path=str(model_path) if model_path else None, **kwargs)
        resolve_dtype(self.dtype, "cpu")  # validate early, before any weights are read
        if model is None or tokenizer is None:
            if model is not None or tokenizer is not None:
                raise ValueError("pass both model and tokenizer, or neither")
            if not self.model_path:
                raise ValueError("Qwen3Reranker needs model_path (a local checkpoint folder)")
            model, tokenizer = self._load(self.model_path)
        else:
            # A caller's model: moved / cast only where a setting asks for it.
            if self.device != "auto" or self.dtype != "auto":
                device = resolve_device(self.device)
                model = model.to(device=device, dtype=resolve_dtype(self.dtype, device))
        self._attach(model.eval(), tokenizer)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, **kwargs: Any) -> Qwen3Reranker:
        """Wrap an already built causal LM and tokenizer (tests, or a model shared with others)."""
        return cls(model=model, tokenizer=tokenizer, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "Qwen3Reranker"

    def _load(self, path: str) -> tuple[Any, Any]:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"reranker checkpoint folder not found: {path}")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = resolve_device(self.device)
        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left", local_files_only=True)
        extra = (
            {"attn_implementation": self.attn_implementation} if self.attn_implementation else {}
        )
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=resolve_dtype(self.dtype, device), local_files_only=True, **extra
        )
        return model.to(device), tokenizer

    def _attach(self, model: Any, tokenizer: Any) -> None:
        def token_id(token: str) -> int:
            tid = tokenizer.convert_tokens_to_ids(token)
            if tid is None or (tid == tokenizer.unk_token_id and token != tokenizer.unk_token):
                raise ValueError(
                    f"the tokenizer has no single token {token!r}; not a Qwen3 reranker"
                )
            return int(tid)

        self._model = model
        self._tokenizer = tokenizer
        self._prefix_ids = tokenizer.encode(SYSTEM_PREFIX, add_special_tokens=False)
        self._suffix_ids = tokenizer.encode(ASSISTANT_SUFFIX, add_special_tokens=False)
        self._yes_id = token_id("yes")
        self._no_id = token_id("no")
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id
        self._pad_id = int(pad) if pad is not None else 0
        self._keep_last_only = "logits_to_keep" in inspect.signature(model.forward).parameters
        if self.pair_budget <= 0:
            raise ValueError(
                f"max_length={self.max_length} leaves no room beside the prompt's "
                f"{len(self._prefix_ids) + len(self._suffix_ids)} prefix/suffix tokens"
            )

    @property
    def model(self) -> Any:
        return self._model

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def pair_budget(self) -> int:
        """Tokens left for ``<Instruct>/<Query>/<Document>`` once prefix and suffix are counted."""
        return self.max_length - len(self._prefix_ids) - len(self._suffix_ids)

    def format_pair(self, query: str, doc: str) -> str:
        return PAIR_TEMPLATE.format(instruction=self.instruction, query=query, doc=doc)

    def encode(self, query: str, docs: Sequence[str]) -> list[list[int]]:
        """Full prompt ids per document: prefix + pair cut to the budget + the whole suffix."""
        pairs = [self.format_pair(query, d) for d in docs]
        budget = self.pair_budget
        enc = self._tokenizer(
            pairs, add_special_tokens=False, return_attention_mask=False, verbose=False
        )
        return [self._prefix_ids + ids[:budget] + self._suffix_ids for ids in enc["input_ids"]]

    def score(self, query: str, docs: Sequence[str]) -> list[float]:
        """P(yes) per document, in the order given."""
        import torch

        if not docs:
            return []
        prompts = self.encode(query, docs)
        order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
        scores = [0.0] * len(prompts)
        device = next(self._model.parameters()).device
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                probs = self._score_batch([prompts[i] for i in idx], device)
                for i, p in zip(idx, probs, strict=True):
                    scores[i] = p
        return scores

    def _score_batch(self, prompts: list[list[int]], device: torch.device) -> list[float]:
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding: the last column is every row's last token
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if self._keep_last_only else {}
        out = self._model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            use_cache=False,
            **kwargs,
        )
        last = out.logits[:, -1, :].float()
        pair = torch.stack([last[:, self._yes_id], last[:, self._no_id]], dim=1)
        return torch.softmax(pair, dim=1)[:, 0].tolist()

    def _model_name(self) -> str:
        if self.model_path:
            return Path(self.model_path).name
        return str(getattr(getattr(self._model, "config", None), "_name_or_path", "") or "qwen3")

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("Qwen3Reranker needs the query (query_bundle)")
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle,
                nodes=nodes,
                top_n=self.top_n if self.top_n is not None else len(nodes),
                model_name=self._model_name(),
            )
        )
        if not nodes:
            dispatcher.event(ReRankEndEvent(nodes=[]))
            return []
        with self.callback_manager.event(
            CBEventType.RERANKING,
            payload={
                EventPayload.NODES: nodes,
                EventPayload.MODEL_NAME: self._model_name(),
                EventPayload.QUERY_STR: query_bundle.query_str,
                EventPayload.TOP_K: self.top_n,
            },
        ) as event:
            docs = [n.node.get_content(metadata_mode=self.metadata_mode) for n in nodes]
            scores = self.score(query_bundle.query_str, docs)
            ranked = sorted(
                (NodeWithScore(node=n.node, score=s) for n, s in zip(nodes, scores, strict=True)),
                key=lambda n: -(n.score or 0.0),
            )
            kept = ranked if self.top_n is None else ranked[: self.top_n]
            event.on_end(payload={EventPayload.NODES: kept})
        dispatcher.event(ReRankEndEvent(nodes=kept))
        return kept
