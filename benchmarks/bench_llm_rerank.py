"""Does reranking pay on CPU? The packaged 1.5B model as a yes/no reranker of the fused top N.

    python benchmarks/bench_llm_rerank.py --home HOME --book pg215 --candidates 10 [--limit 20]
    python benchmarks/bench_llm_rerank.py --home HOME --book pg11 --book pg215 \
        --questions data/gutenqa/questions.jsonl --limit 8

For each question of the book(s) that names its evidence (the reader questions'
``evidence`` sentences by default, ``data/questions/reader_questions.jsonl``; or, with
``--questions``, a GutenQA-style set's ``chunk_must_contain`` span: the public set or
``blind_frozen.jsonl``), the default retrieval (as ``litrag ask``) gives its top
``--candidates`` blocks; a block is relevant when it holds the evidence (the harness's span
match, ``litrag.eval.spans``). The packaged Qwen2.5-Coder-1.5B (llama.cpp, in process) reads
each block's question-nearest paragraph (the child that ranked it) and the question, and says
yes or no; blocks are reordered by P(yes) (ties: the fused order). Prints MRR within the
candidates before and after (all questions, and per book), how many questions moved, and
seconds per question.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "questions" / "reader_questions.jsonl"
SYSTEM = (
    "Judge whether the passage from a book answers the question. Reply with one word: yes or no."
)


def questions_of(path: Path | None, book: str) -> list[dict]:
    """The book's questions that name their evidence, each with ``book`` and ``evidence``."""
    rows = [json.loads(x) for x in (path or QUESTIONS).read_text().splitlines() if x.strip()]
    if path is None:
        return [
            {**r, "book": book}
            for r in rows
            if r["id"].startswith(f"reader.{book}.") and r.get("evidence")
        ]
    return [
        {**r, "book": book, "evidence": [r["chunk_must_contain"]]}
        for r in rows
        if Path(r["book_file"]).name.startswith(f"{book}_") and r.get("chunk_must_contain")
    ]


def p_yes(llm, question: str, passage: str) -> float:
    """P(yes) against P(no) from the first reply token's log-probabilities."""
    reply = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Passage:\n{passage}\n\nQuestion: {question}\nAnswer:"},
        ],
        max_tokens=1,
        temperature=0,
        logprobs=True,
        top_logprobs=10,
    )
    tops = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    yes = sum(math.exp(t["logprob"]) for t in tops if t["token"].strip().lower() == "yes")
    no = sum(math.exp(t["logprob"]) for t in tops if t["token"].strip().lower() == "no")
    return yes / (yes + no) if yes + no else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="an ingested LITRAG_HOME")
    ap.add_argument("--book", action="append", help="book id; repeat (default pg215)")
    ap.add_argument(
        "--questions", type=Path, help="a set with book_file and chunk_must_contain per row"
    )
    ap.add_argument("--candidates", type=int, default=10)
    ap.add_argument(
        "--limit", type=int, default=0, help="first questions per book (0: all with evidence)"
    )
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from llama_cpp import Llama

    from litrag.answering.answer_types import passage
    from litrag.builders import build_query_engine
    from litrag.eval.spans import contains_span
    from litrag.models.llama_server import local_model_path
    from litrag.retrieval.evidence import evidence_text
    from litrag.retrieval.retriever import RetrievalSettings
    from litrag.settings import Settings

    rows = []
    for book in args.book or ["pg215"]:
        rows += questions_of(args.questions, book)[: args.limit or None]
    s = Settings(home=args.home.expanduser().resolve())
    retrieval = RetrievalSettings.from_settings(s).model_copy(update={"top_k": args.candidates})
    llm = Llama(
        model_path=str(local_model_path(s.local_llm)),
        n_ctx=2048,
        n_threads=args.threads,
        logits_all=True,
        verbose=False,
    )
    before, after, moved, seconds = [], [], 0, []
    for r in rows:
        engine = build_query_engine(s, r["book"], upto_chapter=r.get("upto_chapter"))
        engine.retriever.settings = retrieval
        nodes = engine.retriever.retrieve(r["question"])
        relevant = [any(contains_span(passage(n), e) for e in r["evidence"]) for n in nodes]
        t0 = time.perf_counter()
        scores = []
        for n in nodes:
            child = evidence_text(n.node) or passage(n)
            scores.append(p_yes(llm, r["question"], " ".join(child.split()[:220])))
        seconds.append(time.perf_counter() - t0)
        order = sorted(range(len(nodes)), key=lambda i: (-scores[i], i))
        rr = [1 / (i + 1) for i, ok in enumerate(relevant) if ok][:1] or [0.0]
        rr2 = [1 / (k + 1) for k, i in enumerate(order) if relevant[i]][:1] or [0.0]
        before.append(rr[0])
        after.append(rr2[0])
        moved += rr[0] != rr2[0]
        line = {
            "id": r["id"],
            "book": r["book"],
            "rr_fused": round(rr[0], 3),
            "rr_reranked": round(rr2[0], 3),
        }
        print(json.dumps({**line, "seconds": round(seconds[-1], 1)}), flush=True)
        if hasattr(engine.retriever.vector_store, "close"):
            engine.retriever.vector_store.close()
        if getattr(engine.retriever, "children_store", None) is not None:
            engine.retriever.children_store.close()
    n = len(rows)
    for book in args.book or ["pg215"]:
        ids = [i for i, r in enumerate(rows) if r["book"] == book]
        if ids:
            b = statistics.mean(before[i] for i in ids)
            a = statistics.mean(after[i] for i in ids)
            print(f"{book}: {len(ids)} questions, MRR fused {b:.3f} -> reranked {a:.3f}")
    print(
        f"\n{n} questions, {args.candidates} candidates: MRR@{args.candidates} fused "
        f"{statistics.mean(before):.3f} -> reranked {statistics.mean(after):.3f}; "
        f"{moved} changed; p50 {statistics.median(seconds):.1f} s a question"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
