"""One way to run a coroutine from sync code, shared by the node parsers and the narrative
engine: ``asyncio.run`` where no loop runs, else a worker thread's own loop (a notebook, a UI)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def run_sync(coro: Any) -> Any:
    """Run ``coro`` to completion and return its result, whether or not a loop is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
