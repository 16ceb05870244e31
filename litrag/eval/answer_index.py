"""Where ``litrag eval answers`` finds its passages without a library: each book chunked by one
chunker (the harness's chunk cache), embedded (the embedding cache) and stored in an Edge collection
of its own (``answers-<chunker>``), per-book BM25 IDF as in the retrieval protocol."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import Document, MetadataMode

from litrag.eval.embedding_cache import CachedEmbedder, text_key
from litrag.eval.questions import resolve_book
from litrag.eval.registry import chunk_book, chunker_specs

Say = Callable[[str], None]


@dataclass
class LoadedBook:
    file: str
    book_id: str
    title: str
    key: str  # text hash: the chunk cache key
    docs: list[Document]


def load_eval_book(book_file: str, books_dir: Path) -> LoadedBook:
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book

    loaded = load_book(resolve_book(book_file, books_dir))
    docs = split_chapters(loaded)
    return LoadedBook(book_file, loaded.book_id, loaded.title, text_key(loaded.text)[:16], docs)


class CachedQueryEmbedding(BaseEmbedding):
    """A LlamaIndex embedding over the harness's ``CachedEmbedder``: queries and texts come from
    (and go to) the shared embedding cache, and the model loads only on a miss."""

    _embedder: CachedEmbedder = PrivateAttr()

    def __init__(self, embedder: CachedEmbedder, **kwargs: Any) -> None:
        super().__init__(model_name=embedder.model_key, **kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "CachedQueryEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed([query], kind="query")[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed([text])[0].tolist()


class HarnessIndex:
    """Books chunked by one chunker (harness chunk cache), embedded (embedding cache), stored in
    the Edge collection ``answers-<chunker>``; rebuilt each run from the caches, which is cheap."""

    def __init__(self, chunker: str, cache_dir: Path, embedder: CachedEmbedder, say: Say) -> None:
        from litrag.stores.edge_store import QdrantEdgeVectorStore

        self.spec = chunker_specs([chunker])[0]
        self.cache_dir = cache_dir
        self.embedder = embedder
        self.say = say
        slug = re.sub(r"[^a-z0-9]+", "-", chunker.lower()).strip("-")
        self.store = QdrantEdgeVectorStore(
            path=cache_dir / "edge", collection_name=f"answers-{slug}", sparse_idf_scope="filter"
        )
        self.store.clear()
        self.embed_model = CachedQueryEmbedding(embedder)
        self.chunks: dict[str, int] = {}

    @property
    def label(self) -> str:
        return self.spec.label

    def add(self, book: LoadedBook) -> None:
        from litrag.scoring.bm25 import BM25Encoder, BM25Index, tokenize

        t0 = time.perf_counter()
        nodes, hit = chunk_book(self.spec, book.docs, book.key, self.cache_dir)
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        for node, vec in zip(nodes, self.embedder.embed(texts), strict=True):
            node.embedding = vec.tolist()
        enc = BM25Encoder(avg_len=BM25Index.fit_avg_len(len(tokenize(x)) for x in texts))
        self.store.set_query_functions(enc.doc_fn, enc.query_fn)
        self.store.add(list(nodes))
        self.chunks[book.book_id] = len(nodes)
        self.say(
            f"  {self.spec.key} {book.book_id}: {len(nodes)} chunks"
            f"{' (cached)' if hit else ''}, {time.perf_counter() - t0:.1f}s"
        )

    def close(self) -> None:
        self.store.close()
