"""A/B of what the answering LLM reads: whole blocks against question-focused excerpts.

    python benchmarks/answer_ab.py --home LITRAG_HOME \
        --questions data/questions/call_of_the_wild_keyed.jsonl \
        --questions data/questions/gutenqa_cotw_factual.jsonl --focus-words 0,110

One LLM (the packaged local model, or ``LITRAG_LLM_URL``) answers every question of the JSONL
files (``book``, ``question``, ``key``: a regular expression a right answer matches) once per
``--focus-words`` value, through the same engine ``litrag ask`` builds. Prints one JSON line per
answer (answer, key match, prompt tokens, seconds), then a table per setting. The key is a quick
first grade: read the answers before quoting a score (a key can match a wrong sentence).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="an ingested LITRAG_HOME")
    ap.add_argument("--questions", type=Path, action="append", required=True, help="JSONL")
    ap.add_argument("--focus-words", default="0,110", help="comma list (0: whole blocks)")
    ap.add_argument("--top-k", type=int, help="blocks per answer (default: the preset's)")
    args = ap.parse_args()

    from llama_index.core.schema import QueryBundle

    from litrag.builders import build_answer_llm, build_embed_model, build_query_engine
    from litrag.retrieval.retriever import RetrievalSettings
    from litrag.settings import Settings

    items = [json.loads(line) for f in args.questions for line in f.read_text().splitlines()]
    s = Settings(home=args.home.expanduser().resolve())
    embed = build_embed_model(s)
    retrieval = RetrievalSettings.from_settings(s)
    if args.top_k:
        retrieval.top_k = args.top_k
    rows: dict[int, list[dict[str, Any]]] = {}
    store = children = None
    with build_answer_llm(s) as answer_llm:
        for words in (int(w) for w in args.focus_words.split(",")):
            s.focus_words = words
            engines: dict[str, Any] = {}  # one engine per book for this setting
            for it in items:
                engine = engines.get(it["book"])
                if engine is None:
                    engine = engines[it["book"]] = build_query_engine(
                        s,
                        it["book"],
                        llm=answer_llm.llm,
                        retrieval=retrieval,
                        store=store,
                        children_store=children,
                        embed_model=embed,
                        streaming=False,
                    )
                    store = engine.retriever.vector_store
                    children = engine.retriever.children_store
                t0 = time.perf_counter()
                response = engine.query(QueryBundle(it["question"]))
                secs = time.perf_counter() - t0
                answer = " ".join(str(response).split())
                raw = getattr(response, "metadata", {}) or {}
                run = raw.get("litrag_run")
                row = {
                    "focus_words": words,
                    "question": it["question"],
                    "answer": answer,
                    # a withdrawn draft's note may quote its name: no answer all the same
                    "key_match": run.draft is None and bool(re.search(it["key"], answer, re.I)),
                    "seconds": round(secs, 1),
                    "prompt_chars": sum(len(x.excerpt or x.text) for x in run.sources),
                    "sources": [f"ch{x.chapter_index} s{x.sentence_from}" for x in run.sources],
                }
                rows.setdefault(words, []).append(row)
                print(json.dumps(row), flush=True)
    for opened in (store, children):
        if opened is not None and hasattr(opened, "close"):
            opened.close()
    print("\n| LLM reads | key matches | mean passage chars | median s per answer |")
    print("|---|---:|---:|---:|")
    for words, rs in rows.items():
        label = "whole blocks" if words == 0 else f"<= {words} words per block"
        hits = sum(r["key_match"] for r in rs)
        chars = statistics.fmean(r["prompt_chars"] for r in rs)
        secs = statistics.median(r["seconds"] for r in rs)
        print(f"| {label} | {hits}/{len(rs)} | {chars:.0f} | {secs:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
