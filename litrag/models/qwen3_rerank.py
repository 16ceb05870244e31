"""Qwen3-Reranker's weights and scoring: a local checkpoint loaded with transformers, and P(yes)
of query-document pairs. The node postprocessor that ranks retrieved nodes by these scores is
``litrag.retrieval.rerank.Qwen3Reranker``.

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

``score(query, texts)`` gives the raw probabilities (the postprocessor's ranking, evaluation and
benchmarks read them).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

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


class Qwen3RerankModel:
    """A Qwen3-Reranker causal LM and its tokenizer, ready to score query-document pairs.

    ``instruction``, ``max_length`` and ``batch_size`` shape the prompt and the forward passes,
    so they live with the weights; ranking nodes by the scores is the postprocessor's work.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        instruction: str = LITERARY_INSTRUCTION,
        max_length: int = 8192,
        batch_size: int = 8,
    ) -> None:
        def token_id(token: str) -> int:
            tid = tokenizer.convert_tokens_to_ids(token)
            if tid is None or (tid == tokenizer.unk_token_id and token != tokenizer.unk_token):
                raise ValueError(
                    f"the tokenizer has no single token {token!r}; not a Qwen3 reranker"
                )
            return int(tid)

        self.model = model.eval()
        self.tokenizer = tokenizer
        self.instruction = instruction
        self.max_length = max_length
        self.batch_size = batch_size
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

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        device: str = "auto",
        dtype: str = "auto",
        attn_implementation: str | None = None,
        **prompt: Any,
    ) -> Qwen3RerankModel:
        """A local checkpoint folder (never downloaded), on ``device`` in ``dtype``."""
        resolve_dtype(dtype, "cpu")  # validate early, before any weights are read
        if not Path(path).is_dir():
            raise FileNotFoundError(f"reranker checkpoint folder not found: {path}")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        where = resolve_device(device)
        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left", local_files_only=True)
        extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=resolve_dtype(dtype, where), local_files_only=True, **extra
        )
        return cls(model.to(where), tokenizer, **prompt)

    @classmethod
    def wrap(
        cls, model: Any, tokenizer: Any, *, device: str = "auto", dtype: str = "auto", **prompt: Any
    ) -> Qwen3RerankModel:
        """An already built causal LM (tests, or one shared with others): moved / cast only where
        ``device`` or ``dtype`` asks for it."""
        resolve_dtype(dtype, "cpu")
        if device != "auto" or dtype != "auto":
            where = resolve_device(device)
            model = model.to(device=where, dtype=resolve_dtype(dtype, where))
        return cls(model, tokenizer, **prompt)

    @property
    def pair_budget(self) -> int:
        """Tokens left for ``<Instruct>/<Query>/<Document>`` once prefix and suffix are counted."""
        return self.max_length - len(self._prefix_ids) - len(self._suffix_ids)

    def name(self) -> str:
        """The checkpoint's name as transformers recorded it (``qwen3`` when it did not)."""
        return str(getattr(getattr(self.model, "config", None), "_name_or_path", "") or "qwen3")

    def format_pair(self, query: str, doc: str) -> str:
        return PAIR_TEMPLATE.format(instruction=self.instruction, query=query, doc=doc)

    def encode(self, query: str, docs: Sequence[str]) -> list[list[int]]:
        """Full prompt ids per document: prefix + pair cut to the budget + the whole suffix."""
        pairs = [self.format_pair(query, d) for d in docs]
        budget = self.pair_budget
        enc = self.tokenizer(
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
        device = next(self.model.parameters()).device
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
        out = self.model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            use_cache=False,
            **kwargs,
        )
        last = out.logits[:, -1, :].float()
        pair = torch.stack([last[:, self._yes_id], last[:, self._no_id]], dim=1)
        return torch.softmax(pair, dim=1)[:, 0].tolist()
