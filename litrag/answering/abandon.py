"""Closing an LLM reply stream that its reader abandoned (a client that left mid-answer).

Why a module of its own: closing the generators is not enough. The ``openai`` client's
``Stream`` keeps its own generator, whose frame holds the ``Stream`` (a reference cycle), so the
HTTP response it closes in its ``finally`` lived until the cyclic collector ran (for good in an
idle server), and llama.cpp went on generating for nobody (a core at 98 % for ~18 s; issue 50).
"""

from __future__ import annotations

import contextlib
import gc
import sys
import types
from collections.abc import Iterator
from typing import Any


def close_replies(replies: Iterator[Any] | None) -> None:
    """Close ``replies`` (an LLM's stream of replies, suspended) and the HTTP streams under it:
    the suspended generators' frames are searched first (``gc.get_referents``: their locals and
    value stacks, never module globals) for ``openai`` streams and ``httpx`` responses, which
    are closed after the generators. A fresh collection would find them too, but took seconds
    in a loaded process."""
    kinds = tuple(
        kind
        for module, name in (("openai", "Stream"), ("httpx", "Response"))
        if (kind := getattr(sys.modules.get(module), name, None)) is not None
    )
    found: list[Any] = []
    todo: list[Any] = [replies]
    seen: set[int] = set()
    while todo and len(seen) < 2000:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if kinds and isinstance(obj, kinds):
            found.append(obj)
        elif isinstance(obj, _FRAMES_AND_CLOSURES):
            todo.extend(gc.get_referents(obj))
    close = getattr(replies, "close", None)
    if close is not None:
        close()
    for obj in found:
        with contextlib.suppress(Exception):
            obj.close()


# What ``close_replies`` follows: generators, their frames, closures and the containers on a
# frame's stack; never a dict (a module's globals would lead everywhere).
_FRAMES_AND_CLOSURES = (
    types.GeneratorType,
    types.FrameType,
    types.FunctionType,
    types.CellType,
    tuple,
    list,
)
