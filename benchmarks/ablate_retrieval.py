"""Where the default retrieval's held-out loss comes from: one command, one table.

Each ablation changes one thing of the default (LitSeg offline blocks, the embedding view with
the subtitle, dense MaxSim over sentence windows, relative-score fusion at alpha 0.3) and is run
on the public GutenQA questions and on the frozen development set, with every figure also split
by book half. Paragraphs are run the same ways as the reference. Then, per mode family, the
setting that a tuner would pick on one half of the books is reported on the other half and on the
frozen set ("chosen on A, reported on B"), which is how a default should be chosen.

    python benchmarks/ablate_retrieval.py [--heldout SET.jsonl ...] [--groups size,...]
        [--cache-dir DIR] [--out ablations.md]

The held-out sets default to the frozen development sets in benchmarks/questions.

Everything is cached in the harness's cache (chunks, embeddings): a rerun only queries.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from question_sets import DATA, SETS

from litrag.eval.heldout import DEFAULT_SPLIT, QuestionSet
from litrag.eval.questions import load_questions, question_styles
from litrag.eval.retrieval import evaluate_retrieval, parse_modes

DEFAULT_MODE = "hybrid-rsf a=0.3"


@dataclass(frozen=True)
class Group:
    """One harness run: chunkers under one dense-vector setting, every mode."""

    name: str
    chunkers: tuple[str, ...]
    dense_vectors: str = "windows"


GROUPS = (
    # What is scored: blocks through their paragraph children (the default), the blocks
    # themselves, and the paragraphs alone; every fusion and weight of MODES.
    Group("ranking", ("litseg-offline", "litseg-offline>blocks", "paragraphs")),
    Group(
        "size",
        (
            "litseg-offline",
            "litseg-offline@200",
            "litseg-offline@400",
            "paragraphs",
            "paragraphs@120",
            "paragraphs@250",
        ),
    ),
    Group("one dense vector per block", ("litseg-offline", "paragraphs"), dense_vectors="block"),
)
MODES = parse_modes(["dense", "bm25", "hybrid"], [0.2, 0.3, 0.5])


def _f(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3f}"


def where(row: tuple, half: str, names: list[str]) -> str:
    """A row's figures on the reporting half of the public set and on every held-out set."""
    held = ", ".join(f"{n} {f['all']:.3f}" for n, f in zip(names, row[4][1:], strict=True))
    return f"public {half} {row[4][0][half]:.3f}, {held}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--public", type=Path, default=DATA / "gutenqa" / "questions.jsonl")
    ap.add_argument(
        "--heldout",
        type=Path,
        action="append",
        help="held-out sets (default: the frozen development sets of question_sets.py)",
    )
    ap.add_argument("--books", type=Path, default=DATA)
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".litrag" / "eval-cache")
    ap.add_argument("--split", default=",".join(DEFAULT_SPLIT))
    ap.add_argument("--groups", help="comma list of group names (default: all)")
    ap.add_argument("--out", type=Path, help="also write the Markdown here")
    ap.add_argument("--report", type=Path, help="write it as a section of this .md file")
    ap.add_argument("--section", default="ablations", help="section of --report")
    args = ap.parse_args()
    split = tuple(args.split.split(","))
    heldout = args.heldout or [p for name, p in SETS.items() if name != "public"]
    names = [p.stem.removeprefix("dev_") for p in heldout]
    say = lambda m: print(m, file=sys.stderr)  # noqa: E731
    wanted = set(args.groups.split(",")) if args.groups else None
    rows: list[tuple[str, str, float, str, list[dict[str, float]]]] = []
    for group in GROUPS:
        if wanted and group.name not in wanted:
            continue
        sets = []
        for path, name in [(args.public, "public"), *zip(heldout, names, strict=True)]:
            say(f"== {group.name}: {name}")
            run = evaluate_retrieval(
                load_questions(path),
                args.books,
                group.chunkers,
                MODES,
                cache_dir=args.cache_dir,
                dense_vectors=group.dense_vectors,  # type: ignore[arg-type]
                intrinsic=False,
                say=say,
            )
            sets.append(QuestionSet(name, run, question_styles(path)))
        for c in sets[0].run.chunkers:
            for mode in sets[0].run.config["modes"]:
                figs = [qs.figures(c.key, mode, split) for qs in sets]
                rows.append((group.name, c.label, c.mean_words, mode, figs))
    head = ["ablation", "chunker", "mean w", "mode", "public", "pub A", "pub B"]
    for name in names:
        head += [name, f"{name} A", f"{name} B", "drop"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|---|" + "---:|" * (len(head) - 4)]
    for group, label, words, mode, (p, *hs) in rows:
        cells = [group, label, f"{words:.0f}", mode, _f(p["all"]), _f(p["A"]), _f(p["B"])]
        for f in hs:
            cells += [_f(f["all"]), _f(f["A"]), _f(f["B"]), f"{f['all'] - p['all']:+.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Chosen on one half of the books, reported on the other (ours only):", ""]
    for family in ("bm25", "hybrid"):
        ours = [r for r in rows if r[1].startswith("LitSeg") and r[3].startswith(family)]
        for tune, report in (("A", "B"), ("B", "A")):
            if not ours:
                continue
            best = max(ours, key=lambda r: r[4][0][tune])
            default = next(
                (
                    r
                    for r in ours
                    if r[0] == "ranking"
                    and r[1] == "LitSeg offline"
                    and r[3] == (family if family == "bm25" else DEFAULT_MODE)
                ),
                None,
            )

            line = (
                f"- {family}, tuned on public {tune}: {best[0]} / {best[1]} / {best[3]} "
                f"(public {tune} {best[4][0][tune]:.3f}) -> {where(best, report, names)}"
            )
            if default is not None:
                line += f"; the shipped default: {where(default, report, names)}"
            lines.append(line)
    command = "python benchmarks/ablate_retrieval.py " + " ".join(sys.argv[1:])
    intro = [
        "# Retrieval ablations",
        "",
        "```",
        command.strip(),
        "```",
        "",
        "One change of the default per row group (LitSeg offline blocks, embedding view with "
        "subtitle, dense MaxSim over 3-sentence windows, relative-score fusion alpha 0.3); MRR, "
        f"top 20 within the book; half A = {', '.join(split)}. 'drop' is held-out minus public.",
        "",
    ]
    text = "\n".join(intro + lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.report:
        from litrag.eval.report import replace_section

        replace_section(args.report, args.section, "Retrieval ablations", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
