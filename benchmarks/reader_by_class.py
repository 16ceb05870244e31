"""The reader questions answered as `litrag ask` answers them, counted by class.

    python benchmarks/reader_by_class.py --home HOME --book pg215 --book pg11 --book pg1661 \
        --out runs/reader/rows.jsonl

Each question of ``data/questions/reader_questions.jsonl`` on the ``--book``s (the three books
the set is written on, 87 questions; the library must hold them) goes through the routed
engine (``build_routed_engine``, the reader's spoiler limit when the question has one) and the
configured answering LLM (the packaged local model unless ``LITRAG_LLM_URL`` names a server),
started once. Scored with ``litrag.eval.keyfacts``: right (every key fact, nothing forbidden, no
decline; a decline is right on ``unanswerable``), declined, and spoiler-safe (no forbidden
string: the later-chapter names of ``spoiler`` questions). Rows are appended as they finish, so
a rerun resumes; the table by class is printed at the end.

Only builders and the scorer are used, so the same script measures an older tree for a
before/after: ``PYTHONPATH=OLD_TREE python benchmarks/reader_by_class.py ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "data/questions/reader_questions.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="a library holding the books")
    ap.add_argument("--book", action="append", help="a book id, repeatable (default: pg215 alone)")
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--out", type=Path, required=True, help="rows, one JSON line a question")
    args = ap.parse_args()

    import litrag
    from litrag.builders import build_answer_llm, build_routed_engine
    from litrag.eval.keyfacts import (
        KeyFactScore,
        load_reader_questions,
        score_answer,
        summarise,
    )
    from litrag.settings import Settings

    books = args.book or ["pg215"]
    every = load_reader_questions(args.questions)
    questions = [(b, q) for b in books for q in every if f"/{b}_" in f"/{q.book_file}"]
    if not questions:
        print(f"error: no reader question on {', '.join(books)}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(x) for x in args.out.read_text().splitlines()] if args.out.exists() else []
    done = {r["id"] for r in rows}
    print(f"litrag from {Path(litrag.__file__).parent}; {len(questions)} questions", flush=True)
    s = Settings(home=args.home.expanduser().resolve())
    todo = [(book, q) for book, q in questions if q.id not in done]
    if todo:
        answer_llm = build_answer_llm(s)
        try:
            for book, q in todo:
                engine = build_routed_engine(s, [book], upto_chapter=q.upto_chapter)
                engine.llm, engine.answered_by = answer_llm.llm, answer_llm.description
                start = time.perf_counter()
                try:
                    answer = engine.ask(q.question).answer()
                finally:  # as eval.default_run closes an engine (not in older trees)
                    for store in (
                        engine.retriever.vector_store,
                        getattr(engine.retriever, "children_store", None),
                    ):
                        if hasattr(store, "close"):
                            store.close()
                    if hasattr(engine, "close"):
                        engine.close()
                got = score_answer(q, answer.text)
                row = {
                    "id": q.id,
                    "class": q.class_,
                    "upto_chapter": q.upto_chapter,
                    "answer": answer.text,
                    "score": asdict(got),
                    "seconds": round(time.perf_counter() - start, 1),
                }
                rows.append(row)
                with args.out.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                verdict = "right" if got.correct else "declined" if got.abstained else "wrong"
                print(f"  {q.id} [{q.class_}]: {verdict}: {answer.text[:90]!r}", flush=True)
        finally:
            answer_llm.close()
    table = summarise([KeyFactScore(**r["score"]) for r in rows], [r["class"] for r in rows])
    print("| class | n | right | declined | spoiler-safe |\n|---|---:|---:|---:|---:|")
    for name, g in table.items():
        safe = g["n"] - g["forbidden_hit"]
        print(f"| {name} | {g['n']} | {g['correct']} | {g['abstained']} | {safe} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
