"""Answer evaluation: generate answers with the project's own retrieval and answering code, score
them against reference answers, and (with a judge LLM) rate answers and retrieved passages.

Each question is answered exactly as ``litrag ask`` answers it: ``BookRetriever`` (hybrid dense +
BM25 inside the question's book, the ``embedded`` preset unless told otherwise) feeding
``BookQueryEngine`` (the paper's answer prompt), with the configured LLM, or extractively without
one (the baseline: the best-matching sentences of the top block). The blocks come from either

- the retrieval harness's cached chunking (default): each book is chunked by the chosen chunker
  (``litrag.eval.retrieval.chunk_book``, cached on disk), embedded through the shared embedding
  cache and stored in a Qdrant Edge collection of its own (``answers-<chunker>``), per-book BM25
  IDF as in the retrieval protocol; or
- the library at ``$LITRAG_HOME`` (``library=True``), built by ``litrag ingest``: the book must be
  ingested, and the chunking is whatever the library used.

Scores: EM, token F1, ROUGE-L, METEOR, optional BERTScore (``answer_metrics``); with a judge,
Answer Accuracy and Context Relevance (``judge``); on GutenQA also whether the gold evidence span
is inside the retrieved blocks (``evidence@k``). What the answer is scored as: the LLM's text, or
for an extractive answer its quoted sentences without the label.

Generated answers and judge ratings are cached in SQLite (``answers.sqlite`` in the cache folder)
under a key of the question, its book, the chunker, the exact retrieved passages, the LLM's
identity and the prompt, so a rerun (or a run interrupted midway) only computes what is new, and a
change of chunking, model or prompt recomputes exactly the answers it affects. Answers that ended
in an LLM error are never cached.
"""

from __future__ import annotations

import hashlib
import json
import re
import resource
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import Document, MetadataMode, QueryBundle

from litrag.eval.answer_metrics import METRICS, AnswerScorer
from litrag.eval.judge import Judge
from litrag.eval.retrieval import (
    CachedEmbedder,
    EmbeddingCache,
    chunk_book,
    chunker_specs,
    environment,
    resolve_book,
    text_key,
    windowed_minilm_embedder,
)
from litrag.eval.spans import normalize

Dataset = Literal["gutenqa", "literaryqa"]
DATASETS: dict[str, str] = {
    "gutenqa": "gutenqa/questions.jsonl",
    "literaryqa": "literaryqa/local_books_literaryqa_subset.jsonl",
}
DEFAULT_CHUNKER = "litseg-offline"
CACHE_VERSION = "answers-v1"
Say = Callable[[str], None]


# --------------------------------------------------------------------------------- questions
@dataclass(frozen=True)
class AnswerQuestion:
    """A question with its book, reference answer(s) and (GutenQA) gold evidence span(s)."""

    id: str
    book_file: str
    question: str
    references: tuple[str, ...]
    evidence: tuple[str, ...] = ()


def _strings(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value or [])
    return tuple(dict.fromkeys(s.strip() for s in items if isinstance(s, str) and s.strip()))


Dropped = list[tuple[str, str]]  # (question id, book_file)


def load_gutenqa(path: Path) -> tuple[list[AnswerQuestion], Dropped]:
    """GutenQA-style JSONL: ``question``, ``book_file``, ``answer`` (str or list) and optionally
    ``chunk_must_contain``. Rows without an answer, and rows whose ``note`` says the published
    answer is wrong about the text, are dropped (returned with their books)."""
    out: list[AnswerQuestion] = []
    dropped: Dropped = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            qid = str(row.get("id", f"line{n}"))
            refs = _strings(row.get("answer") or row.get("answers"))
            if not refs or "answer is wrong" in str(row.get("note") or "").lower():
                dropped.append((qid, row.get("book_file", "")))
                continue
            out.append(
                AnswerQuestion(
                    qid,
                    row["book_file"],
                    row["question"],
                    refs,
                    _strings(row.get("chunk_must_contain")),
                )
            )
    return out, dropped


def find_gutenberg_book(books_dir: Path, gutenberg_id: str) -> str | None:
    """``books/pg<ID>_*.txt`` under ``books_dir`` (or its ``books/``), as a ``book_file``."""
    for folder, prefix in ((books_dir / "books", "books/"), (books_dir, "")):
        hits = sorted(folder.glob(f"pg{gutenberg_id}_*.txt")) if folder.is_dir() else []
        if hits:
            return prefix + hits[0].name
    return None


