"""What several command groups share: the bundled book, the settings their flags adjust, the LLM
their flags name."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from litrag.settings import Settings

BUNDLED_BOOK = Path(__file__).parent.parent / "data" / "pg215_call_of_the_wild.txt"


def llm_from_args(args: argparse.Namespace) -> Any:
    """The LLM asked for on the command line, or None for the offline segmenter."""
    if args.llm_url:
        from litrag.local_llm import openai_like

        return openai_like(args.llm_url, args.model or "local", timeout=args.timeout)
    return None


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment, with what this command's flags say instead."""
    s = Settings()
    for name in ("segmenter", "workers", "max_mb"):
        value = getattr(args, name, None)
        if value is not None:
            setattr(s, name, value)
    return s
