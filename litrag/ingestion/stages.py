"""The per-book stages of an ingest, shared by the one-process path and the distributed one.

``Library`` (and its prefetch thread) and the Ray workers (``litrag.ingestion.ray_ingest``) call
these same functions, so both paths cut the same blocks with the same ids: load and chapters
(``prepare_book``), segmentation keyed as the ``IngestionPipeline`` cache keys it, and the rest of
the pipeline's steps (``embed_book``: alignment, character tags, embeddings, the children's
vectors and the sentence windows' vectors). What a worker computes reaches the library's own
pipeline as cache entries and known vectors; the pipeline then only writes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.ingestion.prefetch import Prefetched
from litrag.ingestion.registry import text_digest

_NODE_NAMESPACE = uuid.UUID("6f1c2a52-5b1e-4c55-9d7c-6d1f2b8e7a10")


def node_id_for(index: int, doc: BaseNode) -> str:
    """Deterministic node ids: the same chapter cut the same way gives the same ids."""
    return str(uuid.uuid5(_NODE_NAMESPACE, f"{doc.node_id}:{index}"))


@dataclass
class BookParts:
    """What cuts and embeds a book: the parser, the embedder and the optional steps. Built by
    ``litrag.builders.build_book_parts`` from the settings, in the driver and in each worker."""

    parser: Any
    embed_model: Any = None
    aligner: Any = None  # ParagraphAligner, with paragraph children
    characters: Any = None  # CharacterIndexer, with the character index
    window_encoder: Any = None  # SentenceWindowEncoder, for the stores that keep windows

    def __post_init__(self) -> None:
        if self.parser is not None:
            self.parser.id_func = node_id_for


def settings_key(parts: BookParts) -> str:
    """What, besides a book's text, shapes its nodes: part of its fingerprint."""
    return json.dumps(
        {
            "parser": parts.parser.to_dict(),
            "embed": parts.embed_model.to_dict(),
            **({"aligner": parts.aligner.to_dict()} if parts.aligner else {}),
            **({"characters": parts.characters.fingerprint()} if parts.characters else {}),
        },
        sort_keys=True,
        default=str,
    )


def fingerprint(text: str, key: str) -> str:
    """Changes when the book's text or its ``settings_key`` changes (a big book is not copied)."""
    return text_digest(text, "\0", key)


def pipeline_steps(parts: BookParts, tagger: Any = None) -> list[Any]:
    """The ``IngestionPipeline``'s transformations, in order."""
    return [
        parts.parser,
        *([parts.aligner] if parts.aligner else []),
        *([tagger] if tagger else []),
        parts.embed_model,
    ]


def chapter_batches(docs: Sequence[BaseNode], size: int) -> Iterator[tuple[int, list[BaseNode]]]:
    """``(start, chapters)``: the batches the pipeline runs and persists one at a time."""
    for start in range(0, len(docs), size):
        yield start, list(docs[start : start + size])


def prepare_book(
    file: Path,
    parser: Any,
    max_bytes: int,
    batch_chapters: int,
    key: str,
    done_fingerprint: Callable[[str], str | None],
    cached: Callable[[str], bool] = lambda _key: False,
) -> Prefetched:
    """Load, split and segment one book: what the pipeline would segment, keyed as its cache
    keys it, so the pipeline finds it there. ``done_fingerprint(book_id)`` is the fingerprint of
    a complete ingest of the book (or None): a book unchanged since is not segmented again."""
    from llama_index.core.ingestion.pipeline import get_transformation_hash

    out = Prefetched(file)
    t0 = time.perf_counter()
    out.book = load_book(file, max_bytes=max_bytes)
    t1 = time.perf_counter()
    out.docs = split_chapters(out.book)
    t2 = time.perf_counter()
    if done_fingerprint(out.book.book_id) != fingerprint(out.book.text, key):  # work to do
        for _start, batch in chapter_batches(out.docs, batch_chapters):
            cache_key = get_transformation_hash(batch, parser)
            if not cached(cache_key):
                out.segmented.append((cache_key, parser(batch)))
    out.seconds = {"load": t1 - t0, "chapters": t2 - t1, "segment": time.perf_counter() - t2}
    return out


def embed_book(
    ready: Prefetched,
    parts: BookParts,
    batch_chapters: int,
    tagger: Any = None,
    block_windows: bool = False,
    child_windows: bool = False,
) -> None:
    """The rest of the pipeline for a prepared book, as cache entries (``ready.segmented`` grows
    by each step's output) and known vectors (``ready.vectors``: the paragraph children's and
    the sentence windows' the stores would embed), so a ``Library`` only writes them."""
    from llama_index.core.ingestion import IngestionCache
    from llama_index.core.ingestion.pipeline import run_transformations

    from litrag.chunkers.children import block_children

    cache = IngestionCache()
    for cache_key, nodes in ready.segmented:
        cache.put(cache_key, nodes)
    steps = pipeline_steps(parts, tagger)
    texts: list[str] = []  # to embed as themselves: the children
    windows: list[str] = []  # the sentence windows of what the stores keep windowed
    for _start, batch in chapter_batches(ready.docs, batch_chapters):
        if parts.aligner is not None:
            parts.aligner.for_chapters(batch)
        blocks = run_transformations(list(batch), steps, cache=cache)
        if block_windows:
            windows += [w for n in blocks for w in _windows(parts, n)]
        if parts.aligner is not None:
            kids = block_children(blocks, batch)
            texts += [k.get_content(metadata_mode=MetadataMode.EMBED) for k in kids]
            if child_windows:
                windows += [w for k in kids for w in _windows(parts, k)]
    entries = cache.cache.get_all(collection=cache.collection)
    ready.segmented = [(k, cache.get(k) or []) for k in entries]
    wanted = list(dict.fromkeys(texts + windows))
    if wanted:
        vectors = parts.embed_model.get_text_embedding_batch(wanted)
        ready.vectors = dict(zip(wanted, vectors, strict=True))


def _windows(parts: BookParts, node: BaseNode) -> list[str]:
    return parts.window_encoder.windows(node.get_content(metadata_mode=MetadataMode.NONE))


def fill_known(nodes: Sequence[BaseNode], known: Mapping[str, Sequence[float]]) -> list[BaseNode]:
    """Give ``nodes`` their vectors from ``known`` (by the text they embed); the rest, returned,
    are to be embedded."""
    todo = []
    for node in nodes:
        vec = known.get(node.get_content(metadata_mode=MetadataMode.EMBED))
        if vec is None:
            todo.append(node)
        else:
            node.embedding = list(vec)
    return todo


class KnownVectors:
    """An embed function that answers from vectors computed elsewhere, embedding the rest."""

    def __init__(
        self,
        known: Mapping[str, Sequence[float]],
        embed: Callable[[list[str]], Sequence[Sequence[float]]],
    ) -> None:
        self.known, self.embed, self.missed = known, embed, 0

    def __call__(self, texts: list[str]) -> list[Sequence[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        made = dict(zip(missing, self.embed(missing), strict=True)) if missing else {}
        self.missed += len(missing)
        return [self.known[t] if t in self.known else made[t] for t in texts]


@contextmanager
def known_windows(encoder: Any, known: Mapping[str, Sequence[float]] | None) -> Iterator[None]:
    """While a prepared book is written, its sentence windows come from ``known``."""
    if encoder is None or not known:
        yield
        return
    own = encoder.embed
    encoder.embed = KnownVectors(known, own)
    try:
        yield
    finally:
        encoder.embed = own
