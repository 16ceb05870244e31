"""The product's default on a frozen question set: what a newcomer should expect from it.

For a question file of the ``more_frozen.jsonl`` form (``kind`` blind/reader, a gold span in
``chunk_must_contain``, an answer pattern in ``key_facts``/``forbidden``) and a library home:

1. ``ingest_books``: the set's books go into the home with the default settings (the
   ``litrag ingest`` path, ``build_library``); books already there are left as they are.
2. ``retrieval_rows`` (no LLM): per question, the rank of the first block holding the gold span
   among the default retrieval's 20 best (MRR@20, hit@5), and prompt recall: whether the span
   stands whole in what the answering model would read of the default 5 blocks, for each way
   of reading asked for (``read_words``: 650 is the local default, 0 the five blocks whole).
   This pass reads through the plain passage engine; the routed engine ``litrag ask`` uses may
   steer a who-is question to other passages, which the answer pass below records as read.
3. ``answer_rows`` (the local LLM): each question asked as ``litrag ask`` asks it (the routed
   engine, the configured answering LLM, streamed), timed to the first word and to the end of
   the answer, scored with ``litrag.eval.keyfacts`` (right: every key fact, nothing forbidden,
   no decline), and with what the model read taken from the prompt it was sent (LlamaIndex's
   ``LLMChatStartEvent``), so "the gold was in what it read" is exact.

Every row is appended to a JSONL log as it finishes; a rerun skips the rows already there, so
an interrupted run resumes. ``summarise`` turns the log into the report's figures.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

Say = Callable[[str], None]
KINDS = ("blind", "reader")


# ------------------------------------------------------------------------------ questions
class SetQuestion(BaseModel):
    """One question of a frozen set, with what scoring needs."""

    id: str = Field(description="The question's id, e.g. more.pg74.01.")
    book_file: str = Field(description="The book's path under the data folder.")
    question: str = Field(description="The question as a reader asks it.")
    kind: str = Field(description="blind (a drawn evidence position) or reader (a common ask).")
    span: str = Field(description="The gold span, verbatim in the book (chunk_must_contain).")
    key_facts: list[list[str]] = Field(description="Facts a right answer states, with variants.")
    forbidden: list[str] = Field(default_factory=list, description="Strings a right answer lacks.")

    @classmethod
    def class_name(cls) -> str:
        return "SetQuestion"

    @property
    def book_id(self) -> str:
        """``pg74`` for ``books/more/pg74_tom_sawyer.txt``: the library's book id."""
        return Path(self.book_file).name.split("_", 1)[0]


def load_set(path: Path) -> list[SetQuestion]:
    """The questions of ``path``; a row without a span or a pattern is an error naming it."""
    out: list[SetQuestion] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not row.get("chunk_must_contain") or not row.get("key_facts"):
            raise ValueError(f"{path}:{n}: {row.get('id')} has no gold span or no key_facts")
        out.append(
            SetQuestion(
                id=row["id"],
                book_file=row["book_file"],
                question=row["question"],
                kind=row.get("kind", "blind"),
                span=row["chunk_must_contain"],
                key_facts=row["key_facts"],
                forbidden=row.get("forbidden") or [],
            )
        )
    return out


def stratified(questions: Sequence[SetQuestion], blind: int, reader: int) -> list[SetQuestion]:
    """Per book, the first ``blind`` blind and the first ``reader`` reader questions in file
    order: the subset answered by the LLM when all of them would take too long. Fixed before
    any answer is seen, so it cannot be picked to suit a result."""
    want = {"blind": blind, "reader": reader}
    taken: dict[tuple[str, str], int] = {}
    out = []
    for q in questions:
        key = (q.book_id, q.kind)
        if taken.get(key, 0) < want.get(q.kind, 0):
            taken[key] = taken.get(key, 0) + 1
            out.append(q)
    return out


