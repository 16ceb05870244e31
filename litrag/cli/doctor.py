"""``litrag doctor``: what is wrong with this machine's setup, one check per line."""

from __future__ import annotations

import argparse
from typing import Any

from litrag.cli.common import add_backend_flag


def _cmd_doctor(args: argparse.Namespace) -> int:
    """`litrag doctor`: one line per check as it finishes; exit 1 when any check failed."""
    from litrag.cli.common import settings_from_args
    from litrag.doctor import as_json, format_check, run_checks

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
        choices=["smollm2", "qwen2.5-1.5b"],
        help="generate with this packaged model (default: what `litrag ask` uses)",
    )
    doc.add_argument("--json", action="store_true", help="the checks as JSON")
    add_backend_flag(doc)
    doc.set_defaults(func=_cmd_doctor)
