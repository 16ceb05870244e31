"""BM25 through the library's store path, with and without each block's best piece.

The sparse side of retrieval as `litrag ask` runs it (Qdrant Edge, BM25 with per-book IDF, the
store's top 100 candidates re-scored by their best piece, ``window_bm25``) for each variant, on
the public set and every frozen development set, by book half. A variant is a weight (pieces:
3-sentence windows); weight 0 is block BM25 alone. BM25 alone is measured, so no embedding is
computed (the store gets a constant vector it never searches): a run takes minutes, not the hour
a full `litrag eval heldout` needs. The query clock (store queries, all questions) is printed too.

    python benchmarks/bm25_windows.py [--chunkers litseg-offline,paragraphs]
        [--weights 0,0.3,0.5] [--cache-dir ~/.litrag/eval-cache]
        [--report docs/results.md --section bm25-windows --title "BM25 over sentence windows"]
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
    ap.add_argument(
        "--weights",
        default="0,0.3",
        help="variants: WEIGHT of the sentence windows (0: block BM25 alone)",
    )
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".litrag" / "eval-cache")
    ap.add_argument("--report", type=Path, help="write it as a section of this .md file")
    ap.add_argument("--section", default="bm25-windows")
    ap.add_argument("--title", default="BM25 over sentence windows")
    args = ap.parse_args()
    variants = [_variant(v) for v in args.weights.split(",")]
    # (chunker label, variant) -> set name -> (all, A, B)
    figs: dict[tuple[str, tuple[str, float]], dict[str, tuple[float, float, float]]] = {}
    clock: dict[tuple[str, tuple[str, float]], list[float]] = {}  # query seconds, questions
    for name, path in SETS.items():
        questions = load_questions(path)
        for kind, w in variants:
            print(f"== {name}, {kind} weight {w:g}", file=sys.stderr)
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
                figs.setdefault((c.label, (kind, w)), {})[name] = (by[0], by[1], by[2])
                tick = clock.setdefault((c.label, (kind, w)), [0.0, 0.0])
                tick[0] += c.seconds["query"]
                tick[1] += len(sc)
    names = list(SETS)
    head = ["chunker", "pieces", "weight"]
    for name in names:
        head += [name, f"{name} A", f"{name} B"] + ([] if name == "public" else ["drop"])
    head.append("ms/query")
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|" + "---:|" * (len(head) - 3)]
    for (label, (kind, w)), per in figs.items():
        cells = [label, kind if w > 0 else "(block)", f"{w:g}"]
        for name in names:
            a, ha, hb = per[name]
            cells += [f"{a:.3f}", f"{ha:.3f}", f"{hb:.3f}"]
            if name != "public":
                cells.append(f"{a - per['public'][0]:+.3f}")
        secs, n = clock[(label, (kind, w))]
        cells.append(f"{1000 * secs / max(n, 1):.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    verdict = _protocol(figs, [c for c in dict.fromkeys(label for label, _ in figs)], names)
    command = "python benchmarks/bm25_windows.py " + " ".join(sys.argv[1:])
    doc = "\n".join(
        [
            f"# {args.title}",
            "",
            "```",
            command,
            "```",
            "",
            "BM25 MRR as the library's store computes it (top 20 within the book, IDF over the "
            "book), each block's score mixed with its best piece's at the given weight (0: "
            "block BM25 alone; pieces: `sentences`, 3-sentence windows). "
            "Half A = "
            + ", ".join(DEFAULT_SPLIT)
            + "; 'drop' is the set minus public; ms/query is the store's query clock over all "
            "sets (2 shared cores, nice 10).",
            "",
            *lines,
            "",
            "### Choice by protocol",
            "",
            *verdict,
        ]
    )
    print(doc)
    if args.report is not None:
        replace_section(args.report, args.section, args.title, doc)
    return 0


Figs = dict[tuple[str, tuple[str, float]], dict[str, tuple[float, float, float]]]


def _name(v: tuple[str, float]) -> str:
    return "block BM25" if v[1] <= 0 else f"{v[0]} {v[1]:g}"


def _protocol(figs: Figs, labels: list[str], names: list[str], margin: float = 0.03) -> list[str]:
    """The variant the first chunker scores best with on one half of the public set, read on
    the other half and every frozen set, against the second chunker under the same variant:
    it must win on every set and half and drop from public by at most theirs + ``margin``."""
    if len(labels) < 2:
        return ["(needs two chunkers)"]
    ours, ref = labels[0], labels[1]
    variants = list(dict.fromkeys(v for _, v in figs))
    out = []
    for pick, col in (("A", 1), ("B", 2)):
        best = max(variants, key=lambda v: figs[(ours, v)]["public"][col])  # first on ties
        other = "B" if pick == "A" else "A"
        mine, theirs = figs[(ours, best)], figs[(ref, best)]
        views = [f"public {other} {mine['public'][3 - col]:.3f}"] + [
            f"{n} {mine[n][0]:.3f} (A {mine[n][1]:.3f}, B {mine[n][2]:.3f})"
            for n in names
            if n != "public"
        ]
        lost = [
            f"{n} {h}"
            for n in names
            for i, h in enumerate(("all", "A", "B"))
            if mine[n][i] <= theirs[n][i]
        ]
        wide = [
            n
            for n in names
            if n != "public"
            and mine[n][0] - mine["public"][0] < theirs[n][0] - theirs["public"][0] - margin
        ]
        ranks = ", ".join(
            f"{_name(v)} {figs[(ours, v)]['public'][col]:.3f}"
            for v in sorted(variants, key=lambda v: -figs[(ours, v)]["public"][col])
        )
        won = (
            "beats it on every set and half" if not lost else "loses or ties on " + ", ".join(lost)
        )
        held = (
            f"within theirs + {margin:g} on every set"
            if not wide
            else "too wide on " + ", ".join(wide)
        )
        out.append(
            f"- chosen on public {pick}: **{_name(best)}** ({ranks}); on the rest: "
            + "; ".join(views)
            + f". Against {ref} (same variant): "
            + f"{won}; drop {held}."
        )
    return out


def _variant(raw: str) -> tuple[str, float]:
    """``0.3`` -> ("sentences", 0.3): the one kind of piece (paragraph children were deleted)."""
    return "sentences", float(raw)


if __name__ == "__main__":
    raise SystemExit(main())