# ------------------------------------------------------------------------------ the row log
class RowLog:
    """The JSONL file rows are appended to as they finish; ``done`` says what a rerun skips."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    self.rows.append(json.loads(line))

    def done(self, stage: str, variant: str, qid: str) -> bool:
        return any(
            r["stage"] == stage and r["variant"] == variant and r["id"] == qid for r in self.rows
        )

    def add(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.rows.append(row)


# ------------------------------------------------------------------------------ ingest
def ingest_books(home: Path, books: Iterable[Path], say: Say = print) -> float:
    """Ingest ``books`` into ``home`` with the default settings (as ``litrag ingest``); the
    seconds it took. Books already ingested unchanged are skipped by the library itself."""
    from litrag.builders import build_library
    from litrag.settings import Settings

    t0 = time.perf_counter()
    lib = build_library(Settings(home=home))
    try:
        report = lib.ingest([Path(b) for b in books])
    finally:
        lib.close()
    if not report.ok:
        raise RuntimeError(f"ingest failed: {report.failed}")
    took = time.perf_counter() - t0
    say(f"ingested {sorted(report.ingested)} into {home} in {took:.0f} s")
    return took


# ------------------------------------------------------------------------------ gold tests
def span_in(texts: Iterable[str], span: str) -> bool:
    """Whether the gold span stands whole in one of ``texts`` (quotes, dashes, case folded)."""
    from litrag.eval.spans import contains_span

    return any(contains_span(t.replace("[...]", " "), span) for t in texts)


def gold_rank(nodes: Sequence[Any], span: str) -> int | None:
    """The 1-based rank of the first retrieved block holding ``span`` whole, else None."""
    from litrag.answering.answer_types import passage

    for i, n in enumerate(nodes, start=1):
        if span_in([passage(n), n.node.get_content()], span):
            return i
    return None


def _close(engine: Any) -> None:
    """Free the library's stores (one opener at a time for the embedded store)."""
    for store in (engine.retriever.vector_store, getattr(engine.retriever, "children_store", None)):
        if hasattr(store, "close"):
            store.close()
    if hasattr(engine, "close"):  # a routed engine's asset store
        engine.close()


def _by_book(questions: Sequence[SetQuestion]) -> dict[str, list[SetQuestion]]:
    out: dict[str, list[SetQuestion]] = {}
    for q in questions:
        out.setdefault(q.book_id, []).append(q)
    return out


# ------------------------------------------------------------------------------ retrieval
def read_texts(engine: Any, nodes: Sequence[Any], read_words: int, context: int) -> list[str]:
    """The chunks the answering LLM reads of ``nodes`` for a ``read_words`` setting: the
    engine's own ``fit_to_context`` and ``within_words``, with the budget its ``_budget`` gives
    a model of ``context`` tokens (computed here: the pass runs without an LLM)."""
    from litrag.answering.reading import estimate_tokens, fit_to_context, within_words

    overhead = estimate_tokens(engine.messages("", [])[0].content or "") + 150
    budget = max(context - engine.answer_tokens - overhead, 256)
    fitted = fit_to_context(nodes, budget)
    kept = within_words(fitted, read_words)
    return [chunk for _, chunk in kept]


def retrieval_rows(
    home: Path,
    questions: Sequence[SetQuestion],
    log: RowLog,
    read_variants: dict[str, int],
    depth: int = 20,
    say: Say = print,
) -> None:
    """Per question: the gold block's rank in the default retrieval's ``depth`` best, and per
    way of reading (name -> read_words) whether the gold span is in what the model reads."""
    from llama_index.core.schema import QueryBundle

    from litrag.builders import build_query_engine
    from litrag.settings import Settings

    s = Settings(home=home)
    for book, qs in _by_book(questions).items():
        todo = [q for q in qs if not log.done("retrieval", "default", q.id)]
        if not todo:
            continue
        engine = build_query_engine(s, book)
        try:
            r = engine.retriever
            default = r.settings
            deep = default.model_copy(update={"top_k": depth})
            for q in todo:
                t0 = time.perf_counter()
                r.settings = deep  # the same retriever, 20 deep, for the rank of the gold
                try:
                    ranked = r.retrieve(q.question)
                finally:
                    r.settings = default
                secs = time.perf_counter() - t0
                nodes = engine.retrieve(QueryBundle(q.question))  # the 5 the answer gets
                rank = gold_rank(ranked, q.span)
                row: dict[str, Any] = {
                    "stage": "retrieval",
                    "variant": "default",
                    "id": q.id,
                    "book": book,
                    "kind": q.kind,
                    "rank": rank,
                    "in_top_k": gold_rank(nodes, q.span) is not None,
                    "seconds": round(secs, 2),
                }
                for name, words in read_variants.items():
                    read = read_texts(engine, nodes, words, s.llm_context)
                    row[f"read:{name}"] = span_in(read, q.span)
                    row[f"words:{name}"] = sum(len(t.split()) for t in read)
                log.add(row)
                say(
                    f"  {q.id}: gold rank {rank}; "
                    + ", ".join(
                        f"{n} {'read' if row[f'read:{n}'] else 'not read'}" for n in read_variants
                    )
                )
        finally:
            _close(engine)


