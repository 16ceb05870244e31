"""Calling any LlamaIndex LLM for segmentation: sampling settings, timeouts, token counts, cache.

OpenAI-compatible servers (``vllm serve``, llama.cpp's server) take the paper's sampling settings
per request (``top_k`` through ``extra_body``), through OpenAILike or through a client that says
it accepts the same fields (``accepts_openai_kwargs``, litrag's ``VllmChatServer``); other LLMs
keep their own settings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import LLM

from litrag.segment.cache import ResponseCache
from litrag.segment.prompts import PROMPT_VERSION


class LLMUnavailableError(ConnectionError):
    """The configured LLM cannot be reached at all (a setup problem, not bad output)."""


@dataclass
class Reply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False


@dataclass(frozen=True)
class Sampling:
    """Per-request settings; defaults are LitSeg-Lite's (paper, Appendix H.3.1)."""

    temperature: float = 0.7
    top_p: float = 0.8
    top_k: int = 20
    json_mode: bool = True
    max_tokens: int | None = None
    extra_body: tuple[tuple[str, Any], ...] = ()


async def await_all(
    tasks: Sequence[asyncio.Future[Any]], *, show_progress: bool, desc: str
) -> None:
    """Await every task, with a progress bar as they finish when asked; on an error (or a
    cancel) the tasks still running are cancelled, so no call outlives its caller."""
    try:
        if show_progress:
            from tqdm.auto import tqdm

            for fut in tqdm(asyncio.as_completed(tasks), total=len(tasks), desc=desc):
                await fut
        else:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


def llm_identity(llm: LLM) -> str:
    """A stable description of which model answers: class, model name, endpoint."""
    model = getattr(llm, "model", None) or getattr(llm.metadata, "model_name", "") or ""
    base = getattr(llm, "api_base", None) or getattr(llm, "model_path", None) or ""
    return f"{llm.class_name()}:{model}@{base}"


def request_kwargs(
    llm: LLM, sampling: Sampling, response_format: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Sampling keyword arguments the LLM's ``achat`` accepts; ``response_format`` replaces the
    plain JSON mode (e.g. a JSON schema the server enforces) when ``sampling.json_mode`` is on."""
    openai_family = hasattr(llm, "_get_model_kwargs") or getattr(
        llm, "accepts_openai_kwargs", False
    )
    if not openai_family:  # neither OpenAI's client nor litrag's VllmChatServer
        return {}
    body: dict[str, Any] = {"top_k": sampling.top_k, **dict(sampling.extra_body)}
    kwargs: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "extra_body": body,
    }
    if sampling.json_mode:
        kwargs["response_format"] = response_format or {"type": "json_object"}
    if sampling.max_tokens:
        kwargs["max_tokens"] = sampling.max_tokens
    return kwargs


def _usage(response: Any) -> tuple[int, int]:
    extra = getattr(response, "additional_kwargs", None) or {}
    p, c = extra.get("prompt_tokens"), extra.get("completion_tokens")
    if p is None:
        usage = getattr(getattr(response, "raw", None), "usage", None)
        p = getattr(usage, "prompt_tokens", 0) if usage is not None else 0
        c = getattr(usage, "completion_tokens", 0) if usage is not None else 0
    return int(p or 0), int(c or 0)


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.TimeoutError | TimeoutError) or "Timeout" in type(exc).__name__


def _is_unreachable(exc: BaseException) -> bool:
    names = {t.__name__ for t in type(exc).__mro__}
    return bool(names & {"APIConnectionError", "ConnectError", "ConnectionError"}) and not (
        _is_timeout(exc)
    )


class LLMCaller:
    """One LLM, its request settings and an optional persistent reply cache."""

    def __init__(
        self,
        llm: LLM,
        sampling: Sampling | None = None,
        timeout: float | None = 600.0,
        cache: ResponseCache | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> None:
        self.llm = llm
        self.sampling = sampling or Sampling()
        self.timeout = timeout
        self.cache = cache
        self.identity = llm_identity(llm)
        self._kwargs = request_kwargs(llm, self.sampling, response_format)

    async def acall(self, messages: list[ChatMessage], attempt: int) -> Reply:
        """Send ``messages``; the ``attempt`` number keeps retries distinct in the cache."""
        key = None
        if self.cache is not None:
            key = ResponseCache.key(
                self.identity,
                PROMPT_VERSION,
                self.sampling,
                [(m.role.value, m.content) for m in messages],
                attempt,
            )
            hit = self.cache.get(key)
            if hit is not None:
                return Reply(hit["text"], hit["prompt_tokens"], hit["completion_tokens"], 0.0, True)
        t0 = time.perf_counter()
        try:
            response = await asyncio.wait_for(
                self.llm.achat(messages, **self._kwargs), timeout=self.timeout
            )
        except Exception as exc:
            if _is_unreachable(exc):
                raise LLMUnavailableError(
                    f"cannot reach the LLM {self.identity}: {type(exc).__name__}: {exc}"
                ) from exc
            raise
        text = response.message.content or ""
        p, c = _usage(response)
        reply = Reply(text, p, c, time.perf_counter() - t0)
        if self.cache is not None and key is not None:
            self.cache.put(key, {"text": text, "prompt_tokens": p, "completion_tokens": c})
        return reply
