"""What one chat process shares, and how it answers: no Gradio here, so tests and the API use it.

The embedded Edge store admits one opener per process, so the UI opens it once and every
session's engine is built on it; its calls are serialised by a lock (``LockedEdgeStore``) since
an upload's ingest writes while other sessions query. Everything a conversation owns (history,
book selection, spoiler limit) is passed in by the caller, never kept here: two sessions can
never see each other's turns.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine

from litrag.answering.answer import Answer, AnswerStream, condense_prompt
from litrag.answering.ask_request import MAX_QUESTION_CHARS
from litrag.builders import (
    AnswerLLM,
    build_character_indexer,
    build_children_store,
    build_embed_model,
    build_parser,
    build_routed_engine,
    build_shared_store,
    build_window_encoder,
)
from litrag.ingestion.library import BookRecord, IngestReport, Library
from litrag.retrieval.retriever import RetrievalSettings, loaded_books
from litrag.settings import Settings
from litrag.stores.factory import store_description

logger = logging.getLogger(__name__)

# A follow-up leans on the previous turn when it names nobody: "What did he do then?"
_FOLLOW_UP = re.compile(
    r"\b(he|she|him|his|her|hers|they|them|their|it|its|this|that|these|those|there|then|"
    r"after|before|why|and)\b",
    re.IGNORECASE,
)
MAX_ENGINES = 32  # engines kept for reuse (a book x spoiler limit x settings each)
_ECHOED_TAG = re.compile(
    r"</?(?:question|conversation)>|^\s*standalone question:", re.IGNORECASE | re.MULTILINE
)
HISTORY_TURNS = 3  # turns shown to the rewriting LLM: enough for pronouns, cheap to prefill
# What one earlier turn may add to the rewrite prompt (and a question to the searched text): the
# question as capped when it was asked, the answer's opening. Why: history came unchecked (an
# API client sends it whole), and a 240 KB earlier turn made a 195,169-character prompt.
HISTORY_QUESTION_CHARS = MAX_QUESTION_CHARS
HISTORY_ANSWER_CHARS = 400


@dataclass
class Turn:
    """One finished exchange of a conversation (kept in the session's state)."""

    question: str
    answer: str


@dataclass
class CharacterProfile:
    """What the Characters panel shows of one character as of the spoiler limit."""

    book_id: str
    character: Any  # the index's Character, its counts and aliases cut to the limit
    upto: int | None
    companions: list[tuple[str, int]]  # (name, blocks shared), up to the limit
    has_assets: bool  # the book has LLM assets (``litrag assets``)
    profile: Any = None  # the latest profile snapshot the spoiler filter lets through
    blocks: dict[str, Any] = field(default_factory=dict)  # its cited blocks, within the limit


def discard_upload(path: Path, root: Path) -> None:
    """Delete ``path`` if it lies under ``root``, and the folders between them it leaves
    empty (Gradio keeps each upload in a folder of its own); never anything outside ``root``."""
    root = Path(root).resolve()
    path = Path(path).resolve()
    if root not in path.parents:
        return
    path.unlink(missing_ok=True)
    folder = path.parent
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()  # only when empty
        except OSError:
            break
        folder = folder.parent


def stored_name(upload: Path) -> str:
    """Where an upload is kept: the first 16 hex digits of its content's SHA-256, then its
    name (made safe), so equal names never share a file and equal texts always do."""
    import hashlib

    digest = hashlib.sha256()
    with upload.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    safe = re.sub(r"[^\w.\-]+", "_", upload.name).strip("._") or "book.txt"
    return f"{digest.hexdigest()[:16]}-{safe}"


class ChatService:
    """The process's library, embedder, store and LLM; answers and ingests for every session."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: Any = None,
        embed_model: Any = None,
        answer_llm: AnswerLLM | None = None,
        children_store: Any = None,
        llm_note: str | None = None,
    ) -> None:
        self.settings = settings
        self.embed_model = embed_model if embed_model is not None else build_embed_model(settings)
        dim = windows = None
        if store is None or (settings.children and children_store is None):
            dim = len(self.embed_model.get_text_embedding("dimension probe"))
            windows = build_window_encoder(self.embed_model)
        if store is None:
            store = build_shared_store(settings, dense_dim=dim, window_doc_fn=windows)
        self.store = store
        # The blocks' paragraph children (small-to-big), written by ingests, read by engines.
        if settings.children and children_store is None:
            children_store = build_children_store(settings, dim, windows, thread_safe=True)
        self.children_store = children_store
        self.answer_llm = answer_llm
        # Why there is no LLM (--no-llm, or the local model did not start): shown with answers.
        self.llm_note = llm_note
        self._library: Library | None = None
        self._library_lock = threading.Lock()
        self._ingest_lock = threading.Lock()
        self._chapters: dict[str, list[tuple[int, str]]] = {}
        self._assets: Any = None
        self._assets_lock = threading.Lock()
        self._engines: dict[tuple[object, ...], BaseQueryEngine] = {}
        self._engines_lock = threading.Lock()

    # -- the library ------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.settings.home

    @property
    def max_bytes(self) -> int:
        return int(self.settings.max_mb * 1024 * 1024)

    def library(self) -> Library:
        """The writing side (parser, docstore, caches), built on first use."""
        with self._library_lock:
            if self._library is None:
                self._library = Library(
                    self.home,
                    self.store,
                    self.embed_model,
                    build_parser(self.settings),
                    max_bytes=self.max_bytes,
                    characters=build_character_indexer(self.settings),
                    assets=_SharedAssetRemover(self),
                    children_store=self.children_store,
                )
            return self._library

    def characters(self, book_id: str) -> Any:
        """The book's character index (``litrag.narrative``), or None where it has none."""
        from litrag.narrative.index import load_index

        return load_index(self.home, book_id)

    def asset_store(self) -> Any:
        """The library's narrative assets (``litrag assets``), opened once on first use as the
        blocks' store is (embedded: one lock, held for the process); None while the library
        has no asset collection."""
        from litrag.narrative.asset_store import AssetStore, assets_collection

        with self._assets_lock:
            if self._assets is None:
                name = assets_collection(self.settings.collection)
                if not self.settings.qdrant_url and not (self.home / "index" / name).exists():
                    return None
                store = build_shared_store(self.settings, collection=name)
                self._assets = AssetStore(self.home, store, self.embed_model)
            return self._assets

    def character_profile(
        self, book_id: str, char_id: str, upto_chapter: int | None = None
    ) -> CharacterProfile | None:
        """A character as a reader at ``upto_chapter`` knows them: the offline index's counts
        and companions, and the profile snapshot of the LLM assets with the blocks it cites,
        nothing past the limit. None when the book has no such character met by then."""
        index = self.characters(book_id)
        met = {c.id: c for c in index.upto(upto_chapter)} if index is not None else {}
        if char_id not in met:
            return None
        companions = []
        for other, n in index.companions(char_id, upto_chapter)[:5]:
            c = index.by_id(other)
            companions.append((c.name if c is not None else other, n))
        view = CharacterProfile(book_id, met[char_id], upto_chapter, companions, False)
        assets = self.asset_store()
        if assets is None:
            return view
        try:
            view.has_assets = assets.has_book(book_id)
            if view.has_assets:
                view.profile = assets.profile(book_id, char_id, upto_chapter)
        except Exception as exc:  # a server without the collection: no assets, said so
            logger.warning("reading the assets of %s failed: %s", book_id, exc)
            return view
        if view.profile is not None:
            m = view.profile.metadata
            cited = [str(b) for _, b in m.get("line_sources") or []] or list(m["source_blocks"])
            for node in self.store.get_nodes(node_ids=list(dict.fromkeys(cited))):
                ch = int(node.metadata.get("chapter_index", 0))
                if upto_chapter is None or ch <= upto_chapter:
                    view.blocks[node.node_id] = node
        return view

    def books(self) -> list[BookRecord]:
        """Books ready to be asked (complete ingests), in registry order."""
        return [r for r in Library.read_registry(self.home) if r.status == "complete"]

    def chapters(self, book_id: str) -> list[tuple[int, str]]:
        """``(chapter_index, heading)`` of a book, read from the library's docstore once."""
        if book_id not in self._chapters:
            docstore = self.library().docstore
            prefix = f"{book_id}:"
            found: list[tuple[int, str]] = []
            for doc_id in docstore.get_all_document_hashes().values():
                if not str(doc_id).startswith(prefix):
                    continue
                doc = docstore.get_document(doc_id, raise_error=False)
                if doc is not None:
                    m = doc.metadata
                    found.append((int(m.get("chapter_index", 0)), str(m.get("chapter_title", ""))))
            self._chapters[book_id] = sorted(set(found))
        return self._chapters[book_id]

    def ingest(
        self,
        paths: Sequence[str | Path],
        say: Callable[[str], None] | None = None,
        discard_under: Path | None = None,
    ) -> IngestReport:
        """Copy uploads under ``$LITRAG_HOME/uploads`` (the registry's source stays valid) and
        ingest them; one ingest at a time, other sessions keep asking meanwhile.

        Each upload is stored under its content's hash and its own name (``3f2a...-book.txt``):
        two uploads named ``book.txt`` are two books with two sources, and the same text uploaded
        again is the same file. A refused upload removes only the copy this call made; its
        reason names the upload as the user named it, never a path of this server.

        ``discard_under``: the folder the web server keeps its uploads in (Gradio's, under the
        system temp folder); an upload there is deleted as soon as its copy is stored, instead
        of staying there, a second copy of every book, until someone cleans the temp folder.
        """
        say = say or (lambda _m: None)
        uploads = self.home / "uploads"
        uploads.mkdir(parents=True, exist_ok=True)
        kept: list[Path] = []
        made: set[Path] = set()  # copies this call created: the only ones it may remove
        names: dict[str, str] = {}  # stored path -> the name the user gave
        for p in map(Path, paths):
            dest = uploads / stored_name(p)
            if p.resolve() != dest.resolve() and not dest.exists():
                tmp = dest.with_name(f".{dest.name}.part")
                shutil.copyfile(p, tmp)
                tmp.replace(dest)
                made.add(dest)
            kept.append(dest)
            names[str(dest)] = p.name
            if discard_under is not None and p.resolve() != dest.resolve():
                discard_upload(p, discard_under)
        if not self._ingest_lock.acquire(blocking=False):
            say("waiting for another upload to finish ...")
            self._ingest_lock.acquire()
        try:
            report = self.library().ingest(kept, on_event=say)
        finally:
            self._ingest_lock.release()
        for book_id in report.ingested:
            self._chapters.pop(book_id, None)
        failed = []
        for path, reason in report.failed:
            if Path(path) in made:  # a refused upload leaves no copy behind, and only its own
                Path(path).unlink(missing_ok=True)
            name = names.get(path, Path(path).name)
            failed.append((name, reason.replace(path, name).replace(str(self.home), "library")))
        report.failed = failed
        return report

    # -- answering --------------------------------------------------------------------------
    @property
    def llm(self) -> Any:
        return self.answer_llm.llm if self.answer_llm is not None else None

    def llm_line(self) -> str:
        if self.answer_llm is not None:
            return self.answer_llm.description
        return "extractive (no LLM" + (f": {self.llm_note})" if self.llm_note else ")")

    def backends(self, book_ids: Sequence[str], retrieval: str) -> str:
        """One line: which LLM, segmenter, retrieval (and reranker) and store answered."""
        rows = {r.book_id: r for r in self.books()}
        segs = sorted({rows[b].segmenter for b in book_ids if b in rows}) or ["?"]
        return (
            f"LLM: {self.llm_line()} · segmenter: {', '.join(segs)} · retrieval: {retrieval} · "
            f"store: {store_description(self.settings.qdrant_url)}"
        )

    def condense(self, message: str, history: Sequence[Turn], title: str) -> str:
        """The follow-up as a standalone question: the LLM rewrites it with the recent history;
        without an LLM (or when it fails) a follow-up that names nobody is searched together
        with the previous question."""
        message = " ".join(message.split())
        if not history:
            return message
        llm = self.llm
        if llm is not None:
            recent = history[-HISTORY_TURNS:]
            transcript = "\n".join(
                f"user: {_clip(t.question, HISTORY_QUESTION_CHARS)}\n"
                f"assistant: {_clip(t.answer, HISTORY_ANSWER_CHARS)}"
                for t in recent
            )
            try:
                raw = llm.complete(condense_prompt(title, transcript, message)).text
                raw = _ECHOED_TAG.sub("", raw)  # a small model may echo the prompt's tags
                lines = [ln.strip().strip('"').strip() for ln in raw.splitlines() if ln.strip()]
                if lines:
                    return lines[0]
            except Exception as exc:  # the answer call will say what is wrong with the LLM
                logger.warning("rewriting the follow-up failed (%s); searching as typed", exc)
        return _concat_follow_up(message, history)

    def ask(
        self,
        message: str,
        book_ids: Sequence[str],
        *,
        upto_chapter: int | None = None,
        history: Sequence[Turn] = (),
        use_llm: bool = True,
        retrieval: str | None = None,
        top_k: int | None = None,
    ) -> tuple[AnswerStream, str]:
        """``(stream, standalone question)``. Raises ``ValueError`` (``UnknownBookError``) for an
        empty question or books not loaded, before anything runs."""
        if not " ".join(message.split()):
            raise ValueError("the question is empty")
        if not book_ids:
            raise ValueError("choose at least one book")
        records = Library.read_registry(self.home)  # once per question
        done, _ = loaded_books(records)
        title = "; ".join(done.get(b, b) for b in book_ids)
        engine = self.engine(
            book_ids,
            records,
            upto_chapter=upto_chapter,
            use_llm=use_llm,
            retrieval=retrieval,
            top_k=top_k,
        )
        standalone = (
            self.condense(message, history, title)
            if use_llm
            else _concat_follow_up(message, history)
        )
        return engine.ask(standalone), standalone

    def engine(
        self,
        book_ids: Sequence[str],
        records: list[BookRecord],
        *,
        upto_chapter: int | None = None,
        use_llm: bool = True,
        retrieval: str | None = None,
        top_k: int | None = None,
    ) -> BaseQueryEngine:
        """The query engine for these books and settings, built once and reused by every
        question that asks with them. One book with a character index or assets gets the routed
        engine (narrative tools, as in `litrag ask`); else the plain passage engine. An ingest,
        a removal or a new asset build changes the registry, which makes a new one."""
        llm = self.llm if use_llm else None
        key = (
            id(llm),  # the cached engine holds the LLM, so its id is not reused meanwhile
            tuple(book_ids),
            upto_chapter,
            use_llm,
            retrieval,
            top_k,
            tuple((r.book_id, r.status, r.fingerprint, r.ingested_at) for r in records),
            self.asset_store() is not None,
        )
        with self._engines_lock:
            engine = self._engines.get(key)
            if engine is None:
                settings = RetrievalSettings.from_settings(self.settings, retrieval)
                if top_k:
                    settings.top_k = top_k
                engine = build_routed_engine(
                    self.settings,
                    list(book_ids),
                    assets=self.asset_store(),
                    upto_chapter=upto_chapter,
                    llm=llm,
                    llm_description=self.answer_llm.description if llm is not None else None,
                    llm_health=self.answer_llm.diagnose if llm is not None else None,
                    retrieval=settings,
                    store=self.store,
                    children_store=self.children_store,
                    embed_model=self.embed_model,
                    records=records,
                )
                if len(self._engines) >= MAX_ENGINES:  # the oldest goes first
                    self._engines.pop(next(iter(self._engines)))
                self._engines[key] = engine
            return engine

    @staticmethod
    def finished(stream: AnswerStream, message: str, standalone: str) -> Answer:
        """The answer as the reader asked it: ``question`` typed, ``standalone_question`` the
        rewrite that was searched (when it differs)."""
        answer = stream.answer()
        question = " ".join(message.split())
        return answer.model_copy(
            update={
                "question": question,
                "standalone_question": standalone if standalone != question else None,
            }
        )

    def close(self) -> None:
        if self.answer_llm is not None:
            self.answer_llm.close()
        if self._assets is not None:
            self._assets.close()
        for store in (self.store, self.children_store):
            if hasattr(store, "close"):
                store.close()


class _SharedAssetRemover:
    """The library's hook for a removed or replaced book (an upload of a changed file): its
    assets go too, through the asset store this process already holds (the embedded lock is
    one per process) rather than a second opening of it."""

    def __init__(self, service: ChatService) -> None:
        self.service = service

    def remove(self, book_id: str) -> None:
        from litrag.narrative.asset_store import remove_graph
        from litrag.narrative.assets import extractions_path

        extractions_path(self.service.home, book_id).unlink(missing_ok=True)
        assets = self.service.asset_store()
        if assets is None:
            remove_graph(self.service.home, book_id)
        else:
            assets.remove_book(book_id)


def _concat_follow_up(message: str, history: Sequence[Turn]) -> str:
    """Without an LLM: a follow-up that names nobody is searched with the previous question."""
    message = " ".join(message.split())
    if history and (_FOLLOW_UP.search(message) or len(message.split()) <= 3):
        return f"{_clip(history[-1].question, HISTORY_QUESTION_CHARS)} {message}"
    return message


def _clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (cut at a word where one is near)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.8 else cut).rstrip() + " …"
