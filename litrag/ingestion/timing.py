"""Where an ingest's time goes: seconds spent segmenting and embedding, read from LlamaIndex's
own callback events, plus what ``Library`` adds by hand (loading, chapters, characters, store)."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

from llama_index.core.callbacks import CBEventType
from llama_index.core.callbacks.base_handler import BaseCallbackHandler

__all__ = ["IngestTimer"]


class IngestTimer(BaseCallbackHandler):
    """Seconds spent parsing and embedding, from LlamaIndex's own callback events."""

    _NAMES: ClassVar[dict[CBEventType, str]] = {
        CBEventType.NODE_PARSING: "segment",
        CBEventType.EMBEDDING: "embed",
    }

    def __init__(self) -> None:
        super().__init__(event_starts_to_ignore=[], event_ends_to_ignore=[])
        self._thread = threading.get_ident()  # the prefetch thread's events are its own
        self._open: dict[str, float] = {}
        self._totals: dict[str, float] = {}

    def on_event_start(
        self,
        event_type: CBEventType,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> str:
        if event_type in self._NAMES and threading.get_ident() == self._thread:
            self._open[event_id] = time.perf_counter()
        return event_id

    def on_event_end(
        self,
        event_type: CBEventType,
        payload: dict[str, Any] | None = None,
        event_id: str = "",
        **kwargs: Any,
    ) -> None:
        t0 = self._open.pop(event_id, None)
        if t0 is not None:
            self.add(self._NAMES[event_type], time.perf_counter() - t0)

    def start_trace(self, trace_id: str | None = None) -> None:
        return None

    def end_trace(
        self, trace_id: str | None = None, trace_map: dict[str, list[str]] | None = None
    ) -> None:
        return None

    def add(self, name: str, seconds: float) -> None:
        self._totals[name] = self._totals.get(name, 0.0) + max(seconds, 0.0)

    def get(self, name: str) -> float:
        return self._totals.get(name, 0.0)

    def move(self, src: str, dst: str, seconds: float) -> None:
        """Count ``seconds`` of ``src`` under ``dst`` instead."""
        seconds = min(max(seconds, 0.0), self.get(src))
        self._totals[src] = self.get(src) - seconds
        self.add(dst, seconds)

    def totals(self) -> dict[str, float]:
        return {k: round(v, 2) for k, v in self._totals.items()}
