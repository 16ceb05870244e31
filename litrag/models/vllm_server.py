"""``llama-index-llms-vllm``'s ``VllmServer`` as litrag needs it: a real chat client for
``vllm serve``'s OpenAI API.

``VllmServer(openai_like=True)`` posts to a chat-completions URL, but as shipped (0.6-0.8) it
flattens a chat into one user message, reports a 3,900-token context window and
``is_chat_model=False``, ignores ``max_tokens=`` (only ``max_new_tokens=``), sends neither
``top_k`` nor ``response_format`` nor ``extra_body`` (Qwen3's thinking switch), blocks the event
loop in its async methods, fails on the ``: ping`` comments of llama.cpp's SSE stream, returns ""
when the URL is a ``/v1/completions`` endpoint, and raises ``requests`` errors that say little.
``VllmChatServer`` subclasses it and repairs exactly those, reusing the package's own payload
builder, request and reply readers. Importing this module also replaces the package's ``atexit``
hook, which runs ``import torch`` at exit and prints an ignored exception where torch is absent.

Import this module only through ``litrag.models.served`` (it needs the ``vllm`` extra).
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, ClassVar

import requests
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.llms.vllm import base as vllm_base
from llama_index.llms.vllm.utils import (
    get_openai_chat_response,
    get_openai_streaming_deltas,
    post_openai_chat_request,
)

VllmServer = vllm_base.VllmServer


def _release_cuda() -> None:
    """The package's exit hook, minus the crash: free CUDA memory only if torch was loaded."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()


_PACKAGE_HOOK = vllm_base.Vllm.__dict__.get("close")
if callable(_PACKAGE_HOOK):  # registered by `@atexit.register` in the class body
    atexit.unregister(_PACKAGE_HOOK)
    atexit.register(_release_cuda)


class LLMServerHTTPError(RuntimeError):
    """The server answered with an HTTP error status; ``status_code`` says which."""

    def __init__(self, status_code: int, detail: str, url: str) -> None:
        super().__init__(f"{detail} ({url})")
        self.status_code = status_code


class LLMEndpointError(ValueError):
    """The URL answers, but not as an OpenAI chat-completions endpoint."""


def _detail(response: requests.Response) -> str:
    """The server's own error message, in one line."""
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body))
        if isinstance(err, dict):
            err = err.get("message", err)
        body = err
    text = body if isinstance(body, str) else json.dumps(body)
    return " ".join(text.split())[:300] or response.reason or "no detail"


def _is_read_timeout(exc: BaseException) -> bool:
    """requests reports a read timeout mid-stream as a ConnectionError wrapping urllib3's."""
    inner = exc.args[0] if exc.args else None
    return isinstance(exc, requests.Timeout) or "ReadTimeoutError" in type(inner).__name__


def _translated(exc: requests.RequestException, url: str, timeout: float) -> Exception:
    """A ``requests`` error as the builtin (or litrag) error the rest of litrag understands."""
    if _is_read_timeout(exc):
        return TimeoutError(f"no reply from {url} within {timeout:g} s")
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        detail = _detail(exc.response)
        if not url.rstrip("/").endswith("/chat/completions"):
            detail = f"{detail}; {USE_CHAT_URL}"
        return LLMServerHTTPError(exc.response.status_code, detail, url)
    if isinstance(exc, requests.ConnectionError):
        return ConnectionError(f"connection to {url} failed")
    return exc


USE_CHAT_URL = (
    "point LITRAG_LLM_URL at the server's /v1 base (or its /v1/chat/completions URL), "
    "not /v1/completions"
)


class EmptyStreamError(LLMEndpointError):
    """The stream ended without one chunk. A non-chat endpoint does that, and so does
    llama.cpp's server failing inside its stream (a prompt longer than its window): the
    answer engine asks once more, not streamed, where the server says which (``empty_stream``
    marks it for callers that do not import this module)."""

    empty_stream = True


