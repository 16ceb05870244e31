"""One line for a failed LLM call, whatever the client (openai, httpx) raised: unreachable, timed
out before or mid-answer, an HTTP error (with the setting that fits a prompt the server's window
refused); and why an OpenAI-style reply stopped."""

from __future__ import annotations

import re
from typing import Any


def describe_llm_error(exc: BaseException, *, midstream: bool, api_base: str = "") -> str:
    """One line for a failed LLM call: unreachable, timed out (before or mid-answer), or HTTP."""
    import httpx

    try:
        import openai
    except ImportError:  # pragma: no cover - openai comes with llama-index-llms-openai-like
        openai = None  # type: ignore[assignment]
    where = f" at {api_base}" if api_base else ""
    timeout = isinstance(exc, httpx.TimeoutException | TimeoutError) or (
        openai is not None and isinstance(exc, openai.APITimeoutError)
    )
    if timeout:
        if midstream:
            return f"the LLM{where} timed out mid-answer (the text above is partial)"
        return f"the LLM{where} did not answer in time (timed out)"
    if midstream:
        return f"the LLM{where} failed mid-answer ({type(exc).__name__}: {exc}); text is partial"
    if isinstance(exc, httpx.ConnectError | ConnectionError) or (
        openai is not None and isinstance(exc, openai.APIConnectionError)
    ):
        return f"cannot reach the LLM server{where} ({_cause(exc)})"
    status = getattr(exc, "status_code", None)  # openai's APIStatusError, or another client's
    if isinstance(status, int):
        line = f"the LLM server{where} answered HTTP {status}: {_first_line(exc)}"
        window = _CONTEXT_SAID.search(str(exc))
        if window:  # the prompt outgrew the server's window: say which setting fits it
            line += f" (set LITRAG_LLM_CONTEXT to at most {window.group(1)}, the server's window)"
        return line
    return f"the LLM{where} failed: {type(exc).__name__}: {_first_line(exc)}"


# How OpenAI-compatible servers refuse a prompt longer than their window (llama.cpp's
# llama-cpp-python, vLLM): "maximum context length is 1024 tokens".
_CONTEXT_SAID = re.compile(r"maximum context length is (\d+)")


def finish_reason(reply: Any) -> str | None:
    """Why an OpenAI-style reply stopped (``length``, ``stop``), where the client kept it."""
    raw = getattr(reply, "raw", None)
    choices = raw.get("choices") if isinstance(raw, dict) else getattr(raw, "choices", None)
    if not choices:
        return None
    first = choices[0]
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return str(reason or getattr(first, "finish_reason", "") or "") or None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _cause(exc: BaseException) -> str:
    inner: BaseException = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    return _first_line(inner)