# ------------------------------------------------------------------------------ answers
class PromptCapture:
    """The messages each LLM chat call was sent, from LlamaIndex's instrumentation events:
    what the model read, exactly (a routed answer's notes and passages included)."""

    def __init__(self) -> None:
        from llama_index.core.instrumentation import get_dispatcher
        from llama_index.core.instrumentation.event_handlers import BaseEventHandler
        from llama_index.core.instrumentation.events.llm import LLMChatStartEvent

        self.prompts: list[str] = []
        capture = self

        class _Handler(BaseEventHandler):
            @classmethod
            def class_name(cls) -> str:
                return "PromptCaptureHandler"

            def handle(self, event: Any, **kwargs: Any) -> None:
                if isinstance(event, LLMChatStartEvent):
                    capture.prompts.append("\n".join(str(m.content or "") for m in event.messages))

        self._handler = _Handler()
        self._dispatcher = get_dispatcher()
        self._dispatcher.add_event_handler(self._handler)

    def take(self) -> list[str]:
        got, self.prompts = self.prompts, []
        return got

    def close(self) -> None:
        handlers = self._dispatcher.event_handlers
        if self._handler in handlers:
            handlers.remove(self._handler)


def score(q: SetQuestion, text: str) -> dict[str, Any]:
    """Right (every key fact, nothing forbidden, no decline), declined, confident wrong."""
    from litrag.eval.keyfacts import ReaderQuestion, score_answer

    rq = ReaderQuestion(
        id=q.id,
        book_file=q.book_file,
        question=q.question,
        class_="detail",  # neither unanswerable nor spoiler: a decline is never right here
        upto_chapter=None,
        key_facts=tuple(tuple(f) for f in q.key_facts),
        forbidden=tuple(q.forbidden),
        evidence=None,
        chapter=None,
        note="",
    )
    got = score_answer(rq, text)
    return {
        "right": got.correct,
        "declined": got.abstained,
        "confident_wrong": not got.correct and not got.abstained,
        "facts_found": got.facts_found,
        "facts_total": got.facts_total,
    }


def answer_rows(
    home: Path,
    questions: Sequence[SetQuestion],
    log: RowLog,
    variant: str = "default",
    read_words: int | None = None,
    say: Say = print,
) -> None:
    """Ask each question as ``litrag ask`` does (routed engine, the configured answering LLM,
    streamed), one LLM server for the whole run; score and time each answer. ``read_words``:
    None keeps the default (650 words for the local model), 0 reads the five blocks whole."""
    from litrag.builders import build_answer_llm, build_routed_engine
    from litrag.retrieval.retriever import RetrievalSettings
    from litrag.settings import Settings

    todo = [q for q in questions if not log.done("answer", variant, q.id)]
    if not todo:
        return
    s = Settings(home=home) if read_words is None else Settings(home=home, read_words=read_words)
    t0 = time.perf_counter()
    answer_llm = build_answer_llm(s)
    say(f"{answer_llm.description} started in {time.perf_counter() - t0:.0f} s")
    capture = PromptCapture()
    try:
        for q in balanced(todo):  # one engine a question, opened and closed as `litrag ask` does
            engine = build_routed_engine(
                s, [q.book_id], retrieval=RetrievalSettings.from_settings(s)
            )
            engine.llm, engine.answered_by = answer_llm.llm, answer_llm.description
            engine.llm_health = answer_llm.diagnose
            try:
                _answer_one(engine, q, variant, capture, log, say)
            finally:
                _close(engine)
    finally:
        capture.close()
        answer_llm.close()


def balanced(questions: Sequence[SetQuestion]) -> list[SetQuestion]:
    """The questions in rounds over the books, each book's alternating blind and reader: a run
    stopped early has answered every book and both kinds about equally."""
    lanes = []
    for qs in _by_book(questions).values():
        kinds = [[q for q in qs if q.kind == k] for k in KINDS]
        kinds.append([q for q in qs if q.kind not in KINDS])
        lane = []
        for i in range(max(len(k) for k in kinds)):
            lane += [k[i] for k in kinds if i < len(k)]
        lanes.append(lane)
    return [
        lane[i] for i in range(max(map(len, lanes), default=0)) for lane in lanes if i < len(lane)
    ]


def _answer_one(
    engine: Any, q: SetQuestion, variant: str, capture: PromptCapture, log: RowLog, say: Say
) -> None:
    """One question through ``engine.ask`` (streamed, as ``litrag ask`` prints it), logged."""
    capture.take()
    start = time.perf_counter()
    first = None
    stream = engine.ask(q.question)
    for piece in stream:
        if first is None and piece.strip():
            first = time.perf_counter() - start
    answer = stream.answer()
    total = time.perf_counter() - start
    prompts = capture.take()
    row = {
        "stage": "answer",
        "variant": variant,
        "id": q.id,
        "book": q.book_id,
        "kind": q.kind,
        "question": q.question,
        "answer": answer.text,
        "mode": answer.mode,
        "answered_by": answer.answered_by,
        "route": (answer.route or {}).get("tool"),
        "error": answer.error,
        "gold_read": span_in(prompts, q.span) if prompts else False,
        "llm_calls": len(prompts),
        "first_word_s": None if first is None else round(first, 1),
        "answer_s": round(total, 1),
        **score(q, answer.text),
    }
    log.add(row)
    verdict = "right" if row["right"] else "declined" if row["declined"] else "wrong"
    say(
        f"  {q.id} [{variant}]: {verdict}, gold read {row['gold_read']}, "
        f"first word {row['first_word_s']} s, {row['answer_s']} s: "
        f"{answer.text[:100]!r}"
    )


