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


# Settings field -> (argparse attribute, flag), for the flags that set one.
_FLAGS = {
    "segmenter": ("segmenter", "--segmenter"),
    "workers": ("workers", "--workers"),
    "max_mb": ("max_mb", "--max-mb"),
    "llm_timeout": ("timeout", "--timeout"),
    "top_k": ("top_k", "--top-k"),
    "retrieval": ("retrieval", "--retrieval"),
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