def load_literaryqa(path: Path, books_dir: Path) -> tuple[list[AnswerQuestion], Dropped]:
    """LiteraryQA records (one per book: ``gutenberg_id``, ``qas`` with ``question`` and
    ``answers``); a book not under ``books_dir`` drops its questions."""
    out: list[AnswerQuestion] = []
    dropped: Dropped = []
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            doc = json.loads(line)
            gid = str(doc["gutenberg_id"])
            book = find_gutenberg_book(books_dir, gid)
            for i, qa in enumerate(doc.get("qas", [])):
                qid = f"lqa.{gid}.{i}"
                refs = _strings(qa.get("answers"))
                if book is None or not refs:
                    dropped.append((qid, book or f"pg{gid} (not found)"))
                    continue
                out.append(AnswerQuestion(qid, book, " ".join(qa["question"].split()), refs))
    return out, dropped


def load_answer_questions(
    path: Path, dataset: Dataset, books_dir: Path
) -> tuple[list[AnswerQuestion], Dropped]:
    if dataset == "gutenqa":
        return load_gutenqa(path)
    if dataset == "literaryqa":
        return load_literaryqa(path, books_dir)
    raise ValueError(f"unknown dataset {dataset!r}: gutenqa or literaryqa")


def select_questions(
    questions: Sequence[AnswerQuestion],
    only_books: Sequence[str] = (),
    limit: int | None = None,
    dropped: Dropped = (),
) -> tuple[list[AnswerQuestion], list[str]]:
    """Questions of the books whose ``book_file`` contains one of ``only_books``, the first
    ``limit`` of them in file order; and the ids of the dropped questions of those books."""
    kept = [q for q in questions if not only_books or any(b in q.book_file for b in only_books)]
    kept = kept[:limit] if limit is not None else kept
    books = {q.book_file for q in kept}
    return kept, [qid for qid, book in dropped if book in books]


