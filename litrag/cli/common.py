"""What several command groups share: the bundled book, the settings their flags adjust, the LLM
their flags name."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from litrag.settings import Settings, SettingsError

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
    "api_key": ("api_key", "--api-key"),
    "allowed_hosts": ("allowed_hosts", "--allowed-hosts"),
    "trusted_proxies": ("trusted_proxies", "--trusted-proxies"),
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


def add_serving_flags(parser: argparse.ArgumentParser) -> None:
    """``--api-key`` and ``--allowed-hosts``: what ``serve-api`` and ``chat`` share."""
    parser.add_argument(
        "--api-key",
        help="the key clients must send (default LITRAG_API_KEY; required with a --host other "
        "than loopback; printable ASCII, 16 characters or more; the variable keeps it out of "
        "the process list)",
    )
    parser.add_argument(
        "--allowed-hosts",
        metavar="NAMES",
        help="Host names served, comma-separated (default LITRAG_ALLOWED_HOSTS, else "
        "localhost, 127.0.0.1, ::1 and --host; any for 0.0.0.0; '*': any)",
    )


def check_at_least(args: argparse.Namespace, **minimums: int) -> None:
    """``SettingsError`` (one line, exit 2) for the first given flag below its minimum, e.g.
    ``check_at_least(args, top_k=1, limit=1)`` for ``--top-k`` and ``--limit``: argparse's
    ``type=int`` takes -1, and a negative count gave an empty or truncated run, not an error."""
    for attr, minimum in minimums.items():
        value = getattr(args, attr, None)
        if value is not None and value < minimum:
            flag = "--" + attr.replace("_", "-")
            raise SettingsError(f"{flag} must be at least {minimum}, got {value}")


def make_out_folder(path: str | Path, flag: str = "--out") -> Path:
    """Create the output folder ``path`` (and its parents), or ``SettingsError`` naming the flag:
    ``--out /proc/nope`` was a raw ``FileNotFoundError``. Call it after every other check, so a
    refused run leaves no empty folder behind."""
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise SettingsError(f"{flag} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SettingsError(
            f"{flag} {folder}: cannot create the folder ({exc.strerror or exc})"
        ) from None
    return folder


def probe_llm_server(url: str, flag: str, what: str = "LLM server") -> None:
    """``ServerUnreachableError`` (one line naming ``flag`` and the URL, exit 2) when nothing
    answers at ``url``: connection refused, no such host, or silent for
    ``LLM_LISTING_TIMEOUT`` seconds. Why before the run: a dead teacher came out of the first
    call as a raw ``LLMUnavailableError`` after its reply cache had been created. Any HTTP
    answer counts as alive (not every server lists ``/models``)."""
    import urllib.error

    from litrag.models.checks import LLM_LISTING_TIMEOUT, _get
    from litrag.settings import ServerUnreachableError, unreachable_reason

    if not url.startswith(("http://", "https://")):
        raise SettingsError(f"{flag} must be a URL starting with http:// or https://, got {url!r}")
    try:
        _get(url.rstrip("/") + "/models", timeout=LLM_LISTING_TIMEOUT)
    except urllib.error.HTTPError:
        return  # it answered
    except (OSError, ValueError) as exc:
        reason = unreachable_reason(getattr(exc, "reason", None) or exc) or str(exc)[:120]
        raise ServerUnreachableError(
            flag, what, url, reason, f"start it, or check {flag}"
        ) from None


def chapter_indices(text: str | None, flag: str = "--chapters") -> set[int] | None:
    """``--chapters 1,2`` as chapter indices; anything else is one line naming the flag (it was
    ``int()``'s "invalid literal")."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise SettingsError(f"{flag} wants chapter indices like 1,2, got {text!r}")
    return {int(p) for p in parts}


def check_out_file(path: str | Path | None, flag: str = "--out") -> None:
    """A file ``path`` can be written: its folder exists and it is no folder itself
    (``--out /proc/nope/x.jsonl`` was a raw ``FileNotFoundError`` after the whole run)."""
    if path is None:
        return
    out = Path(path).expanduser()
    if out.is_dir():
        raise SettingsError(f"{flag} {out} is a folder; give a file path")
    if not out.parent.is_dir():
        raise SettingsError(f"{flag} {out}: its folder {out.parent} does not exist")


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
