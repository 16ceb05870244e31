"""Answer styles against each other: one call (``single``) or quote-then-answer (``quote``).

    python benchmarks/answer_styles.py --home LITRAG_HOME --styles single,quote \
        --reader data/questions/reader_questions.jsonl \
        --keyed data/questions/call_of_the_wild_keyed.jsonl --out OUT.jsonl

The same LLM (the packaged local model, or ``LITRAG_LLM_URL``) answers every question once per
style through the engine ``litrag ask`` builds (routed where the book has a character index,
``--no-route`` for plain passages), with each question's own spoiler limit. Reader questions
(``reader_questions.jsonl``) are scored on the answer text by their key facts
(``litrag.eval.keyfacts``: every fact, nothing forbidden, abstention where the book cannot
answer); keyed questions by their regular expression. Also counted: answers that name a
character of the book's index absent from the answer's quoted sentences and the question (the
quote style's evidence; for ``single``, from the passages it read), and seconds per answer and
to the first streamed piece. Prints one JSON line per answer, then a table per style: by class,
by route, and the keyed share. The ``--out`` file keeps the lines for ``docs/results.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def _book_id(book_file: str) -> str:
    return Path(book_file).name.split("_", 1)[0]


def _names(index: Any, upto: int | None) -> list[tuple[str, list[str]]]:
    """(id, every name and alias) of the characters a reader at ``upto`` has met."""
    if index is None:
        return []
    return [(c.id, [c.name, *getattr(c, "aliases", [])]) for c in index.upto(upto)]


def _unsupported(answer: str, grounds: str, names: list[tuple[str, list[str]]]) -> list[str]:
    """Characters the answer names that its grounds (quotes + question) never name."""
    out = []
    for cid, forms in names:
        said = [f for f in forms if f and re.search(rf"\b{re.escape(f)}\b", answer)]
        if said and not any(re.search(rf"\b{re.escape(f)}\b", grounds) for f in forms if f):
            out.append(cid)
    return out


def recheck(row: dict[str, Any], books_dir: Path, words: dict[str, Any]) -> None:
    """``row``'s draft put through today's answer checks (``name_check.withdraw_unsupported``)
    against the passages it read (``source_texts``), the book's words read from its file in
    ``books_dir`` (the whole book: the product reads them up to the reader's limit)."""
    from llama_index.core.schema import NodeWithScore, TextNode

    from litrag.answering.answer_types import AnswerRun
    from litrag.answering.name_check import BookWords, withdraw_unsupported
    from litrag.ingestion.gutenberg import load_book

    if not row.get("llm_called") or row.get("error") or "source_texts" not in row:
        return  # stopped before the LLM, failed, or a run from before the passages were kept
    book = row["book"]
    if book not in words:
        path = next(books_dir.glob(f"{book}_*.txt"))
        loaded = load_book(path)
        words[book] = (BookWords.of([loaded.text]), loaded.title, loaded.author)
    book_words, title, author = words[book]
    run = AnswerRun(
        question=row["question"],
        sources=[],
        mode="llm",
        answered_by="recheck",
        retrieval="",
        book_ids=[book],
        upto_chapter=row.get("upto"),
    )
    run.text = row.get("draft") or row["answer"]
    meta = {"author": author} if author else {}
    used = [
        NodeWithScore(node=TextNode(text=t, metadata=meta), score=1.0) for t in row["source_texts"]
    ]
    withdraw_unsupported(run, used, book_words, title)
    row["answer"], row["draft"], row["withheld"] = run.text, run.draft, run.withheld


def rescore(
    path: Path, reader: list[Path], keyed: list[Path], books_dir: Path | None = None
) -> int:
    """The tables of an earlier run, its reader answers scored by today's scorer (and, with
    ``books_dir``, each draft put through today's answer checks first: ``recheck``)."""
    from litrag.eval.keyfacts import load_reader_questions, score_answer

    by_id = {q.id: q for f in reader for q in load_reader_questions(f)}
    keys = {
        r["question"]: r["key"]
        for f in keyed
        for r in (json.loads(x) for x in f.read_text().splitlines() if x.strip())
    }
    words: dict[str, Any] = {}
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if books_dir is not None:
            recheck(row, books_dir, words)
        if row["kind"] == "keyed" and row["question"] in keys:
            key = keys[row["question"]]  # a withdrawn draft is no answer, whatever its note says
            row["correct"] = row.get("draft") is None and bool(re.search(key, row["answer"], re.I))
        if row["kind"] == "reader" and row.get("id") in by_id:
            q = by_id[row["id"]]
            sc = score_answer(q, row["answer"])
            row.update(correct=sc.correct, abstained=sc.abstained, partial=sc.partial)
            draft = " ".join((row.get("draft") or row["answer"]).split())
            row["correct_unchecked"] = score_answer(q, draft).correct
        results[row["style"]].append(row)
    print_tables(results)
    return 0


def print_tables(results: dict[str, list[dict[str, Any]]]) -> None:
    """Per style: median seconds, then correct / abstained / names by class and by route."""
    for style, rows in results.items():
        median = statistics.median(r["seconds"] for r in rows)
        print(f"\n## {style}: {len(rows)} answers, median {median:.1f} s")
        firsts = [r["first_piece_s"] for r in rows if r["first_piece_s"] is not None]
        if firsts:
            print(f"median seconds to the first piece: {statistics.median(firsts):.1f}")
        for key in ("class", "route"):
            groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in rows:
                groups[r[key]].append(r)
            print(
                f"\n| {key} | n | correct | abstained | unsupported names | names withheld "
                "| correct had drafts stood |\n|---|---|---|---|---|---|---|"
            )
            for name, g in sorted(groups.items()):
                ok = sum(r["correct"] for r in g)
                ab = sum(bool(r.get("abstained")) for r in g)
                un = sum(bool(r["unsupported_names"]) for r in g)
                wh = sum(bool(r["withheld"]) for r in g)
                raw = sum(r["correct_unchecked"] for r in g)
                n = len(g)
                print(f"| {name} | {n} | {ok}/{n} | {ab} | {un} | {wh} | {raw}/{n} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="an ingested LITRAG_HOME")
    ap.add_argument("--styles", default="single,quote", help="comma list of answer styles")
    ap.add_argument("--reader", type=Path, action="append", default=[], help="reader JSONL")
    ap.add_argument("--keyed", type=Path, action="append", default=[], help="keyed JSONL")
    ap.add_argument("--books", default="", help="comma list of book ids to keep (default all)")
    ap.add_argument("--limit", type=int, default=0, help="questions per file (0: all)")
    ap.add_argument("--classes", default="", help="comma list of question classes to keep")
    ap.add_argument("--no-route", action="store_true", help="plain passages, no narrative tools")
    ap.add_argument(
        "--next-evidence",
        action="store_true",
        help="the words whole blocks leave read the next block's winning paragraph "
        "(BookQueryEngine(read_next_evidence=True); off by default)",
    )
    ap.add_argument("--out", type=Path, help="append the JSON lines here")
    ap.add_argument(
        "--rescore",
        type=Path,
        help="score the answers of an earlier --out file again (reader rows, by id, against the "
        "--reader files; keyed rows keep their score) and print the tables; no LLM runs",
    )
    ap.add_argument(
        "--recheck",
        type=Path,
        metavar="BOOKS_DIR",
        help="with --rescore: put each draft through today's answer checks first, against the "
        "passages it read (the books' files in BOOKS_DIR give their words)",
    )
    args = ap.parse_args()
    if args.rescore:
        return rescore(args.rescore, args.reader, args.keyed, args.recheck)

    from litrag.answering.answer_types import AnswerStream
    from litrag.builders import (
        build_answer_llm,
        build_children_store,
        build_embed_model,
        build_query_engine,
        build_routed_engine,
        build_store,
    )
    from litrag.eval.keyfacts import load_reader_questions, score_answer
    from litrag.narrative.index import load_index
    from litrag.settings import Settings

    items: list[dict[str, Any]] = []
    for path in args.reader:
        rows = load_reader_questions(path)
        for q in rows[: args.limit or None]:
            items.append(
                {
                    "kind": "reader",
                    "q": q,
                    "book": _book_id(q.book_file),
                    "question": q.question,
                    "upto": q.upto_chapter,
                    "class": q.class_,
                }
            )
    for path in args.keyed:
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        for r in rows[: args.limit or None]:
            items.append(
                {
                    "kind": "keyed",
                    "book": r["book"],
                    "question": r["question"],
                    "key": r["key"],
                    "upto": r.get("upto_chapter"),
                    "class": path.stem,
                }
            )
    if args.books:
        keep = set(args.books.split(","))
        items = [it for it in items if it["book"] in keep]
    if args.classes:
        wanted = set(args.classes.split(","))
        items = [it for it in items if it["class"] in wanted]
    s = Settings(home=args.home.expanduser().resolve())
    embed = build_embed_model(s)
    store = build_store(s)
    children = build_children_store(s) if s.children else None
    indexes = {b: load_index(s.home, b) for b in {it["book"] for it in items}}
    out = args.out.open("a", encoding="utf-8") if args.out else None
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with build_answer_llm(s) as answer_llm:
        for style in args.styles.split(","):
            s.answer_style = style  # type: ignore[assignment]
            engines: dict[tuple[str, int | None], Any] = {}  # one per book and limit, as a chat
            for it in items:
                key = (it["book"], it["upto"])
                if key not in engines:
                    build = build_query_engine if args.no_route else build_routed_engine
                    engines[key] = build(
                        s,
                        it["book"],
                        llm=answer_llm.llm,
                        upto_chapter=it["upto"],
                        llm_description=answer_llm.description,
                        store=store,
                        children_store=children,
                        embed_model=embed,
                    )
                    if args.next_evidence:  # the routed engine answers through its book engine
                        getattr(engines[key], "book", engines[key]).read_next_evidence = True
                engine = engines[key]
                t0 = time.perf_counter()
                stream: AnswerStream = engine.ask(it["question"])
                first = None
                for _piece in stream:
                    if first is None:
                        first = time.perf_counter() - t0
                answer = stream.answer()
                secs = time.perf_counter() - t0
                text = " ".join(answer.text.split())
                grounds = " ".join(answer.evidence) or " ".join(
                    x.excerpt or x.text for x in answer.sources
                )
                names = _names(indexes.get(it["book"]), it["upto"])
                row: dict[str, Any] = {
                    "style": style,
                    "kind": it["kind"],
                    "book": it["book"],
                    "class": it["class"],
                    "question": it["question"],
                    "answer": text,
                    "route": (answer.route or {}).get("tool", "passages"),
                    "seconds": round(secs, 1),
                    "first_piece_s": round(first, 1) if first is not None else None,
                    "quotes": [q.text for q in answer.quotes],
                    "error": answer.error,
                    "unsupported_names": _unsupported(text, grounds + " " + it["question"], names),
                    "sources": [f"ch{x.chapter_index} s{x.sentence_from}" for x in answer.sources],
                    # What the LLM read (excerpts where cut): checks of an answer against its
                    # sources can then be tried on a run's lines without the LLM.
                    "source_texts": [x.excerpt or x.text for x in answer.sources],
                    "upto": it["upto"],
                    "withheld": answer.withheld,  # the name check's (answering.name_check)
                    "draft": answer.draft,
                    "llm_called": answer.mode == "llm",
                }
                # What the reader would have read without the name check: the withdrawn draft
                # (a question stopped before the LLM has no draft: scored as answered).
                draft = " ".join((answer.draft or text).split())
                if it["kind"] == "reader":
                    sc = score_answer(it["q"], text)
                    row.update(
                        id=it["q"].id,
                        correct=sc.correct,
                        abstained=sc.abstained,
                        partial=sc.partial,
                        forbidden=sc.forbidden_hits,
                        correct_unchecked=score_answer(it["q"], draft).correct,
                    )
                else:
                    row.update(
                        # a withdrawn draft's note may quote its name: no answer all the same
                        correct=answer.draft is None and bool(re.search(it["key"], text, re.I)),
                        correct_unchecked=bool(re.search(it["key"], draft, re.I)),
                    )
                results[style].append(row)
                line = json.dumps(row, ensure_ascii=False)
                print(line, flush=True)
                if out is not None:
                    out.write(line + "\n")
                    out.flush()
            for engine in engines.values():
                if hasattr(engine, "close"):
                    engine.close()
    for opened in (store, children):
        if opened is not None:
            opened.close()
    print_tables(results)
    if out is not None:
        out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
