"""BM25 through the library's store path, with and without each block's best sentence window.

The sparse side of retrieval as `litrag ask` runs it (Qdrant Edge, BM25 with per-book IDF, the
store's top 100 candidates re-scored by their best 3-sentence window, ``window_bm25``) for each
window weight, on the public set and every frozen development set, by book half. BM25 alone is
measured, so no embedding is computed (the store gets a constant vector it never searches):
a run takes minutes, not the hour a full `litrag eval heldout` needs.

    python benchmarks/bm25_windows.py [--chunkers litseg-offline,paragraphs] [--weights 0,0.3]
        [--cache-dir ~/.litrag/eval-cache] [--report docs/results.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from question_sets import DATA, SETS

from litrag.eval.heldout import DEFAULT_SPLIT, half, mrr
from litrag.eval.questions import load_questions
from litrag.eval.report import replace_section
from litrag.eval.retrieval import evaluate_retrieval, parse_modes


class NoDense:
    """Stands in for the embedder where only BM25 is queried: one constant vector per text."""

    model_key = "none (BM25 only)"
    computed = cached = 0
    seconds = 0.0

    def embed(self, texts: list[str], kind: str = "text") -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--chunkers", default="litseg-offline,paragraphs")
    ap.add_argument("--weights", default="0,0.3", help="window weights (0: block BM25 alone)")
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".litrag" / "eval-cache")
    ap.add_argument("--report", type=Path, help="write it as a section of this .md file")
    ap.add_argument("--section", default="bm25-windows")
    args = ap.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    # (chunker label, weight) -> set name -> (all, A, B)
    figs: dict[tuple[str, float], dict[str, tuple[float, float, float]]] = {}
    for name, path in SETS.items():
        questions = load_questions(path)
        for w in weights:
            print(f"== {name}, window weight {w:g}", file=sys.stderr)
            run = evaluate_retrieval(
                questions,
                DATA,
                args.chunkers.split(","),
                parse_modes(["bm25"]),
                cache_dir=args.cache_dir,
                embedder=NoDense(),  # type: ignore[arg-type]
                dense_vectors="block",
                bm25_windows=w,
                intrinsic=False,
                say=lambda _m: None,
            )
            for c in run.chunkers:
                sc = c.scores["bm25"]
                by = [mrr(sc)] + [
                    mrr([s for s in sc if half(s.book, DEFAULT_SPLIT) == h]) for h in "AB"
                ]
                figs.setdefault((c.label, w), {})[name] = (by[0], by[1], by[2])
    names = list(SETS)
    head = ["chunker", "window weight"]
    for name in names:
        head += [name, f"{name} A", f"{name} B"] + ([] if name == "public" else ["drop"])
    lines = ["| " + " | ".join(head) + " |", "|---|---:|" + "---:|" * (len(head) - 2)]
    for (label, w), per in figs.items():
        cells = [label, f"{w:g}"]
        for name in names:
            a, ha, hb = per[name]
            cells += [f"{a:.3f}", f"{ha:.3f}", f"{hb:.3f}"]
            if name != "public":
                cells.append(f"{a - per['public'][0]:+.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    command = "python benchmarks/bm25_windows.py " + " ".join(sys.argv[1:])
    doc = "\n".join(
        [
            "# BM25 over sentence windows",
            "",
            "```",
            command,
            "```",
            "",
            "BM25 MRR as the library's store computes it (top 20 within the book, IDF over the "
            "book), each block's score mixed with its best 3-sentence window's at the given "
            "weight (0: block BM25 alone). Half A = "
            + ", ".join(DEFAULT_SPLIT)
            + "; 'drop' is the set minus public.",
            "",
            *lines,
        ]
    )
    print(doc)
    if args.report is not None:
        replace_section(args.report, args.section, "BM25 over sentence windows", doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