# ------------------------------------------------------------------------------ the figures
def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 1) if vals else None


def _group_retrieval(rows: Sequence[dict[str, Any]], variants: Sequence[str]) -> dict[str, Any]:
    n = len(rows)
    out: dict[str, Any] = {
        "n": n,
        "mrr@20": round(sum(1 / r["rank"] for r in rows if r["rank"] is not None) / n, 3)
        if n
        else None,
        "hit@5": sum(r["rank"] is not None and r["rank"] <= 5 for r in rows),
        "in_5_given": sum(bool(r["in_top_k"]) for r in rows),
    }
    for v in variants:
        out[f"prompt_recall:{v}"] = sum(bool(r.get(f"read:{v}")) for r in rows)
        words = [r[f"words:{v}"] for r in rows if f"words:{v}" in r]
        out[f"words:{v}"] = round(statistics.fmean(words)) if words else None
    return out


def _group_answers(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    wrong = [r for r in rows if not r["right"]]
    read = [r for r in rows if r["gold_read"]]
    return {
        "n": len(rows),
        "right": sum(r["right"] for r in rows),
        "declined": sum(r["declined"] for r in rows),
        "wrong": len(wrong),
        "confident_wrong": sum(r["confident_wrong"] for r in rows),
        "errors": sum(r["error"] is not None for r in rows),
        "gold_read": len(read),
        "right_when_gold_read": sum(r["right"] for r in read),
        "first_word_s_median": _median([r["first_word_s"] for r in rows]),
        "answer_s_median": _median([r["answer_s"] for r in rows]),
        "answer_s_max": max((r["answer_s"] for r in rows), default=None),
    }


def _groups(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"all": list(rows)}
    for kind in KINDS:
        out[kind] = [r for r in rows if r["kind"] == kind]
    for book in sorted({r["book"] for r in rows}):
        out[book] = [r for r in rows if r["book"] == book]
    return {k: v for k, v in out.items() if v}


def summarise(rows: Sequence[dict[str, Any]], read_variants: Sequence[str]) -> dict[str, Any]:
    """The report's figures from the row log: retrieval per group, answers per variant x group."""
    ret = [r for r in rows if r["stage"] == "retrieval"]
    out: dict[str, Any] = {
        "retrieval": {g: _group_retrieval(rs, read_variants) for g, rs in _groups(ret).items()},
        "answers": {},
    }
    for variant in sorted({r["variant"] for r in rows if r["stage"] == "answer"}):
        ans = [r for r in rows if r["stage"] == "answer" and r["variant"] == variant]
        out["answers"][variant] = {g: _group_answers(rs) for g, rs in _groups(ans).items()}
    return out


def markdown(summary: dict[str, Any], read_variants: Sequence[str], command: str) -> str:
    """The figures as Markdown tables (counts out of n, with the share)."""
    lines = [f"`{command}`", "", "### Retrieval and prompt recall (no LLM)", ""]
    head = (
        "| group | n | MRR@20 | hit@5 | "
        + " | ".join(f"gold read, {v}" for v in read_variants)
        + " |"
    )
    lines += [head, "|---|---:|---:|---:|" + "---:|" * len(read_variants)]
    for g, f in summary["retrieval"].items():
        cells = [_pct(f[f"prompt_recall:{v}"], f["n"]) for v in read_variants]
        lines.append(
            f"| {g} | {f['n']} | {f['mrr@20']:.3f} | {_pct(f['hit@5'], f['n'])} | "
            + " | ".join(cells)
            + " |"
        )
    for variant, groups in summary["answers"].items():
        lines += [
            "",
            f"### Answers ({variant})",
            "",
            "| group | n | right | declined | confident wrong (of wrong) | gold read | "
            "right when gold read | first word, median s | answer, median s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for g, f in groups.items():
            lines.append(
                f"| {g} | {f['n']} | {_pct(f['right'], f['n'])} | {f['declined']} | "
                f"{f['confident_wrong']} of {f['wrong']} | {_pct(f['gold_read'], f['n'])} | "
                f"{f['right_when_gold_read']} of {f['gold_read']} | "
                f"{f['first_word_s_median']} | {f['answer_s_median']} |"
            )
    return "\n".join(lines) + "\n"