# --------------------------------------------------------------------------------- cache
def _digest(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()


class ResultCache:
    """JSON values in SQLite keyed by a kind and the hash of a JSON key; committed per put, so an
    interrupted run keeps everything it finished."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=120)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS results (kind TEXT, key TEXT, value TEXT, "
            "PRIMARY KEY (kind, key))"
        )
        self._db.commit()

    def get(self, kind: str, key: dict[str, Any]) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT value FROM results WHERE kind=? AND key=?", (kind, _digest(key))
        ).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, kind: str, key: dict[str, Any], value: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?)",
            (kind, _digest(key), json.dumps(value, ensure_ascii=False)),
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()


# --------------------------------------------------------------------------------- books
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
        from litrag.query.edge_store import QdrantEdgeVectorStore

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
        from litrag.query.bm25 import BM25Encoder, BM25Index, tokenize

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


# --------------------------------------------------------------------------------- results
@dataclass
class AnswerRow:
    """One question's answer, its scores and its judge verdicts."""

    id: str
    book: str
    question: str
    references: list[str]
    prediction: str
    mode: str
    answered_by: str
    sources: list[str]
    contexts: int
    scores: dict[str, float | None]
    evidence_hit: bool | None = None
    judge: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    cached: bool = False
    seconds: float = 0.0  # the whole question: retrieval, answer (or cache), metrics, judge
    seconds_llm: float = 0.0  # generating the answer when it was generated (cached: then)


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


SCORE_KEYS = (*METRICS, "bertscore", "answer_accuracy", "context_relevance")


def aggregate(rows: Sequence[AnswerRow]) -> dict[str, Any]:
    """Means over questions (a metric's None values are left out and counted)."""
    out: dict[str, Any] = {"questions": len(rows)}
    for key in SCORE_KEYS:
        vals = [r.scores.get(key) for r in rows]
        out[key] = _mean(vals)
        out[f"{key}_n"] = sum(v is not None for v in vals)
    hits = [r.evidence_hit for r in rows if r.evidence_hit is not None]
    out["evidence_hit"] = statistics.fmean(hits) if hits else None
    out["evidence_n"] = len(hits)
    out["errors"] = sum(r.error is not None for r in rows)
    return out


@dataclass
class AnswerRun:
    config: dict[str, Any]
    metrics: dict[str, str]  # metric key -> what was computed, or why it was skipped
    rows: list[AnswerRow]
    dropped: list[str]
    answers_generated: int = 0
    answers_cached: int = 0
    judge_calls: int = 0
    judge_cached: int = 0
    seconds: float = 0.0
    generation_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def overall(self) -> dict[str, Any]:
        return aggregate(self.rows)

    def per_book(self) -> dict[str, dict[str, Any]]:
        books: dict[str, list[AnswerRow]] = {}
        for r in self.rows:
            books.setdefault(r.book, []).append(r)
        return {b: aggregate(rs) for b, rs in books.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "metrics": self.metrics,
            "overall": self.overall,
            "per_book": self.per_book(),
            "dropped": self.dropped,
            "answers_generated": self.answers_generated,
            "answers_cached": self.answers_cached,
            "judge_calls": self.judge_calls,
            "judge_cached": self.judge_cached,
            "seconds": round(self.seconds, 1),
            "generation_seconds": round(self.generation_seconds, 1),
            "peak_rss_mb": round(self.peak_rss_mb),
            "environment": self.environment,
            "rows": [asdict(r) for r in self.rows],
        }


# --------------------------------------------------------------------------------- answering
@dataclass
class Generator:
    """The answering LLM (None: extractive) and the identity its answers are cached under."""

    llm: Any = None
    identity: str = "extractive (no LLM)"
    answer_tokens: int = 256
    passage_order: str = "score"
    focus_words: int = 0  # words of each passage the LLM reads; 0: whole passages


def prompt_fingerprint(engine: Any) -> str:
    """The answer prompt's text (every message template), hashed: a new prompt, new answers."""
    from litrag.query.answer import EXTRACTIVE_LABEL

    if engine.llm is None:
        return "extractive:" + hashlib.sha256(EXTRACTIVE_LABEL.encode()).hexdigest()[:12]
    texts = [m.content or "" for m in engine.qa_prompt.message_templates]
    texts.append("chunk heading: chapter, and the subtitle only when an LLM wrote it")
    order = getattr(engine, "passage_order", "score")
    if order != "score":  # the passages go in another order: another prompt
        texts.append(f"passage order: {order}")
    focus = getattr(engine, "focus", None)
    if focus is not None:  # the LLM reads excerpts: another prompt
        texts.append(focus.describe())
    return hashlib.sha256("\n\x00".join(texts).encode()).hexdigest()[:16]


def prediction_text(record: dict[str, Any]) -> str:
    """What is scored: the LLM's answer, or an extractive answer's quoted sentences alone."""
    if record["mode"] == "extractive":
        return " ".join(record.get("evidence") or [])
    if record["mode"] == "none":
        return ""
    return record["text"]


def evidence_in(contexts: Sequence[str], spans: Sequence[str]) -> bool | None:
    """Whether some retrieved passage holds a gold span whole (None without spans)."""
    if not spans:
        return None
    norm = [normalize(c) for c in contexts]
    return any(normalize(s) in c for s in spans for c in norm)


def _answer(
    engine: Any,
    q: AnswerQuestion,
    book: LoadedBook,
    gen: Generator,
    chunker: str,
    cache: ResultCache | None,
) -> tuple[dict[str, Any], list[str], bool]:
    """The answer record for ``q`` (cached or generated), the retrieved passages, and whether
    it came from the cache."""
    from litrag.query.answer import AnswerStream, passage

    nodes = engine.retrieve(QueryBundle(q.question))
    contexts = [passage(n) for n in nodes]
    key = {
        "version": CACHE_VERSION,
        "question": q.question,
        "book": book.key,
        "chunker": chunker,
        "retrieval": engine.retriever.describe(),
        "contexts": _digest(contexts),
        "llm": gen.identity,
        "prompt": prompt_fingerprint(engine),
        "answer_tokens": gen.answer_tokens,
    }
    hit = cache.get("answer", key) if cache is not None else None
    if hit is not None:
        return hit, contexts, True
    t0 = time.perf_counter()
    ans = AnswerStream.from_response(engine.query(q.question)).answer()
    record = {
        "text": ans.text,
        "mode": ans.mode,
        "answered_by": ans.answered_by,
        "evidence": ans.evidence,
        "sources": [s.citation() for s in ans.sources],
        "error": ans.error,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    if cache is not None and ans.error is None:
        cache.put("answer", key, record)
    return record, contexts, False


def _engine(
    book: LoadedBook,
    gen: Generator,
    retrieval: Any,
    index: HarnessIndex | None,
    library: Any,
    store: Any,
) -> Any:
    """A ``BookQueryEngine`` for ``book``: over the harness index, or the library's store."""
    from litrag.query.answer import BookQueryEngine
    from litrag.query.retriever import BookRetriever

    if index is not None:
        index.add(book)
        retriever = BookRetriever(
            index.store,
            index.embed_model,
            book.book_id,
            settings=retrieval,
            books={book.book_id: book.title},
        )
        return BookQueryEngine(
            retriever,
            gen.llm,
            streaming=False,
            answer_tokens=gen.answer_tokens,
            answered_by=gen.identity,
            passage_order=gen.passage_order,  # type: ignore[arg-type]
            focus=_focus(gen, index.embed_model),
        )
    from litrag.builders import build_query_engine

    engine = build_query_engine(
        library,
        [book.book_id],
        llm=gen.llm,
        llm_description=gen.identity,
        retrieval=retrieval,
        store=store,
        streaming=False,
    )
    engine.answer_tokens = gen.answer_tokens
    engine.passage_order = gen.passage_order
    engine.focus = _focus(gen, engine.retriever.embed_model)
    return engine


def _focus(gen: Generator, embed: Any) -> Any:
    """The excerpt step ``gen`` asks for: only an LLM reads excerpts, and they need embeddings."""
    from litrag.query.focus import PassageFocus

    if not gen.focus_words or gen.llm is None or embed is None:
        return None
    return PassageFocus(embed, max_words=gen.focus_words)


def _evaluate_one(
    engine: Any,
    q: AnswerQuestion,
    book: LoadedBook,
    gen: Generator,
    chunk_key: str,
    cache: ResultCache,
    scorer: AnswerScorer,
    judge: Judge | None,
) -> tuple[AnswerRow, bool]:
    """Answer (or recall) one question, score it and judge it."""
    t0 = time.perf_counter()
    record, contexts, hit = _answer(engine, q, book, gen, chunk_key, cache)
    pred = prediction_text(record)
    row = AnswerRow(
        id=q.id,
        book=q.book_file,
        question=q.question,
        references=list(q.references),
        prediction=pred,
        mode=record["mode"],
        answered_by=record["answered_by"],
        sources=record["sources"],
        contexts=len(contexts),
        scores=dict(scorer.score(pred, q.references)),
        evidence_hit=evidence_in(contexts, q.evidence),
        error=record["error"],
        cached=hit,
        seconds_llm=record["seconds"],
    )
    if judge is not None:
        aa = judge.answer_accuracy(q.question, pred, q.references)
        cr = judge.context_relevance(q.question, contexts)
        row.scores["answer_accuracy"] = aa.score
        row.scores["context_relevance"] = cr.score
        row.judge = {"answer_accuracy": aa.to_json(), "context_relevance": cr.to_json()}
    row.seconds = round(time.perf_counter() - t0, 2)
    return row, hit


def evaluate_answers(
    questions: Sequence[AnswerQuestion],
    books_dir: Path,
    *,
    cache_dir: Path,
    dataset: str = "gutenqa",
    chunker: str = DEFAULT_CHUNKER,
    generator: Generator | None = None,
    judge: Judge | None = None,
    scorer: AnswerScorer | None = None,
    retrieval: Any = None,
    library: Any = None,
    embedder: CachedEmbedder | None = None,
    dropped: Sequence[str] = (),
    say: Say = print,
) -> AnswerRun:
    """Answer, score and judge every question; see the module docstring.

    ``library``: a ``litrag.settings.Settings`` whose library (at ``home``) is searched instead of
    the harness's chunking. ``retrieval``: ``RetrievalSettings`` (default: the ``embedded``
    preset from the environment).
    """
    from litrag.query.retriever import RetrievalSettings

    t_start = time.perf_counter()
    gen = generator or Generator()
    scorer = scorer or AnswerScorer.create()
    retrieval = retrieval or RetrievalSettings.from_env()
    cache = ResultCache(cache_dir / "answers.sqlite")
    lend_cache = judge is not None and judge.cache is None
    if judge is not None and lend_cache:
        judge.cache = cache
    emb_cache = None
    index: HarnessIndex | None = None
    shared_store = None
    rows: list[AnswerRow] = []
    generated = cached = 0
    gen_seconds = 0.0
    judge_calls0 = judge.calls if judge else 0
    judge_cached0 = judge.cached if judge else 0

    by_book: dict[str, list[AnswerQuestion]] = {}
    for q in questions:
        by_book.setdefault(q.book_file, []).append(q)
    say(f"{len(questions)} questions over {len(by_book)} books; dropped: {list(dropped)}")
    source_label = ""
    try:
        if library is None:
            if embedder is None:
                emb_cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
                embedder = windowed_minilm_embedder(emb_cache, say=say)
            index = HarnessIndex(chunker, cache_dir, embedder, say)
            source_label = f"{index.label} (eval harness chunk cache, Edge collection)"
        else:
            source_label = f"library at {library.home}"
        for book_file, qs in by_book.items():
            book = load_eval_book(book_file, books_dir)
            engine = _engine(book, gen, retrieval, index, library, shared_store)
            if library is not None:
                shared_store = engine.retriever.vector_store  # one opener: reuse it
            chunk_key = chunker if library is None else f"library:{library.home}"
            for q in qs:
                row, hit = _evaluate_one(engine, q, book, gen, chunk_key, cache, scorer, judge)
                rows.append(row)
                if hit:
                    cached += 1
                else:
                    generated += 1
                    gen_seconds += row.seconds_llm
                took = "cached" if hit else f"{row.seconds_llm:.1f}s"
                say(
                    f"  {q.id}: {took} F1 {row.scores['f1']:.2f}"
                    + (f" AA {_fmt(row.scores.get('answer_accuracy'))}" if judge else "")
                    + (f" error: {row.error}" if row.error else "")
                )
    finally:
        if index is not None:
            index.close()
        if shared_store is not None and hasattr(shared_store, "close"):
            shared_store.close()
        if emb_cache is not None:
            emb_cache.close()
        if judge is not None and lend_cache:
            judge.cache = None
        cache.close()

    if scorer.bertscore is not None and rows:
        say(f"BERTScore over {len(rows)} answers ...")
        f1s = scorer.bertscore([r.prediction for r in rows], [r.references for r in rows])
        for r, f in zip(rows, f1s, strict=True):
            r.scores["bertscore"] = f
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    config = {
        "dataset": dataset,
        "chunker": chunker if library is None else "library",
        "source": source_label,
        "retrieval": retrieval.describe(),
        "top_k": retrieval.top_k,
        "llm": gen.identity,
        "answer_tokens": gen.answer_tokens,
        "passage_order": gen.passage_order,
        "focus_words": gen.focus_words,
        "judge": judge.identity if judge is not None else None,
        "judge_retries": judge.max_retries if judge is not None else None,
    }
    return AnswerRun(
        config=config,
        metrics={
            **scorer.labels(),
            "answer_accuracy": (
                f"judge {judge.identity}: two prompts, ratings 0/2/4 -> [0, 1], averaged"
                if judge
                else "skipped: no judge LLM (--judge local, or --judge-url URL)"
            ),
            "context_relevance": (
                f"judge {judge.identity}: two prompts, ratings 0/1/2 -> [0, 1], averaged"
                if judge
                else "skipped: no judge LLM (--judge local, or --judge-url URL)"
            ),
        },
        rows=rows,
        dropped=list(dropped),
        answers_generated=generated,
        answers_cached=cached,
        judge_calls=(judge.calls - judge_calls0) if judge else 0,
        judge_cached=(judge.cached - judge_cached0) if judge else 0,
        seconds=time.perf_counter() - t_start,
        generation_seconds=gen_seconds,
        peak_rss_mb=peak / 1024 / (1024 if sys.platform == "darwin" else 1),
        environment={**environment(), **_metric_versions()},
    )


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _metric_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("rouge-score", "nltk", "bert-score"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "-"
    return out


# --------------------------------------------------------------------------------- LLMs
def build_judge(
    settings: Any,
    *,
    local: bool = False,
    url: str | None = None,
    model: str | None = None,
    answer_llm: Any = None,
    max_retries: int = 2,
    timeout: float | None = None,
) -> tuple[Judge | None, Any]:
    """The judge (None when none is asked for) and what to ``close()`` after the run.

    ``url`` (+ ``model``): any OpenAI-compatible server. ``local``: the packaged llama.cpp model,
    sharing the answering LLM's server when that is the local one too (one model in memory).
    Ratings are short and deterministic: temperature 0, a few tokens, Qwen3 thinking off.
    """
    from litrag.builders import AnswerLLM, thinking_off
    from litrag.local_llm import LlamaServer, local_model_path, openai_like
    from litrag.query.answer import CHARS_PER_TOKEN

    params: dict[str, Any] = {"max_tokens": 24, "temperature": 0.0}
    ctx = settings.llm_context
    if url:
        name = model or "local"
        llm = openai_like(
            url,
            name,
            context_window=ctx,
            timeout=timeout or 120.0,
            additional_kwargs=thinking_off(name),
            **params,
        )
        closer, identity = None, f"{name} at {url}"
    elif local:
        server = getattr(answer_llm, "server", None)
        closer = None
        if server is None:
            path = local_model_path(
                settings.local_llm, settings.models_dir or settings.home / "models"
            )
            server = LlamaServer(path, n_ctx=ctx).start()
            closer = AnswerLLM(None, "", server)
        llm = server.llm(timeout=timeout or 900.0, max_retries=0, **params)
        identity = f"{server.model_path.stem} (local llama.cpp)"
    else:
        return None, None
    chars = int((ctx - 700) * CHARS_PER_TOKEN)
    return Judge(llm, identity, max_retries=max_retries, context_chars=max(chars, 2000)), closer