def completions_format_error(url: str, what: str) -> LLMEndpointError:
    kind = EmptyStreamError if what == "streamed nothing" else LLMEndpointError
    return kind(f"{url} {what}, not a chat completion: {USE_CHAT_URL}")


class _SSELines:
    """A streamed response's lines as they arrive, without SSE comments (llama.cpp's ``: ping``),
    which the package's stream reader would try to parse as JSON; notes what kind of chunks
    came."""

    def __init__(self, response: requests.Response, url: str) -> None:
        self.response = response
        self.url = url
        self.chunks = 0
        self.chat_chunks = 0

    def iter_lines(self, **kwargs: Any) -> Iterator[bytes]:
        if "chunked" not in self.response.headers.get("transfer-encoding", "").lower():
            # requests reads a stream without chunked encoding in 512-byte blocks: a short
            # reply would wait for the connection to close. Chunked streams (vllm serve,
            # llama.cpp) arrive chunk by chunk anyway.
            kwargs["chunk_size"] = 1
        for raw in self.response.iter_lines(**kwargs):
            line = raw.strip()
            if not line or line.startswith(b":"):
                continue
            body = line[5:].strip() if line.startswith(b"data:") else line
            if body and body != b"[DONE]":
                self.chunks += 1
                data = json.loads(body)
                if isinstance(data, dict) and "error" in data and not data.get("choices"):
                    raise LLMServerHTTPError(500, f"error mid-stream: {data['error']}", self.url)
                choices = (data.get("choices") or [{}]) if isinstance(data, dict) else [{}]
                if "delta" in choices[0] or "message" in choices[0]:
                    self.chat_chunks += 1
            yield raw


