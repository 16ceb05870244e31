"""BM25 retrieval over every reference chunker and our segmenter, on the six-book GutenQA set.

python benchmarks/eval_bm25.py [--data DIR] [--questions FILE] [--only NAME ...] [--avg-len N]

Each book is split into chapters, chunked, and indexed on its own (BM25Index, avg_len fitted to
the book's chunks, or ``--avg-len``, e.g. 256 as a Qdrant collection fed by the default
``doc_fn`` would); each question retrieves within its own book over the full ranking. A chunk
is relevant when it contains the gold span after ``litrag.eval.spans.normalize``. Questions
whose span is not in the book at all (a data error, printed) are left out; spans that the book
holds but no chunk holds whole count as misses and make up the "split" column (recall ceiling).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.schema import Document, MetadataMode

from litrag.chunkers.baselines import BASELINES, dynamic_merge, word_count
from litrag.eval.metrics import QuestionScore, aggregate, rank_order
from litrag.eval.spans import normalize
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.scoring.bm25 import BM25Index
from litrag.segment import LitSegNodeParser

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data"


def chunkers() -> dict[str, Callable[[], NodeParser]]:
    out = dict(BASELINES)
    out["offline + dynamic merge"] = lambda: dynamic_merge(LitSegNodeParser())
    out["LitSeg offline (default)"] = LitSegNodeParser
    return out


def load_questions(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [q for q in rows if q.get("chunk_must_contain")]


def evaluate(
    name: str,
    make: Callable[[], NodeParser],
    books: dict[str, list[Document]],
    questions: dict[str, list[dict]],
    avg_len: float | None = None,
) -> dict:
    t0 = time.perf_counter()
    parser = make()
    words: list[int] = []
    scores: list[QuestionScore] = []
    split = 0
    for book_file, docs in books.items():
        nodes = parser.get_nodes_from_documents(docs)
        texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        words += [word_count(t) for t in texts]
        norm = [normalize(t) for t in texts]
        index = BM25Index(texts, avg_len=avg_len)
        for q in questions[book_file]:
            span = normalize(q["chunk_must_contain"])
            relevant = [span in c for c in norm]
            split += not any(relevant)
            order = rank_order(index.scores(q["question"]))
            ranked = [relevant[i] for i in order]
            scores.append(QuestionScore.from_relevance(q["id"], book_file, ranked))
    agg = aggregate(scores)
    m = agg.over_questions
    return {
        "chunker": name,
        "chunks": len(words),
        "mean words": f"{statistics.fmean(words):.0f}",
        "median words": f"{statistics.median(words):.0f}",
        "split spans": f"{split / agg.questions:.3f}",
        "MRR": f"{m['MRR']:.3f}",
        "Hit@1": f"{m['Hit@1']:.3f}",
        "Hit@5": f"{m['Hit@5']:.3f}",
        "Hit@20": f"{m['Hit@20']:.3f}",
        "DCG@20": f"{m['DCG@20']:.3f}",
        "MRR (books)": f"{agg.over_books['MRR']:.3f}",
        "seconds": f"{time.perf_counter() - t0:.0f}",
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--questions", type=Path, default=None)
    ap.add_argument("--only", nargs="*", help="chunker names to run (default: all)")
    ap.add_argument("--avg-len", type=float, default=None, help="BM25 avglen (default: fitted)")
    args = ap.parse_args(argv)
    qfile = args.questions or args.data / "gutenqa" / "questions.jsonl"

    questions: dict[str, list[dict]] = {}
    books: dict[str, list[Document]] = {}
    book_text: dict[str, str] = {}  # normalised, to drop spans the book does not hold
    dropped = []
    for q in load_questions(qfile):
        bf = q["book_file"]
        if bf not in books:
            books[bf] = split_chapters(load_book(args.data / bf))
            book_text[bf] = normalize("\n\n".join(d.text for d in books[bf]))
            questions[bf] = []
        if normalize(q["chunk_must_contain"]) in book_text[bf]:
            questions[bf].append(q)
        else:
            dropped.append(q["id"])
    n = sum(len(v) for v in questions.values())
    print(f"{n} questions over {len(books)} books; span not in the book text: {dropped or 'none'}")

    rows = []
    for name, make in chunkers().items():
        if args.only and name not in args.only:
            continue
        rows.append(evaluate(name, make, books, questions, args.avg_len))
        print(f"  done {name} ({rows[-1]['seconds']} s)", file=sys.stderr)
    cols = list(rows[0])
    print("\n| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if c == "chunker" else "---:" for c in cols) + "|")
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    print(
        "\nBM25: Snowball stems, English stop-words, k1=1.2, b=0.75, avg_len "
        f"{args.avg_len or 'fitted per book'}; "
        "MRR/Hit/DCG averaged over questions, 'MRR (books)' per book then over books; "
        "'split spans': share of gold spans no chunk contains whole (recall ceiling)."
    )


if __name__ == "__main__":
    main()
