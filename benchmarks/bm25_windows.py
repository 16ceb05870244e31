"""BM25 over blocks, over each block's sentence windows (MaxSim), and the two mixed.

Dense search already scores a block by its best 3-sentence window. This asks whether BM25 should
too, which would make the sparse score depend less on how long a block is: every chunk's
windows are scored with an in-memory BM25 (the same term weighting as the store's), a block gets
its best window's score, and ``mix A`` is ``A * window + (1 - A) * block`` after min-max
scaling per question. In memory, not in the store: this decides whether the store should grow
window sparse vectors. Figures per question set and book half.

    python benchmarks/bm25_windows.py [--chunkers litseg-offline,paragraphs]
        [--cache-dir ~/.litrag/eval-cache]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from llama_index.core.schema import MetadataMode
from question_sets import DATA, SETS

from litrag.embeddings import SentenceWindowEncoder
from litrag.eval.heldout import DEFAULT_SPLIT, half
from litrag.eval.questions import load_books, load_questions
from litrag.eval.registry import chunk_book, chunker_specs
from litrag.eval.spans import normalize
from litrag.query.bm25 import BM25Index

TOP_K = 20


def _scaled(scores: list[float]) -> list[float]:
    lo, hi = min(scores), max(scores)
    return [(x - lo) / (hi - lo) if hi > lo else 0.0 for x in scores]


def _rr(scores: list[float], relevant: list[bool]) -> float:
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:TOP_K]
    return next((1 / r for r, i in enumerate(order, 1) if relevant[i]), 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--chunkers", default="litseg-offline,paragraphs")
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".litrag" / "eval-cache")
    ap.add_argument("--mix", default="0.3,0.5", help="window weights of the mixed scores")
    args = ap.parse_args()
    mixes = [float(a) for a in args.mix.split(",")]
    windows = SentenceWindowEncoder(lambda texts: texts)  # only its windows() is used
    print("| chunker | set | scoring | all | A | B |\n|---|---|---|---:|---:|---:|")
    for spec in chunker_specs(args.chunkers.split(",")):
        for name, path in SETS.items():
            books, _ = load_books(load_questions(path), DATA)
            got: dict[str, list[tuple[str, float]]] = {}
            for book in books:
                nodes, _ = chunk_book(spec, book.docs, book.key, args.cache_dir)
                raw = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
                blocks = BM25Index(n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes)
                owner, texts = [], []
                for i, text in enumerate(raw):
                    for w in windows.windows(text):
                        owner.append(i)
                        texts.append(w)
                wins = BM25Index(texts)
                norm = [normalize(t) for t in raw]
                for q in book.questions:
                    needles = [normalize(s) for s in q.spans]
                    relevant = [any(nd in c for nd in needles) for c in norm]
                    block = blocks.scores(q.question)
                    best = [0.0] * len(nodes)
                    for j, s in enumerate(wins.scores(q.question)):
                        best[owner[j]] = max(best[owner[j]], s)
                    ways = {"block": block, "windows (MaxSim)": best}
                    sb, sw = _scaled(block), _scaled(best)
                    for a in mixes:
                        ways[f"mix {a:g}"] = [
                            a * w + (1 - a) * b for w, b in zip(sw, sb, strict=True)
                        ]
                    for way, scores in ways.items():
                        got.setdefault(way, []).append(
                            (half(book.file, DEFAULT_SPLIT), _rr(scores, relevant))
                        )
            for way, rows in got.items():

                def m(h: str | None, rows=rows) -> float:
                    return statistics.fmean(x for g, x in rows if h in (None, g))

                print(
                    f"| {spec.label} | {name} | {way} | "
                    f"{m(None):.3f} | {m('A'):.3f} | {m('B'):.3f} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
