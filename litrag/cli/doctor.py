"""``litrag doctor``: what is wrong with this machine's setup, one check per line.

The checks live beside what they check (``litrag.models.checks``: CPU, llama.cpp build, models,
embeddings, the LLM server; ``litrag.ingestion.checks``: the store); this module runs them in
order, adds the short generation (through ``litrag.builders``, as ``litrag ask`` builds its LLM)
and prints or dumps the report.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from litrag.cli.common import add_backend_flag
from litrag.ingestion.checks import check_store
from litrag.models.checks import (
    Check,
    check_cpu,
    check_embeddings,
    check_llama_build,
    check_llm,
    check_models,
    cpu_info,
)
from litrag.settings import Settings, llm_backend

GENERATION_PROMPT = "Name one animal. Answer in three words."
# Seconds a server gets for the generation, one try: sixteen tokens take a served model well
# under a second; one that accepts the request and never answers fails the check in this time
# (it held the doctor for the client's 120 s timeout and its retries, ~6 minutes).
SERVER_GENERATION_TIMEOUT = 20.0


def short_error(exc: BaseException) -> str:
    """An HTTP client's error as one short line: an HTML error page (a proxy's or web server's
    404, as from a URL missing its ``/v1``) becomes its status and title, not the page."""
    import re

    text = " ".join(str(exc).split())
    name = type(exc).__name__
    if re.search(r"<\s*(!doctype|html|head|body)\b", text, re.I):
        status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
        what = re.sub(r"<[^>]+>", "", title.group(1)).strip() if title else "an HTML page"
        http = f"HTTP {status} " if status and not what.startswith(str(status)) else ""
        why = "an HTML page, not an OpenAI-compatible API: is the URL the server's /v1?"
        return f"{name}: {http}{what} ({why})"
    return f"{name}: {text[:200]}" if text else name


def _uses_server(s: Settings, local_model: str | None) -> bool:
    """Whether the generation check talks to ``LITRAG_LLM_URL`` (else the packaged model)."""
    return bool(s.llm_url) and local_model is None and llm_backend(s) != "local"


def check_generation(s: Settings, local_model: str | None = None, tokens: int = 16) -> Check:
    """A short chat completion through what ``litrag ask`` would use."""
    from litrag.builders import build_url_llm, local_server
    from litrag.models.llama_server import LlamaServer, LocalModelError
    from litrag.models.served import describe

    server: LlamaServer | None = None
    t0 = time.monotonic()
    try:
        url = s.llm_url if _uses_server(s, local_model) else None
        if url:
            llm = build_url_llm(
                s,
                url,
                s.llm_model,
                timeout=SERVER_GENERATION_TIMEOUT,
                api_key=s.llm_api_key,
                max_tokens=tokens,
                max_retries=0,
            )
            who = describe(llm_backend(s), s.llm_model, url)
            load = 0.0
        else:
            name = local_model or s.local_llm
            server = local_server(s, name, n_ctx=2048, startup_timeout=300)
            load = time.monotonic() - t0
            llm = build_url_llm(
                s,
                server.api_base,
                server.model,
                backend="local",
                timeout=300,
                context_window=server.n_ctx,
                api_key=server.api_key,
                max_retries=0,
                max_tokens=tokens,
                temperature=0.0,
            )
            who = f"{name} (local llama.cpp)"
        t1 = time.monotonic()
        text = llm.complete(GENERATION_PROMPT).text.strip()
        took = time.monotonic() - t1
    except (LocalModelError, ImportError, OSError, ValueError) as exc:
        return Check("generation", "fail", str(exc).splitlines()[0])
    except Exception as exc:  # the HTTP client's errors: a crash shows in the server's status
        crash = server.failure() if server is not None else None
        if crash is None and server is None and _timed_out(exc):
            crash = (
                f"the LLM server at {s.llm_url} listed its models but did not answer a "
                f"{tokens}-token generation in {SERVER_GENERATION_TIMEOUT:g} s (stalled)"
            )
        return Check("generation", "fail", crash or short_error(exc))
    finally:
        if server is not None:
            server.stop()
    if not text:
        return Check("generation", "fail", f"{who} returned an empty reply")
    shown = text.splitlines()[0][:60]
    return Check(
        "generation",
        "ok",
        f"{who}: {shown!r} in {took:.1f} s (model load {load:.1f} s)",
        {"text": text, "seconds": round(took, 2), "load_seconds": round(load, 2)},
    )


def _timed_out(exc: BaseException) -> bool:
    from litrag.settings import unreachable_reason

    return unreachable_reason(exc) == "timed out"


def _held_by(s: Settings) -> str | None:
    """The running chat UI that holds the embedded store, described; None when none runs."""
    from litrag.app.handoff import running_ui

    ui = running_ui(s.home)
    return ui.describe() if ui else None


def run_checks(
    s: Settings,
    *,
    generate: bool = True,
    local_model: str | None = None,
    say: Callable[[Check], None] | None = None,
) -> list[Check]:
    """Every check in order; ``say`` sees each as soon as it is done.

    The generation check does not run against an LLM server whose models listing failed (one
    that accepts connections and never answers would hold it for the client's timeouts and
    retries, minutes): it says it was skipped, and why."""
    cpu = cpu_info()
    checks: list[Check] = []

    def done(check: Check) -> Check:
        checks.append(check)
        if say is not None:
            say(check)
        return check

    python = f"Python {platform.python_version()} ({sys.executable})"
    done(Check("litrag", "info", f"{_version()} · {python} · home {s.home}"))
    done(check_cpu(cpu))
    done(check_llama_build(cpu))
    done(check_models(s.models_dir or s.home / "models"))
    done(check_embeddings(s.embed_model, s.models_dir or s.home / "models"))
    done(check_store(s, held_by=_held_by(s)))
    llm = done(check_llm(s))
    if not generate:
        return checks
    if llm.status == "fail" and _uses_server(s, local_model):
        status = llm.data.get("http_status")
        how = (
            f"failed the models listing (HTTP {status})"
            if status
            else "did not answer the models listing"
        )
        done(Check("generation", "fail", f"skipped: the LLM server at {s.llm_url} {how}"))
    else:
        done(check_generation(s, local_model))
    return checks


def _version() -> str:
    try:
        return f"litrag {importlib.metadata.version('litrag')}"
    except importlib.metadata.PackageNotFoundError:
        return "litrag (not installed)"


def format_check(check: Check) -> str:
    mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "info": "    "}[check.status]
    return f"{mark} {check.name:<11} {check.detail}"


def as_json(checks: list[Check]) -> str:
    return json.dumps([asdict(c) for c in checks], indent=2)


def _cmd_doctor(args: argparse.Namespace) -> int:
    """`litrag doctor`: one line per check as it finishes; exit 1 when any check failed."""
    from litrag.cli.common import settings_from_args

    say = None if args.json else (lambda c: print(format_check(c), flush=True))
    checks = run_checks(
        settings_from_args(args), generate=not args.no_generate, local_model=args.local_llm, say=say
    )
    if args.json:
        print(as_json(checks))
    return 1 if any(c.status == "fail" for c in checks) else 0


def add_parsers(sub: Any) -> None:
    """The ``doctor`` command and its flags."""
    doc = sub.add_parser(
        "doctor", help="check the CPU, the llama.cpp build, models, store and LLM; what is wrong"
    )
    doc.add_argument(
        "--no-generate", action="store_true", help="skip the short generation (model load)"
    )
    doc.add_argument(
        "--local-llm",
        choices=["smollm2", "qwen2.5-coder-1.5b", "qwen2.5-1.5b"],
        help="generate with this packaged model (default: what `litrag ask` uses)",
    )
    doc.add_argument("--json", action="store_true", help="the checks as JSON")
    add_backend_flag(doc)
    doc.set_defaults(func=_cmd_doctor)
