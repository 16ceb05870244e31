"""A trained student in-process: a LlamaIndex chat LLM over a Hugging Face model folder.

For trying a student without a server (``LitSegNodeParser(llm=TransformersChatLLM(path))``);
production serves the folder with ``vllm serve`` and reaches it by URL. Generation runs in a
worker thread, one call at a time, so the parser's event loop stays responsive.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms.custom import CustomLLM


class TransformersChatLLM(CustomLLM):
    """Chat through the model's own chat template and ``generate`` (the ``distill`` extra)."""

    model_path: str = Field(description="A local Hugging Face model folder (merged student).")
    max_new_tokens: int = Field(default=2048, gt=0, description="Tokens generated per call.")
    temperature: float = Field(default=0.7, ge=0, description="0 decodes greedily.")
    top_p: float = Field(default=0.8, description="Nucleus sampling.")
    top_k: int = Field(default=20, description="Top-k sampling.")
    enable_thinking: bool = Field(default=False, description="Qwen3 templates' thinking flag.")
    context_window: int = Field(default=32768, description="Tokens the model reads.")

    _model: Any = PrivateAttr(default=None)
    _tokenizer: Any = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "TransformersChatLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name=self.model_path,
            is_chat_model=True,
            context_window=self.context_window,
            num_output=self.max_new_tokens,
        )

    def _load(self) -> None:
        if self._model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model_path)
            self._model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype="auto")
            self._model.eval()

    def _generate(self, messages: Sequence[ChatMessage]) -> tuple[str, int, int]:
        import torch

        with self._lock:
            self._load()
            chat = [{"role": m.role.value, "content": m.content or ""} for m in messages]
            ids = self._tokenizer.apply_chat_template(
                chat,
                add_generation_prompt=True,
                enable_thinking=self.enable_thinking,
                return_tensors="pt",
                return_dict=True,
            )
            sample = self.temperature > 0
            options: dict[str, Any] = {"do_sample": sample}
            if sample:
                options.update(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)
            with torch.no_grad():
                out = self._model.generate(
                    **ids,
                    max_new_tokens=self.max_new_tokens,
                    pad_token_id=self._tokenizer.pad_token_id or self._tokenizer.eos_token_id,
                    **options,
                )
            n_in = ids["input_ids"].shape[1]
            new = out[0, n_in:]
            return self._tokenizer.decode(new, skip_special_tokens=True), n_in, int(new.shape[0])

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text, p, c = self._generate(messages)
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            additional_kwargs={"prompt_tokens": p, "completion_tokens": c},
        )

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await asyncio.to_thread(self.chat, messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        r = self.chat([ChatMessage(role=MessageRole.USER, content=prompt)])
        return CompletionResponse(text=r.message.content or "")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        r = self.complete(prompt)

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=r.text, delta=r.text)

        return gen()
