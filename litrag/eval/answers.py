"""Answer evaluation: generate answers with the project's own retrieval and answering code, score
them against reference answers, and (with a judge LLM) rate answers and retrieved passages.

Each question is answered exactly as ``litrag ask`` answers it: ``BookRetriever`` (hybrid dense +
BM25 inside the question's book, the ``embedded`` preset unless told otherwise) feeding
``BookQueryEngine`` (the paper's answer prompt), with the configured LLM, or extractively without
one (the baseline: the best-matching sentences of the top block). The blocks come from either

- the retrieval harness's cached chunking (default): each book is chunked by the chosen chunker
  (``litrag.eval.registry.chunk_book``, cached on disk), embedded through the shared embedding
  cache and stored in a Qdrant Edge collection of its own (``answer_index.HarnessIndex``), per-book
  BM25 IDF as in the retrieval protocol; or
- the library at ``$LITRAG_HOME`` (``library=True``), built by ``litrag ingest``: the book must be
  ingested, and the chunking is whatever the library used.

Scores: EM, token F1, ROUGE-L, METEOR, optional BERTScore (``answer_metrics``); with a judge,
Answer Accuracy and Context Relevance (``judge``); on GutenQA also whether the gold evidence span
is inside the retrieved blocks (``evidence@k``). What the answer is scored as: the LLM's text, or
for an extractive answer its quoted sentences without the label.

The question sets load in ``questions`` and the judge is built in ``judge``. Generated answers and
judge ratings are cached in SQLite (``answers.sqlite`` in the cache folder, a ``ResultCache``)
under a key of the question, its book, the chunker, the exact retrieved passages, the LLM's
identity and the prompt, so a rerun (or a run interrupted midway) only computes what is new, and a
change of chunking, model or prompt recomputes exactly the answers it affects. Answers that ended
in an LLM error are never cached.
"""

from __future__ import annotations

import hashlib
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.schema import QueryBundle

from litrag.eval.answer_index import HarnessIndex, LoadedBook, load_eval_book
from litrag.eval.answer_metrics import METRICS, AnswerScorer
from litrag.eval.embedding_cache import CachedEmbedder, EmbeddingCache, windowed_minilm_embedder
from litrag.eval.environment import environment
from litrag.eval.judge import Judge
from litrag.eval.questions import AnswerQuestion
from litrag.eval.result_cache import ResultCache, digest
from litrag.eval.spans import normalize

DEFAULT_CHUNKER = "litseg-offline"
CACHE_VERSION = "answers-v1"
Say = Callable[[str], None]


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
    read_words: int = 0  # words of the best blocks read whole (within_words); 0: all given


def prompt_fingerprint(engine: Any) -> str:
    """The answer prompt's text (every message template), hashed: a new prompt, new answers."""
    from litrag.answering.answer import EXTRACTIVE_LABEL

    if engine.llm is None:
        return "extractive:" + hashlib.sha256(EXTRACTIVE_LABEL.encode()).hexdigest()[:12]
    texts = [m.content or "" for m in engine.qa_prompt.message_templates]
    texts.append("chunk heading: chapter, and the subtitle only when an LLM wrote it")
    order = getattr(engine, "passage_order", "score")
    if order != "score":  # the passages go in another order: another prompt
        texts.append(f"passage order: {order}")
    if read := getattr(engine, "read_words", 0):  # fewer blocks read: another prompt
        texts.append(f"the best blocks whole, up to {read} words")
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
    from litrag.answering.answer import AnswerStream, passage

    nodes = engine.retrieve(QueryBundle(q.question))
    contexts = [passage(n) for n in nodes]
    key = {
        "version": CACHE_VERSION,
        "question": q.question,
        "book": book.key,
        "chunker": chunker,
        "retrieval": engine.retriever.describe(),
        "contexts": digest(contexts),
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
    children_store: Any = None,
) -> Any:
    """A ``BookQueryEngine`` for ``book``: over the harness index, or the library's store (and
    its children's, where the book has them)."""
    from litrag.answering.answer import BookQueryEngine
    from litrag.retrieval.retriever import BookRetriever

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
            read_words=gen.read_words if gen.llm is not None else 0,
        )
    from litrag.builders import build_query_engine

    engine = build_query_engine(
        library,
        [book.book_id],
        llm=gen.llm,
        llm_description=gen.identity,
        retrieval=retrieval,
        store=store,
        children_store=children_store,
        streaming=False,
    )
    engine.answer_tokens = gen.answer_tokens
    engine.passage_order = gen.passage_order
    engine.read_words = gen.read_words if gen.llm is not None else 0
    return engine


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
    from litrag.retrieval.retriever import RetrievalSettings

    t_start = time.perf_counter()
    gen = generator or Generator()
    scorer = scorer or AnswerScorer.create()
    retrieval = retrieval or RetrievalSettings.from_settings()
    cache = ResultCache(cache_dir / "answers.sqlite")
    lend_cache = judge is not None and judge.cache is None
    if judge is not None and lend_cache:
        judge.cache = cache
    emb_cache = None
    index: HarnessIndex | None = None
    shared_store = shared_children = None
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
            engine = _engine(book, gen, retrieval, index, library, shared_store, shared_children)
            if library is not None:
                shared_store = engine.retriever.vector_store  # one opener: reuse it
                shared_children = engine.retriever.children_store or shared_children
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
        for opened in (shared_store, shared_children):
            if opened is not None and hasattr(opened, "close"):
                opened.close()
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
        "read_words": gen.read_words,
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
