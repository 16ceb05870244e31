"""Would BM25 find paraphrased questions with the question's words widened to their neighbours?

    python benchmarks/query_expansion.py [--books data] [--half-a pg11,pg84,pg215]

The blind set's paraphrase questions share no rare word with their passage, and BM25, which
carries 0.7 of the default hybrid, finds them worst. A classic remedy is to widen the query:
each content word of the question brings in the book words nearest to it. Here the neighbours
come from the packaged MiniLM: every word of a book (one surface form per Snowball stem, stop
words and words under 3 letters out) is embedded once, each question word is embedded, and its
``n`` nearest book words with cosine >= ``tau`` (not already a question stem) are added to the
BM25 query with weight ``beta * cosine`` (a question word weighs 1).

Retrieval: the paragraph reference chunker (``paragraph_chunker``, <= 200 words) over each book's
chapters, in-memory BM25 (``BM25Index``, the product's scorer), top 20, MRR where the chunk holds
the gold span. Sets: the public GutenQA set and the blind frozen set, by book half (choose on
half A, read on half B). Outside the product: a pilot that decides whether widening is worth
building into the stores.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from question_sets import DATA, QUESTIONS

GRID = [(b, t, n) for b in (0.2, 0.4, 0.7) for t in (0.5, 0.6, 0.7) for n in (2, 5)]


def unit(rows: Any) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def book_words(text: str, stop: frozenset[str]) -> tuple[list[str], list[str]]:
    """The book's stems and, for each, its most frequent surface form."""
    from litrag.scoring.bm25 import _stem

    counts = Counter(w for w in re.findall(r"[a-z]+", text.lower()) if w not in stop and len(w) > 2)
    by_stem: dict[str, str] = {}
    for w, _ in counts.most_common():
        by_stem.setdefault(_stem(w), w)
    return list(by_stem), list(by_stem.values())


def collect(books_dir: Path, half_a: set[str]) -> list[dict[str, Any]]:
    from litrag.builders import build_embed_model
    from litrag.chunkers.baselines import paragraph_chunker
    from litrag.eval.questions import load_books, load_questions
    from litrag.eval.spans import contains_span
    from litrag.scoring.bm25 import BM25Index, stop_words, tokenize
    from litrag.settings import Settings

    embed = build_embed_model(Settings())
    stop = stop_words()
    rows: list[dict[str, Any]] = []
    sets = {
        "public": books_dir / "gutenqa" / "questions.jsonl",
        "blind": QUESTIONS / "blind_frozen.jsonl",
    }
    for set_name, path in sets.items():
        questions = load_questions(path)
        books, _ = load_books(questions, books_dir)
        for book in books:
            chunks = [
                n.get_content() for n in paragraph_chunker().get_nodes_from_documents(book.docs)
            ]
            index = BM25Index(chunks)
            stems, surface = book_words("\n".join(d.text for d in book.docs), stop)
            vocab = unit(embed.get_text_embedding_batch(surface))
            for q in book.questions:
                asked = set(tokenize(q.question))
                words = [w for w in re.findall(r"[a-z]+", q.question.lower()) if w not in stop]
                near: list[list[tuple[str, float]]] = []
                if words:
                    sims = unit(embed.get_text_embedding_batch(words)) @ vocab.T
                    for row in sims:
                        top = np.argsort(-row)[:8]
                        near.append(
                            [(stems[j], float(row[j])) for j in top if stems[j] not in asked]
                        )
                gold = {
                    i for i, c in enumerate(chunks) if any(contains_span(c, s) for s in q.spans)
                }
                rows.append(
                    {
                        "set": set_name,
                        "half": "A" if book.book_id in half_a else "B",
                        "base": np.asarray(index.scores(q.question)),
                        "near": near,
                        "gold": gold,
                        "index": index,
                    }
                )
    return rows


def reciprocal_rank(row: dict[str, Any], beta: float, tau: float, n: int) -> float:
    from litrag.scoring.bm25 import term_id

    scores = row["base"].copy()
    index = row["index"]
    added: dict[str, float] = {}
    for near in row["near"]:
        for stem, cos in near[:n]:
            if cos >= tau:
                added[stem] = max(added.get(stem, 0.0), cos)
    for stem, cos in added.items():
        tid = term_id(stem)
        idf = index._idf.get(tid)
        for doc, sat in index._postings.get(tid, []) if idf is not None else []:
            scores[doc] += beta * cos * idf * sat
    order = np.argsort(-scores, kind="stable")[:20]
    return next((1 / (k + 1) for k, d in enumerate(order) if d in row["gold"]), 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--books", type=Path, default=DATA, help="the shared data folder")
    ap.add_argument("--half-a", default="pg11,pg84,pg215", help="half A's book ids")
    args = ap.parse_args()
    rows = collect(args.books, set(args.half_a.split(",")))
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for g in (r["set"], f"{r['set']} {r['half']}"):
            groups.setdefault(g, []).append(r)
    names = sorted(groups)
    print("| widening | " + " | ".join(f"{g} ({len(groups[g])})" for g in names) + " |")
    print("|---|" + "---:|" * len(names))
    for beta, tau, n in [(0.0, 1.0, 0), *GRID]:
        label = "none (BM25)" if beta == 0 else f"beta {beta:g}, tau {tau:g}, n {n}"
        cells = [
            f"{statistics.mean(reciprocal_rank(r, beta, tau, n) for r in groups[g]):.3f}"
            for g in names
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
