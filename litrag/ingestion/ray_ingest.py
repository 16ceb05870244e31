"""Distributed ingest on Ray Data: ``litrag ingest --ray [ADDRESS]`` (``litrag[scale]``).

The books run through a Ray Data pipeline: load, chapters, segmentation and the character index
as CPU tasks, one book a row; then an actor pool that embeds (one model load per actor, a GPU
each when the embedder runs on one). Each finished book comes back to the driver, whose
``Library`` writes it: the embedded Edge store is one process's, so the driver owns the stores,
the docstore and the registry. The workers run the functions of ``litrag.ingestion.stages``
that the one-process ingest runs, and hand their results over as the pipeline's cache entries
and known vectors, so the driver's pipeline only writes, and the node ids, the docstore and the
registry are those of a one-process ingest. Books are written as they come (in any order), each
in batches of chapters persisted one by one, with the registry's per-book status: a killed run
resumes where it stopped, as a one-process one does.

Imported only for ``--ray``: nothing else of litrag imports Ray.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import ray

from litrag.ingestion.prefetch import Prefetched
from litrag.ingestion.stages import BookParts, embed_book, prepare_book
from litrag.narrative.index import CharacterIndexer, CharacterTagger

__all__ = ["GivenCharacters", "RayBooks", "connect", "wants_gpu"]


class GivenCharacters(CharacterIndexer):
    """A ``CharacterIndexer`` whose book indexes may be built elsewhere (a Ray task, ``build``)
    and handed over (``give``): ``prepare`` then uses the given index instead of running NER."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self._given: dict[str, Any] = {}

    def build(self, book_id: str, docs: Sequence[Any]) -> Any:
        """The book's CharacterIndex (NER over its chapters), not kept here."""
        self.prepare(book_id, docs)
        return self._pending.pop(book_id)

    def give(self, book_id: str, index: Any) -> None:
        self._given[book_id] = index

    def prepare(self, book_id: str, docs: Sequence[Any]) -> CharacterTagger:
        index = self._given.pop(book_id, None)
        if index is None:
            return super().prepare(book_id, docs)
        self._pending[book_id] = index  # ``finish`` saves it after the blocks are stored
        return CharacterTagger(index)


def connect(address: str | None, num_cpus: int | None = None) -> str:
    """Join the Ray cluster at ``address``, or start a local one (None); returns its address.
    A ``host:port`` where nothing answers is a ``ConnectionError`` within seconds (Ray itself
    waits for minutes)."""
    if address and address != "auto":
        _probe(address)
    if not ray.is_initialized():
        ray.init(
            address=address or "local",
            num_cpus=num_cpus if not address else None,
            include_dashboard=False,
            configure_logging=False,
        )
    return str(ray.get_runtime_context().gcs_address)


def _probe(address: str, timeout: float = 10.0) -> None:
    """Raise ``ConnectionError`` when nothing listens at the address's ``host:port``."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"{address!r} is not HOST:PORT (or ray://HOST:PORT, auto)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {host}:{port}: {exc.strerror or exc}") from None


def wants_gpu(embed_model: Any) -> bool:
    """Whether the embedder runs on a GPU (its actors then ask Ray for one each)."""
    device = str(getattr(embed_model, "device", "") or "")
    return device.startswith("cuda") or int(getattr(embed_model, "n_gpu_layers", 0) or 0) > 0


_CPU_PARTS: dict[str, BookParts] = {}  # per worker process: the parser, built once


def _prepare_row(
    row: dict[str, Any],
    make_parts: Callable[[], BookParts],
    key: str,
    done: dict[str, str],
    max_bytes: int,
    batch_chapters: int,
) -> dict[str, Any]:
    """A CPU task: load, chapters, segmentation and the character index of one book."""
    file = Path(row["path"])
    try:
        parts = _CPU_PARTS.get(key)
        if parts is None:
            parts = _CPU_PARTS[key] = make_parts()
        out = prepare_book(file, parts.parser, max_bytes, batch_chapters, key, done.get)
        if out.segmented and parts.characters is not None:  # a book to ingest
            t0 = time.perf_counter()
            out.characters = _indexer(parts).build(out.book.book_id, out.docs)
            out.seconds["characters_index"] = time.perf_counter() - t0
    except Exception as exc:  # handed to the driver, which names the book and goes on
        out = Prefetched(file, error=_portable(exc))
    return {"i": row["i"], "ready": pickle.dumps(out)}


def _indexer(parts: BookParts) -> GivenCharacters:
    if not isinstance(parts.characters, GivenCharacters):
        parts.characters = GivenCharacters(parts.characters.home)
    return parts.characters


def _portable(exc: BaseException) -> BaseException:
    """``exc``, or a RuntimeError naming it where it does not pickle."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _task_args() -> dict[str, Any]:
    """The CPU tasks' remote arguments: one whose worker died runs again."""
    return {"max_retries": 3}


