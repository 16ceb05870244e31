"""A LlamaIndex LLM for a packaged model whose llama.cpp server starts on the first call.

Why: a run whose every call is already in the reply cache (``litrag assets`` rerun, ``litrag
ingest --assets`` resuming) never calls the LLM, so it should not pay the server's start (about
20 s on 2 cores) nor hold its memory. The cache sits in front of the LLM (``LLMCaller``), so the
first cache miss is the first call here: that is when the server starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms import LLM

from litrag.models.llama_server import LlamaServer


class LazyServerLLM(LLM):
    """Starts its server on the first request and answers through the client built for it;
    ``close()`` stops the server if it was ever started."""

    # Both clients litrag builds for a server (OpenAILike, VllmChatServer) take OpenAI's
    # request fields, so the segmentation and asset callers send their sampling settings.
    accepts_openai_kwargs: ClassVar[bool] = True

    model: str = Field(default="local", description="The packaged model's CLI name.")
    context_window: int = Field(default=4096, description="The server's n_ctx.")
    _start: Callable[[], LlamaServer] = PrivateAttr()
    _make_client: Callable[[LlamaServer], LLM] = PrivateAttr()
    _server: LlamaServer | None = PrivateAttr(default=None)
    _client: LLM | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    def __init__(
        self,
        start: Callable[[], LlamaServer],
        make_client: Callable[[LlamaServer], LLM],
        **kwargs: Any,
    ) -> None:
        """``start``: builds and starts the server (finding the model file is part of it, so a
        missing model is an error only when a call needs it); ``make_client``: the LLM that
        talks to the started server."""
        super().__init__(**kwargs)
        self._start = start
        self._make_client = make_client

    @classmethod
    def class_name(cls) -> str:
        return "LazyServerLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window, is_chat_model=True, model_name=self.model
        )

    @property
    def server(self) -> LlamaServer | None:
        """The server, once a call started it."""
        return self._server

    def client(self) -> LLM:
        """The started server's client (starting the server on the first call)."""
        with self._lock:
            if self._client is None:
                self._server = self._start()
                self._client = self._make_client(self._server)
            return self._client

    async def _aclient(self) -> LLM:
        if self._client is not None:
            return self._client
        # Off the event loop: calls answered from the cache go on while the server starts.
        return await asyncio.to_thread(self.client)

    def close(self) -> None:
        """Stop the server (if it was started)."""
        with self._lock:
            server, self._server, self._client = self._server, None, None
        if server is not None:
            server.stop()

    # -- LLM, by delegation ------------------------------------------------------------------
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.client().chat(messages, **kwargs)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self.client().stream_chat(messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.client().complete(prompt, formatted=formatted, **kwargs)

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        return self.client().stream_complete(prompt, formatted=formatted, **kwargs)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await (await self._aclient()).achat(messages, **kwargs)

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        return await (await self._aclient()).astream_chat(messages, **kwargs)

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return await (await self._aclient()).acomplete(prompt, formatted=formatted, **kwargs)

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        client = await self._aclient()
        return await client.astream_complete(prompt, formatted=formatted, **kwargs)