class VllmChatServer(VllmServer):
    """``VllmServer(openai_like=True)`` sending the chat as a chat, with the limits litrag budgets
    prompts by. Build it with ``litrag.models.served.server_llm(backend="vllm", ...)``."""

    # litrag.segment passes its sampling settings (temperature, top_p, top_k, response_format,
    # max_tokens, extra_body) per call to clients that accept OpenAI's request fields.
    accepts_openai_kwargs: ClassVar[bool] = True

    api_base: str = Field(default="", description="The server's OpenAI base URL (…/v1).")
    context_window: int = Field(
        default=4096, description="Tokens the served model reads (vllm serve --max-model-len)."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Fields added to every request body, e.g. chat_template_kwargs for Qwen3.",
    )
    max_tokens: int | None = Field(
        default=None,
        description="Tokens a reply may have; None sends no limit (the server's: the rest of the "
        "context), where the package would always send max_new_tokens (512).",
    )

    def __init__(
        self,
        *,
        api_url: str,
        model: str,
        api_base: str = "",
        context_window: int = 4096,
        max_tokens: int | None = None,
        temperature: float = 0.7,
        timeout: float = 120.0,
        api_key: str | None = None,
        extra_body: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(
            model=model,
            api_url=api_url,
            temperature=temperature,
            max_new_tokens=max_tokens or 512,
            openai_like=True,
            api_headers=headers,
            timeout=timeout,
            **kwargs,
        )
        self.api_base = api_base or api_url
        self.context_window = context_window
        self.extra_body = dict(extra_body or {})
        self.max_tokens = max_tokens

    @classmethod
    def class_name(cls) -> str:
        return "VllmChatServer"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_new_tokens,
            is_chat_model=True,
            model_name=self.model,
        )

    # -- requests ---------------------------------------------------------------------------
    def _payload(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The package's payload for the real messages, plus what it leaves out."""
        kwargs = dict(kwargs)
        extra = {**self.extra_body, **(kwargs.pop("extra_body", None) or {})}
        response_format = kwargs.pop("response_format", None)
        limit = kwargs.pop("max_tokens", None) or kwargs.pop("max_new_tokens", None)
        limit = limit or self.max_tokens
        params = {**self._model_kwargs, **kwargs, "max_new_tokens": limit}
        payload = self._build_openai_payload("", params, chat=True, messages=list(messages))
        if limit is None:
            payload.pop("max_tokens", None)
        if params.get("top_k") not in (None, -1):
            payload["top_k"] = params["top_k"]
        if response_format is not None:
            payload["response_format"] = response_format
        payload.update(extra)
        return payload

    def _post(self, payload: dict[str, Any], stream: bool) -> requests.Response:
        try:
            return post_openai_chat_request(
                self.api_url, payload, headers=self.api_headers, timeout=self.timeout, stream=stream
            )
        except requests.RequestException as exc:
            raise _translated(exc, self.api_url, self.timeout) from exc

    def _reply(self, response: requests.Response) -> tuple[str, dict[str, Any]]:
        data = response.json()
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0], dict) or "message" not in choices[0]:
            raise completions_format_error(self.api_url, "answered without choices[].message")
        return get_openai_chat_response(response), data

    # -- chat -------------------------------------------------------------------------------
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        response = self._post(self._payload(messages, kwargs), stream=False)
        text, data = self._reply(response)
        usage = data.get("usage") or {}
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            raw=data,
            additional_kwargs={
                "prompt_tokens": usage.get("prompt_tokens", 0),
                "completion_tokens": usage.get("completion_tokens", 0),
            },
        )

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        response = self._post(self._payload(messages, kwargs), stream=True)
        lines = _SSELines(response, self.api_url)

        def gen() -> ChatResponseGen:
            text = ""
            try:
                for delta in get_openai_streaming_deltas(lines):  # type: ignore[arg-type]
                    text += delta
                    yield ChatResponse(
                        message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta
                    )
            except requests.RequestException as exc:
                raise _translated(exc, self.api_url, self.timeout) from exc
            finally:
                response.close()
            if not lines.chat_chunks:  # a chat stream always sends a role or finish chunk
                what = "streamed no choices[].delta" if lines.chunks else "streamed nothing"
                raise completions_format_error(self.api_url, what)

        return gen()

    # -- completion: a one-message chat, so the same checks apply ---------------------------
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        r = self.chat([ChatMessage(role=MessageRole.USER, content=prompt)], **kwargs)
        return CompletionResponse(text=r.message.content or "", raw=r.raw)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        chat = self.stream_chat([ChatMessage(role=MessageRole.USER, content=prompt)], **kwargs)

        def gen() -> CompletionResponseGen:
            for r in chat:
                yield CompletionResponse(text=r.message.content or "", delta=r.delta)

        return gen()

    # -- async: the blocking calls in a worker thread, so concurrent calls overlap ----------
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await asyncio.to_thread(self.chat, messages, **kwargs)

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return await asyncio.to_thread(self.complete, prompt, formatted, **kwargs)

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        pieces = await asyncio.to_thread(self.stream_chat, messages, **kwargs)
        return _in_thread(pieces)

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        pieces = await asyncio.to_thread(self.stream_complete, prompt, formatted, **kwargs)
        return _in_thread(pieces)


_END = object()


async def _in_thread(pieces: Iterator[Any]) -> AsyncIterator[Any]:
    """A blocking iterator read one item at a time in a worker thread."""
    while (item := await asyncio.to_thread(next, pieces, _END)) is not _END:
        yield item


def in_process(model: str, *, temperature: float = 0.7, **kwargs: Any) -> Any:
    """The package's in-process ``Vllm``, with the model's own chat template (its default joins
    messages as "role: text" lines, which no instruct model was trained on). No streaming; calls
    run one at a time. ``litrag.models.served.in_process_vllm`` checks the vLLM version first."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)

    def messages_to_prompt(messages: Sequence[ChatMessage]) -> str:
        chat = [{"role": m.role.value, "content": m.content or ""} for m in messages]
        return str(tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True))

    options = {"top_p": 0.8, "top_k": 20, "max_new_tokens": 4096, **kwargs}
    return vllm_base.Vllm(
        model=model,
        temperature=temperature,
        messages_to_prompt=messages_to_prompt,
        completion_to_prompt=lambda text: messages_to_prompt(
            [ChatMessage(role=MessageRole.USER, content=text)]
        ),
        **options,
    )
