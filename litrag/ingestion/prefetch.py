"""Work on the next book while the current one is embedded.

Embedding is the bound of an ingest; loading, chapter detection and segmentation of the next
book are not small either (LLM segmenters especially). ``Prefetcher`` runs them one book ahead
in a daemon thread (torch releases the GIL while it embeds), and hands each result over once,
in order. Nothing it does is persisted: an interrupt loses at most the book it was preparing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Prefetched:
    """One book prepared ahead: its loaded book, chapter documents and segmented batches."""

    file: Path
    book: Any = None
    docs: list[Any] = field(default_factory=list)
    # (cache key, nodes): the pipeline's steps done ahead (segmentation; all of them from Ray)
    segmented: list[tuple[str, list[Any]]] = field(default_factory=list)
    # text -> vector, embedded ahead: paragraph children and sentence windows (from Ray)
    vectors: dict[str, Any] = field(default_factory=dict)
    characters: Any = None  # the book's CharacterIndex, built ahead (Ray)
    seconds: dict[str, float] = field(default_factory=dict)
    error: BaseException | None = None

    def result(self) -> tuple[Any, list[Any]]:
        """(book, docs), or the exception preparing it raised."""
        if self.error is not None:
            raise self.error
        return self.book, self.docs


class Prefetcher:
    """Prepares ``files`` in order, at most ``ahead`` books before the one being taken."""

    def __init__(
        self, prepare: Callable[[Path], Prefetched], files: Sequence[Path], ahead: int = 1
    ) -> None:
        self._prepare = prepare
        self._files = list(files)
        self._results: dict[int, Prefetched] = {}
        self._taken = 0
        self._ahead = max(ahead, 1)
        self._stop = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="litrag-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for i, file in enumerate(self._files):
            with self._cond:
                # Book i may start once book i - ahead has been taken.
                self._cond.wait_for(lambda i=i: self._stop or i < self._taken + self._ahead)
                if self._stop:
                    return
            try:
                out = self._prepare(file)
            except BaseException as exc:  # handed to the main thread, raised there
                out = Prefetched(file, error=exc)
            with self._cond:
                self._results[i] = out
                self._cond.notify_all()

    def take(self, file: Path) -> Prefetched:
        """The next book's preparation (waits for it); files are taken in the given order."""
        i = self._taken
        if i >= len(self._files) or self._files[i] != file:
            raise ValueError(f"{file} is not the next book to prepare")
        with self._cond:
            self._taken += 1  # lets the thread start on the book after this one
            self._cond.notify_all()
            self._cond.wait_for(lambda: i in self._results)
            return self._results.pop(i)

    def books(self) -> Iterator[tuple[Path, Prefetched]]:
        """Each file with its preparation, in the given order."""
        for file in self._files:
            yield file, self.take(file)

    def stop(self) -> None:
        """No more books are started; one being prepared finishes in the background. With
        every book taken the thread is done, and is joined: no thread of the ingest is left
        while the interpreter shuts down (issue 50, bug 14: a segfault at exit)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._taken >= len(self._files):
            self._thread.join()