class _Embedder:
    """The actor pool's member: one embedding model, loaded once, for every book it is given."""

    def __init__(
        self,
        make_parts: Callable[[], BookParts],
        batch_chapters: int,
        block_windows: bool,
        child_windows: bool,
    ) -> None:
        self.parts = make_parts()
        self.batch_chapters = batch_chapters
        self.block_windows, self.child_windows = block_windows, child_windows

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        ready: Prefetched = pickle.loads(row["ready"])
        if ready.error is None and ready.segmented:
            try:
                t0 = time.perf_counter()
                tagger = CharacterTagger(ready.characters) if ready.characters else None
                embed_book(
                    ready,
                    self.parts,
                    self.batch_chapters,
                    tagger,
                    self.block_windows,
                    self.child_windows,
                )
                ready.seconds["embed_ahead"] = time.perf_counter() - t0
            except Exception as exc:
                ready.error = _portable(exc)
        return {"i": row["i"], "ready": pickle.dumps(ready)}


class RayBooks:
    """``Library.ingest(prepare_with=...)``: the books prepared and embedded on the cluster,
    handed to the driver's library as each one is ready."""

    def __init__(
        self,
        files: Sequence[Path],
        library: Any,
        make_parts: Callable[[bool], BookParts],
        actors: int = 1,
        show_progress: bool = True,
    ) -> None:
        from functools import partial

        self.files = list(files)
        self.library = library
        if library.characters is not None and not isinstance(library.characters, GivenCharacters):
            library.characters = GivenCharacters(library.home)
        key = library.settings_key()
        done = {r.book_id: r.fingerprint for r in library.books() if r.status == "complete"}
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = show_progress
        rows = [{"i": i, "path": str(f)} for i, f in enumerate(self.files)]
        ds = ray.data.from_items(rows, override_num_blocks=max(len(rows), 1))
        ds = ds.map(
            _prepare_row,
            fn_kwargs={
                "make_parts": partial(make_parts, False),
                "key": key,
                "done": done,
                "max_bytes": library.max_bytes,
                "batch_chapters": library.batch_chapters,
            },
            num_cpus=1,
            # Remote arguments from a function also keep Ray Data from fusing the two stages
            # into the actor pool: the CPU stage stays tasks, free to run wherever CPUs are.
            ray_remote_args_fn=_task_args,
        )
        gpu = wants_gpu(library.embed_model)
        self.dataset = ds.map(
            _Embedder,
            fn_constructor_kwargs={
                "make_parts": partial(make_parts, True),
                "batch_chapters": library.batch_chapters,
                "block_windows": _windowed(library.store),
                "child_windows": _windowed(library.children_store),
            },
            compute=ray.data.ActorPoolStrategy(size=max(actors, 1)),
            num_cpus=0 if gpu else 1,
            num_gpus=1 if gpu else 0,
        )

    def books(self) -> Iterator[tuple[Path, Prefetched]]:
        """Each book with its preparation, in the order they finish."""
        for row in self.dataset.iter_rows():
            ready: Prefetched = pickle.loads(row["ready"])
            if ready.characters is not None and self.library.characters is not None:
                self.library.characters.give(ready.book.book_id, ready.characters)
            yield self.files[row["i"]], ready

    def stop(self) -> None:
        """Nothing to stop: an unfinished dataset ends with the driver's Ray session."""


def _windowed(store: Any) -> bool:
    """Whether ``store`` embeds sentence windows of what it is given (the Edge store's config)."""
    return bool(getattr(getattr(store, "config", None), "window_vector_name", None))
