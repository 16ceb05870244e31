"""A scripted LlamaIndex LLM for driving rare paths (garbage, timeouts) — never the only test."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.custom import CustomLLM


class Sleep:
    """A scripted step that stalls the call (to trigger the caller's timeout)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Step = str | BaseException | Sleep | Callable[[list[ChatMessage]], str]


class ScriptedLLM(CustomLLM):
    """Replies with the next scripted step each call; records every request it saw."""

    model: str = "scripted"
    _steps: list[Step] = PrivateAttr(default_factory=list)
    _requests: list[list[ChatMessage]] = PrivateAttr(default_factory=list)

    def __init__(self, steps: Sequence[Step], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steps = list(steps)

    @property
    def requests(self) -> list[list[ChatMessage]]:
        return self._requests

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model, is_chat_model=True)

    def _next(self, messages: list[ChatMessage]) -> Step:
        self._requests.append(list(messages))
        if not self._steps:
            raise AssertionError("scripted LLM ran out of replies")
        step = self._steps.pop(0)
        return step(messages) if callable(step) and not isinstance(step, BaseException) else step

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        step = self._next(list(messages))
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            step = "{}"
        if isinstance(step, BaseException):
            raise step
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=step))

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return asyncio.run(self.achat(messages, **kwargs))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError
