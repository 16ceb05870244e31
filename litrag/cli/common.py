"""What several command groups share: the bundled book, the settings their flags adjust, the LLM
their flags name."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from litrag.settings import Settings

BUNDLED_BOOK = Path(__file__).parent.parent / "data" / "pg215_call_of_the_wild.txt"


def backend_from_args(args: argparse.Namespace, s: Settings | None = None) -> str:
    """``--llm-backend``, else ``LITRAG_LLM_BACKEND``, else the default for what is configured."""
    from litrag.settings import llm_backend

    s = s or Settings()
    if getattr(args, "llm_backend", None):
        s.llm_backend = args.llm_backend
    return llm_backend(s)


def llm_from_args(args: argparse.Namespace) -> Any:
    """The LLM asked for on the command line (``--llm-url`` through the backend's client;
    ``--llm-backend vllm --model M`` without a URL: in-process vLLM), or None for the offline
    segmenter."""
    from litrag.builders import build_in_process_vllm, build_url_llm

    s = Settings()
    backend = backend_from_args(args, s)
    if args.llm_url:
        return build_url_llm(
            s,
            args.llm_url,
            args.model or "local",
            backend=backend,
            timeout=args.timeout,
            api_key=s.llm_api_key,
        )
    if backend == "vllm" and args.model and not getattr(args, "local_llm", None):
        return build_in_process_vllm(args.model)
    return None


def local_server_llm(args: argparse.Namespace, server: Any, context_window: int) -> Any:
    """The LLM for a packaged model's llama.cpp server, through the backend's client."""
    from litrag.builders import build_url_llm

    s = Settings()
    return build_url_llm(
        s,
        server.api_base,
        server.model,
        backend=backend_from_args(args, s),
        context_window=context_window,
        timeout=args.timeout,
    )


def add_backend_flag(parser: argparse.ArgumentParser) -> None:
    from litrag.settings import LLM_BACKENDS

    parser.add_argument(
        "--llm-backend",
        choices=LLM_BACKENDS,
        help="the LLM client: openai-like (OpenAILike), vllm (llama-index-llms-vllm) or local "
        "(the packaged llama.cpp model); default LITRAG_LLM_BACKEND, else openai-like with a "
        "server URL, local without",
    )


# Settings field -> (argparse attribute, flag), for the flags that set one.
_FLAGS = {
    "segmenter": ("segmenter", "--segmenter"),
    "workers": ("workers", "--workers"),
    "max_mb": ("max_mb", "--max-mb"),
    "llm_timeout": ("timeout", "--timeout"),
    "top_k": ("top_k", "--top-k"),
    "retrieval": ("retrieval", "--retrieval"),
    "llm_backend": ("llm_backend", "--llm-backend"),
}


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with what this command's flags say instead; a bad value
    of either is a ``SettingsError`` naming the variable or the flag."""
    given: dict[str, Any] = {}
    names: dict[str, str] = {}
    for field, (attr, flag) in _FLAGS.items():
        value = getattr(args, attr, None)
        if value is not None:
            given[field] = value
            names[field] = flag
    return Settings(names_=names, **given)


def printable(text: str) -> str:
    """``text`` with its control characters escaped as Python writes them (a newline in a
    file name as ``\\n``): a name holding one would otherwise print as two lines, the second
    looking like output of its own. Undecodable bytes of a name (surrogates) are escaped too."""
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
        for ch in text
    )


def seconds(raw: str) -> float:
    """An argparse type for a ``--timeout`` the settings model does not read (``assets``,
    ``segment``, ``eval``, ``distill``): a finite number of seconds above 0. ``inf`` or ``nan``
    would wait forever or make every comparison false."""
    import math

    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {raw!r}")
    return value
