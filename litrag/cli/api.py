"""``litrag serve-api``: the library as an OpenAI-compatible HTTP API (``litrag.app.api``)."""

from __future__ import annotations

import argparse
from typing import Any

from litrag.cli.common import add_backend_flag, add_serving_flags, settings_from_args


def _cmd_serve_api(args: argparse.Namespace) -> int:
    from litrag.app.serve import run_api

    s = settings_from_args(args)
    return run_api(
        s, host=args.host, port=args.port, no_llm=args.no_llm, rate_per_minute=args.rate_limit
    )


def add_parsers(sub: Any) -> None:
    """The ``serve-api`` command and its flags."""
    api = sub.add_parser(
        "serve-api",
        help="an OpenAI-compatible API (/v1/models, /v1/chat/completions), on 127.0.0.1",
    )
    api.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    api.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free)")
    add_serving_flags(api)
    api.add_argument("--no-llm", action="store_true", help="extractive answers, no LLM")
    api.add_argument(
        "--rate-limit",
        type=int,
        metavar="N",
        help="requests a minute per client (default 60; 0: no limit)",
    )
    api.add_argument(
        "--trusted-proxies",
        metavar="ADDRS",
        help="reverse proxies whose X-Forwarded-For names the client, comma-separated (default "
        "LITRAG_TRUSTED_PROXIES, else none: the rate limit counts each connection's address)",
    )
    add_backend_flag(api)
    api.set_defaults(func=_cmd_serve_api)
