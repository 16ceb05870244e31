"""Where the default's BM25 ranking loses to paragraphs, question by question.

For every question of each set, the rank of the first chunk holding the gold span under BM25
(in memory, the store's term weighting, the embedding view) for LitSeg offline and for paragraphs
<=200 words; then, for the questions LitSeg ranks worse, better, and all of them, the length of
the LitSeg block holding the span and whether the span sits at the block's edge (its start in
the first or last 15% of the block). A loss that clusters at edges points at cut placement or at
context sentences; one that clusters in long blocks points at block size.

    python benchmarks/loss_analysis.py [--cache-dir ~/.litrag/eval-cache]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from llama_index.core.schema import MetadataMode
from question_sets import DATA, SETS

from litrag.eval.questions import load_books, load_questions
from litrag.eval.registry import chunk_book, chunker_specs
from litrag.eval.spans import normalize
from litrag.scoring.bm25 import BM25Index

EDGE = 0.15


def ranks(key: str, path: Path, cache: Path) -> dict[str, tuple[float, float | None, int | None]]:
    """Question id -> (reciprocal rank@20, span position in its block 0..1, block words)."""
    (spec,) = chunker_specs([key])
    books, _ = load_books(load_questions(path), DATA)
    out = {}
    for book in books:
        nodes, _ = chunk_book(spec, book.docs, book.key, cache)
        raw = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        norm = [normalize(t) for t in raw]
        index = BM25Index(n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes)
        for q in book.questions:
            needles = [normalize(s) for s in q.spans]
            order = [i for i, _ in index.search(q.question, 20)]
            rr = next(
                (1 / r for r, i in enumerate(order, 1) if any(n in norm[i] for n in needles)), 0
            )
            gold = next((i for i, c in enumerate(norm) if any(n in c for n in needles)), None)
            pos = words = None
            if gold is not None:
                needle = next(n for n in needles if n in norm[gold])
                pos = norm[gold].index(needle) / max(1, len(norm[gold]))
                words = len(raw[gold].split())
            out[q.id] = (rr, pos, words)
    return out


def describe(rows: list[tuple[float, float | None, int | None]]) -> str:
    words = [w for _, _, w in rows if w]
    pos = [p for _, p, _ in rows if p is not None]
    edge = sum(1 for p in pos if p < EDGE or p > 1 - EDGE)
    mean = statistics.fmean(words) if words else 0.0
    return f"{len(rows)} | {mean:.0f} | {edge}/{len(pos)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".litrag" / "eval-cache")
    args = ap.parse_args()
    print("| set | questions | LitSeg block words | span at edge | which |")
    print("|---|---:|---:|---:|---|")
    for name, path in SETS.items():
        ours = ranks("litseg-offline", path, args.cache_dir)
        theirs = ranks("paragraphs", path, args.cache_dir)
        groups = {
            "all": list(ours),
            "LitSeg ranks worse": [q for q in ours if ours[q][0] < theirs[q][0]],
            "LitSeg ranks better": [q for q in ours if ours[q][0] > theirs[q][0]],
        }
        for which, ids in groups.items():
            n, words, edge = describe([ours[q] for q in ids]).split(" | ")
            print(f"| {name} | {n} | {words} | {edge} | {which} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
