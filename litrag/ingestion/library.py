"""A library of books in Qdrant: ingest (idempotent, resumable), list, remove.

Each book runs through a stock LlamaIndex ``IngestionPipeline``: chapters -> LitSegNodeParser ->
embeddings -> the vector store, with a docstore (upserts by chapter) and an ingestion cache,
both persisted under the data directory after every batch of chapters. Node ids are
deterministic, so a run killed midway and resumed ends with exactly the nodes of a clean run.
The registry (``books.json``) marks a book complete only after its last batch is stored.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionCache, IngestionPipeline
from llama_index.core.schema import BaseNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from tqdm.auto import tqdm

from litrag.chunkers.children import ParagraphAligner, block_children
from litrag.ingestion.book_points import BookScan, book_filter, count_points
from litrag.ingestion.catalog import text_bytes
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.damage import REPAIR, LibraryDamagedError, Problem
from litrag.ingestion.embedder_record import check_embedder, embedder_key
from litrag.ingestion.gutenberg import DEFAULT_MAX_BYTES, BookLoadError, load_book
from litrag.ingestion.mirror import discover
from litrag.ingestion.prefetch import Prefetched, Prefetcher
from litrag.ingestion.registry import (
    REGISTRY_NAME,
    BookRecord,
    file_digest,
    migrate_sources,
    read_registry,
    read_rows,
    refresh_record,
    source_path,
    text_digest,
    write_rows,
)
from litrag.ingestion.removal import finish_removal, pending_removal, start_removal
from litrag.ingestion.stages import (
    BookParts,
    chapter_batches,
    fill_known,
    known_windows,
    node_id_for,
    pipeline_steps,
    prepare_book,
    settings_key,
)
from litrag.ingestion.timing import IngestTimer
from litrag.models.disk_space import DiskSpaceError
from litrag.narrative.index import index_path, remove_index
from litrag.segment import LitSegNodeParser

if TYPE_CHECKING:
    from litrag.narrative.asset_store import AssetRemover
    from litrag.narrative.index import CharacterIndexer
    from litrag.scoring.windows import SentenceWindowEncoder

_T = TypeVar("_T")

BIG_BOOK_BYTES = 8 * 1024 * 1024  # a book's text this big or bigger: a line per early stage
# What a book's text costs on disk while it is ingested, per byte of text: its blocks, children
# and their vectors in the store (about 60 measured, two chapters of The Call of the Wild), the
# caches, and the store's segments written again by the index build at the end (twice that).
INDEX_BYTES_PER_TEXT_BYTE = 120
LOG_MARGIN = 32 * 1024 * 1024  # and a segment of the store's write-ahead log, sized ahead


@dataclass
class IngestReport:
    """What an ingest did, book by book; failures never stop the other books."""

    ingested: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line reason)
    seconds: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # kind -> files not book texts
    duplicates: int = 0  # other versions of an ebook already chosen (mirror variants)
    optimize_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


class Library:
    """Books ingested into one vector-store collection, with their registry and caches."""

    def __init__(
        self,
        home: Path,
        vector_store: BasePydanticVectorStore,
        embed_model: BaseEmbedding | None = None,
        parser: LitSegNodeParser | None = None,
        batch_chapters: int = 8,
        max_bytes: int = DEFAULT_MAX_BYTES,
        window_encoder: SentenceWindowEncoder | None = None,
        prefetch: bool = True,
        characters: CharacterIndexer | None = None,
        assets: AssetRemover | None = None,
        children_store: BasePydanticVectorStore | None = None,
    ) -> None:
        self.home = Path(home)
        # Small-to-big: with a store for them, each book's blocks are snapped to its paragraph
        # children (ParagraphAligner) and the children are embedded and stored there, so
        # retrieval ranks blocks through them (litrag.retrieval.retriever, rank_through).
        self.children_store = children_store
        self.aligner = ParagraphAligner() if children_store is not None else None
        # A removed or replaced book loses its assets.
        self.assets = assets
        # Each block's characters in its payload.
        self.characters = characters
        self.home.mkdir(parents=True, exist_ok=True)
        self.store, self.embed_model, self.parser = vector_store, embed_model, parser
        if parser is not None:
            parser.id_func = node_id_for
        self.batch_chapters = batch_chapters
        self.max_bytes = max_bytes
        # The store's SentenceWindowEncoder, when it has one: its clock splits "embed windows"
        # from "embed blocks" in the per-stage seconds.
        self.window_encoder = window_encoder
        # Load, chapters and segmentation of the next book run beside the current one's
        # embedding (a thread; their results reach the pipeline through its cache).
        self.prefetch = prefetch
        self._registry_path = self.home / REGISTRY_NAME
        self._docstore_path = self.home / "docstore.json"
        self._cache_path = self.home / "cache" / "ingestion.json"
        migrate_sources(self._registry_path, (Path.cwd(), self.home))  # older: relative paths
        self.docstore = _load(
            self._docstore_path,
            SimpleDocumentStore.from_persist_path,
            SimpleDocumentStore,
            "docstore-file",
            f"{REPAIR} (sets it aside; the store keeps every block)",
        )
        self.cache = _load(
            self._cache_path,
            IngestionCache.from_persist_path,
            IngestionCache,
            "cache-file",
            f"{REPAIR} (sets it aside; a later ingest segments again)",
        )
        # What an interrupted ingest had saved: books completed, and the book in progress as
        # (book id, chapters stored, chapters); read by the CLI's Ctrl-C line.
        self.completed: list[str] = []
        self.in_progress: tuple[str, int, int] | None = None

    def close(self) -> None:
        """Release the stores (the embedded store's lock): the blocks' and the children's."""
        for store in (self.store, self.children_store):
            if store is not None and hasattr(store, "close"):
                store.close()

    # -- registry -------------------------------------------------------------------------

    def books(self) -> list[BookRecord]:
        return [BookRecord(**r) for r in self._read_registry().values()]

    @staticmethod
    def read_registry(home: Path) -> list[BookRecord]:
        """The books of the library at ``home``, without opening its store; a damaged registry
        is a ``LibraryDamagedError`` naming the repair."""
        return read_registry(home)

    def book(self, book_id: str) -> BookRecord | None:
        row = self._read_registry().get(book_id)
        return BookRecord(**row) if row else None

    def _read_registry(self) -> dict[str, dict[str, Any]]:
        return read_rows(self._registry_path)

    def _write_registry(self, rows: dict[str, dict[str, Any]]) -> None:
        write_rows(self._registry_path, rows)

    def _save_record(self, record: BookRecord) -> None:
        rows = self._read_registry()
        rows[record.book_id] = asdict(record)
        self._write_registry(rows)

    def _persist_state(self) -> None:
        self._cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._docstore_path.with_suffix(".tmp")
        self.docstore.persist(str(tmp))
        os.replace(tmp, self._docstore_path)
        tmp = self._cache_path.with_suffix(".tmp")
        self.cache.persist(str(tmp))
        os.replace(tmp, self._cache_path)

    @property
    def parts(self) -> BookParts:
        """What cuts and embeds this library's books (``litrag.ingestion.stages``)."""
        return BookParts(
            self.parser, self.embed_model, self.aligner, self.characters, self.window_encoder
        )

    def settings_key(self) -> str:
        """What, besides a book's text, shapes its nodes (``stages.settings_key``)."""
        return settings_key(self.parts)

    def done_fingerprint(self, book_id: str) -> str | None:
        """The fingerprint of the book's complete ingest, or None (not complete, not here)."""
        old = self.book(book_id)
        return old.fingerprint if old is not None and old.status == "complete" else None

    def fingerprint(self, text: str) -> str:
        """Changes when the book's text or anything that shapes its nodes changes."""
        return text_digest(text, "\0", self.settings_key())  # a big book is not copied

    # -- ingest -----------------------------------------------------------------------------

    def ingest(
        self,
        paths: Iterable[str | os.PathLike[str]],
        show_progress: bool = False,
        on_event: Callable[[str], None] | None = None,
        catalog_rows: dict[str, dict[str, Any]] | None = None,
        follow_links: bool = False,
        prepare_with: Callable[[list[Path]], Any] | None = None,
    ) -> IngestReport:
        """Ingest books: files, folders or a Gutenberg mirror (``mirror.discover``: one version
        per ebook, .zip read in place, non-book files skipped and counted, FIFOs, devices and
        links out of a folder refused by name); one failing book never stops the others.
        ``catalog_rows`` maps a file (as given) to its catalog row; ``follow_links`` reads links
        that lead out of a folder too. ``prepare_with(files)`` prepares the books elsewhere
        (``ray_ingest.RayBooks``: its ``books()`` yields ``(file, Prefetched)`` as they are
        ready, ``stop()`` ends it); by default a thread prepares the next book (``Prefetcher``)."""
        if self.parser is None or self.embed_model is None:
            raise ValueError("this Library was opened without a parser and embedder: read-only")
        check_embedder(self.books(), embedder_key(self.embed_model))  # one model a library
        report = IngestReport()
        say = on_event or (lambda _msg: None)
        pending = pending_removal(self.home)
        if pending is not None:  # else a later repair would remove the book ingested now
            say(f"finishing the interrupted removal of {pending}")
            self._remove_now(pending)
        scan = discover(paths, max_bytes=self.max_bytes, follow_links=follow_links)
        report.failed.extend(scan.failed)
        report.skipped, report.duplicates = dict(scan.skipped), scan.duplicates
        if scan.skipped or scan.duplicates:
            say(f"found {scan.summary()}")
        files = scan.files
        self._check_space(files)
        rows = catalog_rows or {}
        self.completed, self.in_progress = [], None
        if prepare_with is not None:
            ahead = prepare_with(files)
        elif self.prefetch and len(files) > 1:
            ahead = Prefetcher(self._prepare, files)
        else:
            ahead = None
        try:
            self._ingest_files(files, rows, report, show_progress, say, ahead)
        finally:
            if ahead is not None:
                ahead.stop()
        if report.ingested and hasattr(self.store, "optimize"):
            say("building the search index")
            t0 = time.perf_counter()
            self.store.optimize()
            if self.children_store is not None and hasattr(self.children_store, "optimize"):
                self.children_store.optimize()
            report.optimize_s = round(time.perf_counter() - t0, 2)
        return report

    def _check_space(self, files: list[Path]) -> None:
        """``check_ingest_space`` for ``files``, with the collections not yet made."""
        stores = [s for s in (self.store, self.children_store) if s is not None]
        new = sum(getattr(s, "client", 1) is None for s in stores)  # an Edge store not made yet
        check_ingest_space(self.home, sum(text_bytes(f) for f in files), new, len(files))

    def _ingest_files(
        self,
        files: list[Path],
        rows: dict[str, dict[str, Any]],
        report: IngestReport,
        show_progress: bool,
        say: Callable[[str], None],
        ahead: Any,
    ) -> None:
        books = ahead.books() if ahead is not None else ((f, None) for f in files)
        for i, (file, ready) in enumerate(books, start=1):
            say(f"[{i}/{len(files)}] {file.name}")
            try:
                self._ingest_one(file, report, show_progress, say, rows.get(str(file)), ready)
            except BookLoadError as exc:
                report.failed.append((str(file), str(exc)))
                say(f"  failed: {exc}")
            except (LibraryDamagedError, DiskSpaceError):  # the library or its disk: stop
                raise
            except Exception as exc:  # a bug or a backend error: report, keep going
                reason = f"{file}: {type(exc).__name__}: {exc}"
                report.failed.append((str(file), reason))
                say(f"  failed: {reason}")
                (self.home / "logs").mkdir(exist_ok=True)
                with open(self.home / "logs" / "ingest-errors.log", "a", encoding="utf-8") as fh:
                    fh.write(f"{time.ctime()} {reason}\n{traceback.format_exc()}\n")

    def _prepare(self, file: Path) -> Prefetched:
        """Load, split and segment one book, off the main thread (``Prefetcher``)."""
        return prepare_book(
            file,
            self.parser,
            self.max_bytes,
            self.batch_chapters,
            self.settings_key(),
            self.done_fingerprint,
            lambda key: self.cache.get(key) is not None,
        )

    def _ingest_one(
        self,
        file: Path,
        report: IngestReport,
        show_progress: bool,
        say: Callable[[str], None],
        catalog_row: dict[str, Any] | None = None,
        ready: Prefetched | None = None,
    ) -> None:
        t0 = time.perf_counter()
        size = text_bytes(file)
        # With progress shown, a big book says each stage before its chapter bar (reading,
        # chapters, characters): they took minutes in silence for a book of hundreds of MB.
        stage = say if show_progress and size >= BIG_BOOK_BYTES else (lambda _msg: None)
        stage(f"  reading {size / 1e6:.0f} MB of text")
        if ready is not None:
            book, docs = ready.result()  # raises what loading raised, as load_book would
            for key, nodes in ready.segmented:  # the pipeline's cache hits for this book
                self.cache.put(key, nodes)
        else:
            book = load_book(file, max_bytes=self.max_bytes)
            t_split = time.perf_counter()
            stage(f"  {book.book_id}: {len(book.text) / 1e6:.1f} M characters; finding chapters")
            docs = split_chapters(book)
        stage(f"  {book.book_id}: {len(docs)} chapters found")
        for warning in book.warnings:  # what loading noticed (a second book, a guessed codec)
            say(f"  warning: {book.book_id}: {warning}")
        self.in_progress = (book.book_id, 0, len(docs))
        if ready is not None:
            early = {k: v for k, v in ready.seconds.items()}
        else:
            early = {"load": t_split - t0, "chapters": time.perf_counter() - t_split}
        fp = self.fingerprint(book.text)
        old = self.book(book.book_id)
        if old is not None and old.fingerprint == fp and old.status == "complete":
            stored = count_points(self.store, book.book_id)
            indexed = not self.characters or index_path(self.home, book.book_id).is_file()
            kids = self._count_children(book.book_id)
            if stored == old.nodes and indexed and kids == old.children:
                report.unchanged.append(book.book_id)
                say(f"  {book.book_id} unchanged")
                if refresh_record(old, file, catalog_row, _catalog_author(catalog_row)):
                    self._save_record(old)  # metadata or the file's place only: no re-ingest
                return
            # Never "unchanged" for a book whose points are gone: ingest it again (the cache
            # gives back its segmentation and embeddings).
            if stored != old.nodes:
                why = f"the store holds {stored} of its {old.nodes} blocks"
            elif kids != old.children:
                why = f"the store holds {kids} of its {old.children} paragraph children"
            else:
                why = "its character index is missing"
            say(f"  {book.book_id}: {why}: ingesting it again")
            self._drop_nodes(book.book_id)
        elif old is not None and not old.fingerprint:
            say(
                f"  {book.book_id}: its registry entry was restored by `litrag verify`: "
                "ingesting it again"
            )
            self._drop_nodes(book.book_id)
        elif old is not None and old.fingerprint != fp:
            now = source_path(file)
            moved = f" (was {old.source}, now {now})" if old.source != now else ""
            say(f"  {book.book_id} changed: replacing its nodes{moved}")
            self._drop_nodes(book.book_id)
        record = BookRecord(
            book_id=book.book_id,
            title=(catalog_row or {}).get("title") or book.title,
            author=_catalog_author(catalog_row) or book.author,
            chapters=len(docs),
            nodes=0,
            segmenter=str(self.parser.segmenter),
            embedder=embedder_key(self.embed_model),
            source=source_path(file),
            fingerprint=fp,
            catalog=catalog_row or {},
            source_digest=file_digest(file),
        )
        self._save_record(record)
        timer = IngestTimer()
        windows_before = getattr(self.window_encoder, "seconds", 0.0)
        children_windows = 0.0  # of the window clock, the children's (in embed_children)
        for component in (self.parser, self.embed_model):
            component.callback_manager.add_handler(timer)
        tagger = None
        if self.characters:
            stage(f"  {book.book_id}: building the character index ({len(docs)} chapters)")
            t_chars = time.perf_counter()
            tagger = self.characters.prepare(book.book_id, docs)
            timer.add("characters", time.perf_counter() - t_chars)
        pipeline = IngestionPipeline(
            transformations=pipeline_steps(self.parts, tagger),
            vector_store=self.store,
            docstore=self.docstore,
            docstore_strategy=DocstoreStrategy.UPSERTS,
            cache=self.cache,
        )
        # One bar per book, in chapters: the pipeline's own bars would count its two
        # transformations once per batch.
        bar = tqdm(
            total=len(docs), desc=f"  {book.book_id}", unit="chapter", disable=not show_progress
        )
        known = ready.vectors if ready is not None else {}  # embedded ahead (Ray)
        try:
            with known_windows(self.window_encoder, known):
                for start, batch in chapter_batches(docs, self.batch_chapters):
                    t_run = time.perf_counter()
                    before = timer.get("segment") + timer.get("embed")
                    if self.aligner is not None:
                        self.aligner.for_chapters(batch)
                    blocks = pipeline.run(documents=batch, show_progress=False)
                    inner = timer.get("segment") + timer.get("embed") - before
                    timer.add("store", time.perf_counter() - t_run - inner)
                    if self.children_store is not None:
                        children_windows += self._store_children(blocks, batch, timer, known)
                    self._persist_state()  # a kill after this line loses nothing of this batch
                    self.in_progress = (book.book_id, start + len(batch), len(docs))
                    bar.update(len(batch))
        finally:
            bar.close()
            for component in (self.parser, self.embed_model):
                component.callback_manager.remove_handler(timer)
        if self.characters:
            t_chars = time.perf_counter()
            self.characters.finish(book.book_id, self.store)
            timer.add("characters", time.perf_counter() - t_chars)
        record.nodes = self._count_nodes(book.book_id)
        record.children = self._count_children(book.book_id)
        record.status = "complete"
        record.ingested_at = time.strftime("%Y-%m-%d %H:%M:%S")
        windows = getattr(self.window_encoder, "seconds", 0.0) - windows_before
        windows -= children_windows  # counted in embed_children
        timer.add("segment", early.pop("segment", 0.0))  # done ahead, beside the last book
        totals = timer.totals()
        if "embed" in totals:  # the window vectors are embedded through the same model
            totals["embed_windows"] = round(windows, 2)
            totals["embed_blocks"] = round(max(totals.pop("embed") - windows, 0.0), 2)
        record.seconds = {**{k: round(v, 2) for k, v in early.items()}, **totals}
        self._save_record(record)
        self.completed.append(book.book_id)
        self.in_progress = None
        report.ingested.append(book.book_id)
        report.seconds[book.book_id] = record.seconds
        say(f"  {book.book_id}: {record.chapters} chapters, {record.nodes} nodes")

    def _count_nodes(self, book_id: str) -> int:
        return count_points(self.store, book_id)

    def _count_children(self, book_id: str) -> int:
        """The book's paragraph children in their store (0 without one)."""
        return 0 if self.children_store is None else count_points(self.children_store, book_id)

    def _store_children(
        self,
        blocks: list[BaseNode],
        chapters: list[Any],
        timer: IngestTimer,
        known: dict[str, Any] | None = None,
    ) -> float:
        """Embed and store the paragraph children of a batch's (aligned, stored) blocks;
        returns the seconds their sentence windows took (the store embeds those).

        Called before the batch's docstore is persisted, so a run killed here redoes the
        batch on resume: blocks and children are upserts with stable ids. The children are cut
        again from the chapters rather than kept from the aligner, which a cached batch skips.
        ``known``: vectors embedded ahead (by Ray workers), by text."""
        if not blocks:
            return 0.0
        kids = block_children(blocks, chapters)
        before = timer.get("embed")
        windows_before = getattr(self.window_encoder, "seconds", 0.0)
        todo = fill_known(kids, known or {})
        if todo:
            self.embed_model(todo)
        t0 = time.perf_counter()
        assert self.children_store is not None
        self.children_store.add(kids)  # the store embeds their windows here
        windows = getattr(self.window_encoder, "seconds", 0.0) - windows_before
        timer.add("store", time.perf_counter() - t0 - windows)
        # Their embedding (whole vectors and windows, both through the embedder's callbacks)
        # has a figure of its own: out of "embed", and out of the window clock.
        timer.move("embed", "embed_children", timer.get("embed") - before)
        return windows

    def _drop_nodes(self, book_id: str) -> None:
        self.store.delete_nodes(filters=book_filter(book_id))
        if self.children_store is not None:
            self.children_store.delete_nodes(filters=book_filter(book_id))
        remove_index(self.home, book_id)
        if self.assets is not None:
            self.assets.remove(book_id)
        prefix = f"{book_id}:"
        for doc_id in list(self.docstore.get_all_document_hashes().values()):
            if str(doc_id).startswith(prefix):
                self.docstore.delete_document(doc_id, raise_error=False)
                self.docstore.delete_ref_doc(doc_id, raise_error=False)
        self._persist_state()

    # -- repair (litrag verify --repair) ---------------------------------------------------
    def reingest(self, book_id: str, say: Callable[[str], None] = lambda _m: None) -> str | None:
        """Ingest a registered book again from its source, as it was (the ingestion cache gives
        back its segmentation and embeddings); None when done, else why it cannot be."""
        rec = self.book(book_id)
        if rec is None:
            return "it is not in the registry"
        src = Path(rec.source) if rec.source else None
        if src is None or not src.is_file():
            return f"its source {rec.source or '(not recorded)'} is gone"
        try:
            book = load_book(src, max_bytes=self.max_bytes)
        except BookLoadError as exc:
            return f"its source cannot be read ({exc})"
        if book.book_id != book_id or self.fingerprint(book.text) != rec.fingerprint:
            return f"its source {src} changed since it was ingested"
        self._drop_nodes(book_id)
        rec.status = "ingesting"
        self._save_record(rec)
        self._ingest_one(src, IngestReport(), False, say, rec.catalog or None)
        return None

    def reembed(self, book_id: str) -> int:
        """Embed a book's stored blocks again from their stored text (its source being gone):
        the blocks and their ids stay, the vectors are made anew. Returns the blocks done."""
        if self.embed_model is None:
            raise ValueError("this Library was opened without an embedder: read-only")
        if self.children_store is not None:
            self._embed_again(self.children_store, book_id)
        return self._embed_again(self.store, book_id)

    def _embed_again(self, store: BasePydanticVectorStore, book_id: str) -> int:
        """A book's points in ``store`` embedded anew from their stored text; how many."""
        assert self.embed_model is not None
        points = store.get_nodes(filters=book_filter(book_id))
        for start in range(0, len(points), 256):
            store.add(self.embed_model(points[start : start + 256]))
        return len(points)

    def restore_record(self, book_id: str, scan: BookScan) -> BookRecord:
        """A registry entry re-derived from a book's stored points (its ``BookScan``);
        its source is unknown, so a later ingest of the book replaces its points."""
        meta = scan.meta
        record = BookRecord(
            book_id=book_id,
            title=str(meta.get("title") or book_id),
            author=meta.get("author"),
            chapters=len(scan.doc_ids),
            nodes=scan.points,
            segmenter=str(meta.get("segmenter") or "unknown"),
            source="",
            fingerprint="",
            status="complete",
            ingested_at=time.strftime("%Y-%m-%d %H:%M:%S") + " (restored)",
        )
        self._save_record(record)
        return record

    def chapter_doc_ids(self, book_id: str) -> set[str]:
        """The chapter documents of a book the docstore knows (empty when it knows none)."""
        prefix = f"{book_id}:"
        return {d for d in self.docstore.get_all_document_hashes().values() if d.startswith(prefix)}

    def remove(self, book_id: str) -> bool:
        """Remove a book's nodes and row (False: no such book), journaled in ``removing.json``:
        a removal killed midway is finished later (by ``verify --repair``), not undone."""
        pending = pending_removal(self.home)
        if pending is not None and pending != book_id:
            self._remove_now(pending)
        if book_id not in self._read_registry() and pending != book_id:
            return False
        self._remove_now(book_id)
        return True

    def _remove_now(self, book_id: str) -> None:
        start_removal(self.home, book_id)  # before the first delete
        self._drop_nodes(book_id)
        rows = self._read_registry()
        self._write_registry({k: v for k, v in rows.items() if k != book_id})
        finish_removal(self.home)  # after the registry row is gone


def check_ingest_space(home: Path, text: int, new_stores: int, books: int) -> None:
    """``DiskSpaceError`` (one line: the disk, its free and the needed megabytes) before
    anything is written, when the disk of ``home`` cannot hold what ingesting ``text`` bytes of
    books writes, and ``new_stores`` new collections on a filesystem that allocates their files
    whole (tmpfs: there a full disk ended the process in a Bus error, exit 135, no message)."""
    from litrag.models.disk_space import allocates_eagerly, need_space
    from litrag.stores.edge_open import NEW_STORE_BYTES

    need = INDEX_BYTES_PER_TEXT_BYTE * text + LOG_MARGIN
    if allocates_eagerly(home):
        need += NEW_STORE_BYTES * new_stores
    what = f"ingesting {books} book{'s' * (books != 1)} ({text:,} bytes of text)"
    need_space(home, need, what)


def _catalog_author(row: dict[str, Any] | None) -> str | None:
    """A catalog row's first author as a reader writes it (``Jane Austen``)."""
    if not row or not row.get("authors"):
        return None
    from litrag.ingestion.catalog import CatalogEntry

    fields = {**row, **{k: tuple(v) for k, v in row.items() if isinstance(v, list)}}
    return CatalogEntry(**fields).author


def _load(
    path: Path, load: Callable[[str], _T], empty: Callable[[], _T], kind: str, fix: str
) -> _T:
    """A persisted docstore or cache; one that does not parse is a ``LibraryDamagedError``."""
    if not path.exists():
        return empty()
    try:
        return load(str(path))
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LibraryDamagedError([Problem(f"{path} is damaged ({reason})", fix, kind)]) from None
