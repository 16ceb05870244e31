"""Narrative questions answered with and without the book's narrative assets, same LLM.

    python benchmarks/narrative_qa.py --home LITRAG_HOME \
        --questions data/questions/narrative_cotw.jsonl --out /tmp/narrative-qa

The home must hold the book ingested and its assets built for the questions' chapters
(``litrag assets pg215 --upto-chapter 2``). One LLM (the packaged local model, or
``LITRAG_LLM_URL``) answers every question twice, reader at the question's ``upto_chapter``:

- ``passages``: today's ``litrag ask --no-route`` engine (hybrid search over the plot blocks);
- ``assets``: the routed engine ``litrag ask`` uses where a book has assets (question-type router
  + character index → profile / outline / plotline / events tool, with the passages behind them).

Each answer is scored against the reference by the project's answer metrics (token F1, ROUGE-L,
METEOR) and by the project's judge (Answer Accuracy, two prompts, the same LLM unless
``--judge-url`` names another). Rows are appended to ``OUT/rows.jsonl`` as they finish, so a
killed run resumes; ``OUT/summary.md`` holds the table by question type.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

CONDITIONS = ("passages", "assets")
METRICS = ("f1", "rouge_l", "meteor", "answer_accuracy")


def _answer(engine: Any, question: str) -> dict[str, Any]:
    from litrag.answering.answer import AnswerStream

    t0 = time.perf_counter()
    stream = AnswerStream.from_response(engine.query(question))
    ans = stream.answer()
    return {
        "answer": ans.text,
        "error": ans.error,
        "mode": ans.mode,
        "route": ans.route,
        "sources": [s.citation() for s in ans.sources],
        "source_chapters": sorted({s.chapter_index for s in ans.sources if s.chapter_index}),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def summarise(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per (question type, condition), means of each metric."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["type"], r["condition"])].append(r)
        groups[("all", r["condition"])].append(r)
    types = [*sorted({t for t, _ in groups if t != "all"}), "all"]
    head = "| questions | n | engine | token F1 | ROUGE-L | METEOR | Answer Accuracy | s/answer |"
    out = [head, "|---|---:|---|---:|---:|---:|---:|---:|"]
    for t in types:
        for c in CONDITIONS:
            g = groups.get((t, c), [])
            if not g:
                continue
            vals = [_mean([r["scores"].get(m) for r in g]) for m in METRICS]
            cells = " | ".join("-" if v is None else f"{v:.3f}" for v in vals)
            secs = statistics.median(r["seconds"] for r in g)
            out.append(f"| {t} | {len(g)} | {c} | {cells} | {secs:.0f} |")
    routes: dict[str, int] = defaultdict(int)
    for r in rows:
        if r["condition"] == "assets":
            routes[str((r.get("route") or {}).get("tool", "none"))] += 1
    out.append("")
    out.append("Routes taken: " + ", ".join(f"{k} {v}" for k, v in sorted(routes.items())))
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="LITRAG_HOME with book + assets")
    ap.add_argument("--questions", type=Path, required=True, help="JSONL (narrative_cotw.jsonl)")
    ap.add_argument("--out", type=Path, required=True, help="folder for rows.jsonl, summary.md")
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--no-judge", action="store_true", help="lexical metrics only")
    ap.add_argument("--judge-url", help="an OpenAI-compatible judge (default: the answer LLM)")
    ap.add_argument("--judge-model")
    args = ap.parse_args()

    from litrag.builders import (
        build_answer_llm,
        build_embed_model,
        build_query_engine,
        build_routed_engine,
    )
    from litrag.eval.answer_metrics import AnswerScorer
    from litrag.eval.judge import build_judge
    from litrag.settings import Settings
    from litrag.stores.factory import make_vector_store

    questions = [json.loads(x) for x in args.questions.read_text().splitlines() if x.strip()]
    conditions = [c for c in args.conditions.split(",") if c]
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "rows.jsonl"
    done = {}
    if rows_path.is_file():
        for line in rows_path.read_text().splitlines():
            r = json.loads(line)
            done[(r["id"], r["condition"])] = r
    s = Settings(home=args.home.expanduser().resolve())
    embed = build_embed_model(s)
    scorer = AnswerScorer.create()
    store = make_vector_store(s.home, s.collection, url=s.qdrant_url, api_key=s.qdrant_api_key)
    with build_answer_llm(s) as answer_llm:
        judge, closer = (None, None)
        if not args.no_judge:
            judge, closer = build_judge(
                s,
                local=not args.judge_url and not s.llm_url,
                url=args.judge_url or s.llm_url,
                model=args.judge_model or s.llm_model,
                answer_llm=answer_llm,
            )
        engines: dict[tuple[str, str, int], Any] = {}

        def engine_for(cond: str, book: str, upto: int) -> Any:
            key = (cond, book, upto)
            if key not in engines:
                kw = dict(upto_chapter=upto, llm=answer_llm.llm, store=store, embed_model=embed)
                build = build_query_engine if cond == "passages" else build_routed_engine
                engines[key] = build(s, book, streaming=False, **kw)
            return engines[key]

        with rows_path.open("a") as sink:
            for q in questions:
                for cond in conditions:
                    if (q["id"], cond) in done:
                        continue
                    got = _answer(engine_for(cond, q["book"], q["upto_chapter"]), q["question"])
                    refs = [q["answer"]]
                    row = {**{k: q[k] for k in ("id", "type", "question")}, "condition": cond}
                    row.update(got)
                    row["scores"] = dict(scorer.score(got["answer"], refs))
                    if judge is not None:
                        aa = judge.answer_accuracy(q["question"], got["answer"], refs)
                        row["scores"]["answer_accuracy"] = aa.score
                    done[(q["id"], cond)] = row
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                    print(
                        json.dumps(
                            {k: row[k] for k in ("id", "condition", "route", "seconds")}
                            | {"aa": row["scores"].get("answer_accuracy")}
                        ),
                        flush=True,
                    )
        if closer is not None:
            closer.close()
    if hasattr(store, "close"):
        store.close()
    table = summarise(list(done.values()))
    (args.out / "summary.md").write_text(f"{table}\n\nAnswer LLM: {answer_llm.description}\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
