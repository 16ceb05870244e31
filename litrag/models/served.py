"""Which client reaches an LLM server: ``openai-like`` or ``vllm``, one choice for answering,
segmentation and judging (``LITRAG_LLM_BACKEND``; ``local`` is the packaged llama.cpp model,
built in ``litrag.builders``).

``openai-like`` is ``llama-index-llms-openai-like``'s ``OpenAILike``, against any OpenAI-compatible
server. ``vllm`` is ``llama-index-llms-vllm`` (the package vLLM's LlamaIndex page names): its
``VllmServer(openai_like=True)`` against ``vllm serve``, through ``VllmChatServer``, which repairs
what litrag depends on (``litrag.models.vllm_server``); or, for segmentation on a GPU machine
without a server, its in-process ``Vllm`` where the installed vLLM still works with it.

Cheap to import: each client's package is imported by the function that builds it.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any
from urllib.parse import urlparse

VLLM_EXTRA = "pip install 'litrag[vllm]'"
OPENAI_EXTRA = "pip install 'litrag[openai]'"

# llama-index-llms-vllm's Vllm passes best_of to SamplingParams, which vLLM 0.19 removed
# (run-llama/llama_index#21371, open; the fix PRs were closed unmerged).
VLLM_BEST_OF_REMOVED = (0, 19)

CLIENTS = {
    "openai-like": "OpenAILike",
    "vllm": "llama-index-llms-vllm VllmServer",
}


def url_client(backend: str) -> str:
    """The client for a server URL under ``backend``: ``vllm`` stays ``vllm``; ``local`` (the
    packaged model, which is itself reached over llama.cpp's server) and ``openai-like`` use
    ``openai-like``."""
    return "vllm" if backend == "vllm" else "openai-like"


class BackendError(ValueError):
    """The backend cannot be used as configured; the message says why and what to use (one line)."""


def chat_completions_url(url: str) -> str:
    """The chat-completions URL for an OpenAI base URL (``…/v1``), or the URL itself when it is
    one. Refuses what ``VllmServer`` would accept and then misread: a ``/v1/completions`` URL
    (llama.cpp answers "", vLLM HTTP 400) and vLLM's demo ``/generate`` server."""
    u = url.strip().rstrip("/")
    path = urlparse(u).path
    if path.endswith("/chat/completions"):
        return u
    if path.endswith("/completions"):
        base = u[: -len("/completions")]
        raise BackendError(
            f"{url} is a text-completions endpoint; the vllm backend talks to chat completions: "
            f"set LITRAG_LLM_URL to the /v1 base ({base})"
        )
    if path.endswith("/generate"):
        raise BackendError(
            f"{url} is vLLM's demo /generate server, which litrag does not use (its replies echo "
            "the prompt); start the OpenAI server, `vllm serve MODEL`, and set LITRAG_LLM_URL to "
            "its /v1 base"
        )
    return u + "/chat/completions"


def server_llm(
    backend: str,
    url: str,
    model: str,
    *,
    context_window: int = 4096,
    timeout: float = 120.0,
    max_tokens: int | None = None,
    temperature: float | None = None,
    api_key: str | None = None,
    max_retries: int = 2,
    extra_body: dict[str, Any] | None = None,
    function_calling: bool = False,
) -> Any:
    """A LlamaIndex chat LLM for the OpenAI-compatible server at ``url`` (the ``/v1`` base).

    The same arguments mean the same request either way: ``max_tokens=None`` sends no limit
    (the server's), ``extra_body`` is merged into every request body. ``function_calling``: the
    model takes OpenAI tool calls (the client says so in its metadata; openai-like only).
    """
    if function_calling and backend != "openai-like":
        raise BackendError(
            f"LITRAG_LLM_TOOLS needs LITRAG_LLM_BACKEND=openai-like (the {backend} client "
            "cannot send tool calls)"
        )
    if backend == "vllm":
        try:
            from litrag.models.vllm_server import VllmChatServer
        except ImportError as exc:
            raise ImportError(
                f"LITRAG_LLM_BACKEND=vllm needs llama-index-llms-vllm: {VLLM_EXTRA}"
            ) from exc
        options: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
        return VllmChatServer(
            api_url=chat_completions_url(url),
            api_base=url.strip().rstrip("/"),
            model=model,
            context_window=context_window,
            max_tokens=max_tokens,
            timeout=timeout,
            api_key=api_key,
            extra_body=extra_body,
            **options,
        )
    if backend == "openai-like":
        from litrag.models.llama_server import openai_like

        kwargs: dict[str, Any] = {"api_key": api_key or "none"}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if temperature is not None:
            kwargs["temperature"] = temperature
        if extra_body:
            kwargs["additional_kwargs"] = {"extra_body": extra_body}
        if function_calling:
            kwargs["is_function_calling_model"] = True
        return openai_like(url, model, context_window, timeout, max_retries, **kwargs)
    raise BackendError(
        f"the LLM backend {backend!r} does not talk to a server URL (use openai-like or vllm)"
    )


def served_context_window(url: str, api_key: str | None = None, timeout: float = 3.0) -> int | None:
    """The context window the server at ``url`` (its ``/v1`` base) runs with, where it says:
    vLLM's ``/v1/models`` (``max_model_len``), llama.cpp's ``llama-server`` ``/props``
    (``n_ctx``). None where it says neither (llama-cpp-python's server, a proxy) or does not
    answer: the caller keeps its configured window."""
    import json
    import urllib.request

    base = url.strip().rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def get(address: str) -> Any:
        req = urllib.request.Request(address, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read(1_000_000))

    for address, read in (
        (f"{base}/models", lambda d: [m.get("max_model_len") for m in d.get("data") or []]),
        (
            f"{root}/props",
            lambda d: [(d.get("default_generation_settings") or {}).get("n_ctx"), d.get("n_ctx")],
        ),
    ):
        try:
            found = [n for n in read(get(address)) if isinstance(n, int) and n > 0]
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        if found:
            return found[0]
    return None


class ModelListError(ValueError):
    """A server's model list cannot be read; the message is one phrase naming the server."""


def listed_models(
    url: str,
    api_key: str | None = None,
    timeout: float = 10.0,
    *,
    what: str = "server",
    key_var: str = "its API key",
) -> list[str]:
    """The model ids the OpenAI-style server at ``url`` (its ``/v1`` base) lists at ``/models``
    (vLLM, llama.cpp's server and infinity all answer there); ``ModelListError`` otherwise."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    where = f"{url.rstrip('/')}/models"
    try:
        reply = httpx.get(where, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ModelListError(
            f"cannot reach the {what} at {url} ({type(exc).__name__}: {str(exc)[:160]})"
        ) from None
    if reply.status_code != 200:
        raise ModelListError(
            f"{where} answered HTTP {reply.status_code} (is it the server's /v1 base, and is "
            f"{key_var} right?)"
        )
    try:
        return [str(m["id"]) for m in reply.json().get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ModelListError(f"{where} did not answer with an OpenAI-style model list") from None


def only_model(url: str, listed: list[str]) -> str:
    """The one model a server lists; ``ModelListError`` naming them when it lists several."""
    if len(listed) == 1:
        return listed[0]
    names = ", ".join(listed) or "none"
    raise ModelListError(f"the server at {url} serves {len(listed)} models ({names})")


def fitted_context_window(url: str, api_key: str | None, configured: int) -> int:
    """The window the prompt is fitted to: the configured one, or the server's where it is
    smaller (a server started with a small ``--n_ctx`` / ``--max-model-len`` otherwise gets a
    prompt it cannot read, and llama.cpp then streams an empty answer)."""
    served = served_context_window(url, api_key)
    return min(configured, served) if served else configured


def describe(backend: str, model: str, url: str) -> str:
    """Which model, where, and which client answered: ``M at URL (OpenAILike)``."""
    return f"{model} at {url} ({CLIENTS.get(backend, backend)})"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def in_process_vllm(model: str, *, temperature: float = 0.7, **kwargs: Any) -> Any:
    """``llama-index-llms-vllm``'s in-process ``Vllm`` for batch segmentation on a GPU machine,
    where the installed vLLM works with it; else ``BackendError`` saying why and what to use."""
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        raise BackendError(
            "in-process vLLM (backend vllm without LITRAG_LLM_URL) needs the vllm package and a "
            f"GPU, and vllm is not installed here: start `vllm serve {model}` and set "
            "LITRAG_LLM_URL=http://HOST:8000/v1"
        ) from None
    if _version(version) >= VLLM_BEST_OF_REMOVED:
        raise BackendError(
            f"in-process vLLM: llama-index-llms-vllm's Vllm passes best_of, which vllm {version} "
            "rejects (TypeError, run-llama/llama_index#21371): start "
            f"`vllm serve {model}` and set LITRAG_LLM_URL=http://HOST:8000/v1"
        )
    from litrag.models.vllm_server import in_process

    return in_process(model, temperature=temperature, **kwargs)


def answering_needs_a_server(model: str) -> BackendError:
    return BackendError(
        "answering through llama-index-llms-vllm needs a `vllm serve` endpoint (its in-process "
        f"Vllm cannot stream): start `vllm serve {model}` and set LITRAG_LLM_URL=http://HOST:8000/v1"
    )
