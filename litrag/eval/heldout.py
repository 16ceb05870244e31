"""Held-out reporting: public questions beside sets nobody tuned on, and a split by book.

A default chosen on the public questions can fit them: its public lead then shrinks or turns on
new questions. So every figure is shown three ways: on the public set, on each held-out set (the
frozen development set, or any other), and on each half of a split of the books, so that a
setting chosen on one half can be reported on the other. The public -> held-out drop sits beside
every chunker, and ``verdicts`` states, per mode, whether the default beats the reference chunker
on every held-out view and whether its drop stays within the reference's plus a margin.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from litrag.eval.metrics import QuestionScore, reciprocal_rank
from litrag.eval.retrieval import RetrievalRun

# Half A of the six shared books (the other three are half B): one short and two long novels
# each side, so neither half is only Austen or only adventure.
DEFAULT_SPLIT = ("pg11", "pg84", "pg215")
DEFAULT_KEY = "litseg-offline"
REFERENCE_KEY = "paragraphs"
DROP_MARGIN = 0.03


def book_key(book_file: str) -> str:
    """``books/pg11_alice_in_wonderland.txt`` -> ``pg11`` (the stem up to its first ``_``)."""
    return Path(book_file).stem.split("_", 1)[0]


def half(book_file: str, split: Sequence[str]) -> str:
    """``A`` for a book named in ``split``, else ``B``."""
    return "A" if book_key(book_file) in split else "B"


def mrr(scores: Iterable[QuestionScore]) -> float:
    """Mean reciprocal rank of ``scores``; NaN when there are none."""
    rr = [reciprocal_rank(s.rank) for s in scores]
    return statistics.fmean(rr) if rr else math.nan


def paired_gap(
    ours: Sequence[QuestionScore],
    theirs: Sequence[QuestionScore],
    keep: Callable[[QuestionScore], bool] = lambda _s: True,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean reciprocal-rank gap over the questions both ranked, with a 95% paired bootstrap
    interval: on 30 questions a book, a gap of a few hundredths can be noise, and the interval
    says so."""
    rr_theirs = {s.question_id: reciprocal_rank(s.rank) for s in theirs}
    diffs = [
        reciprocal_rank(s.rank) - rr_theirs[s.question_id]
        for s in ours
        if keep(s) and s.question_id in rr_theirs
    ]
    if not diffs:
        return math.nan, math.nan, math.nan
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    return statistics.fmean(diffs), means[int(0.025 * resamples)], means[int(0.975 * resamples)]


def wins_losses(
    ours: Sequence[QuestionScore],
    theirs: Sequence[QuestionScore],
    keep: Callable[[QuestionScore], bool] = lambda _s: True,
) -> tuple[int, int, int]:
    """Questions where ``ours`` ranks the evidence higher, lower, or the same (misses alike)."""
    rr_theirs = {s.question_id: reciprocal_rank(s.rank) for s in theirs}
    pairs = [
        (reciprocal_rank(s.rank), rr_theirs[s.question_id])
        for s in ours
        if keep(s) and s.question_id in rr_theirs
    ]
    return (
        sum(a > b for a, b in pairs),
        sum(a < b for a, b in pairs),
        sum(a == b for a, b in pairs),
    )


@dataclass
class QuestionSet:
    """A run of the harness on one question set, with each question's style where it has one."""

    name: str
    run: RetrievalRun
    styles: Mapping[str, str] = field(default_factory=dict)

    def chunker(self, key: str):
        return next((c for c in self.run.chunkers if c.key == key), None)

    def figures(self, key: str, mode: str, split: Sequence[str]) -> dict[str, float]:
        """MRR over all questions (``all``), over each half (``A``, ``B``), and per style."""
        c = self.chunker(key)
        if c is None or mode not in c.scores:
            return {}
        scores = c.scores[mode]
        out = {
            "all": mrr(scores),
            "A": mrr(s for s in scores if half(s.book, split) == "A"),
            "B": mrr(s for s in scores if half(s.book, split) == "B"),
        }
        for style in sorted(set(self.styles.values())):
            styled = (s for s in scores if self.styles.get(s.question_id) == style)
            out[f"style:{style}"] = mrr(styled)
        return out


def _f(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.3f}"


def _d(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:+.3f}"


def drop_table(public: QuestionSet, heldout: Sequence[QuestionSet], split: Sequence[str]) -> str:
    """One row per chunker and mode: public (all, A, B), then per held-out set all, drop, A, B."""
    head = ["chunker", "mode", "mean w", "public", "public A", "public B"]
    for h in heldout:
        head += [h.name, "drop", f"{h.name} A", f"{h.name} B"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for mode in public.run.config["modes"]:
        for c in public.run.chunkers:
            p = public.figures(c.key, mode, split)
            cells = [c.label, mode, f"{c.mean_words:.0f}", _f(p["all"]), _f(p["A"]), _f(p["B"])]
            for h in heldout:
                f = h.figures(c.key, mode, split)
                drop = f["all"] - p["all"] if f else math.nan
                cells += [_f(f.get("all")), _d(drop), _f(f.get("A")), _f(f.get("B"))]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def style_table(h: QuestionSet, split: Sequence[str]) -> str | None:
    """MRR per question style of a held-out set (None when it has no styles)."""
    styles = sorted(set(h.styles.values()))
    if not styles:
        return None
    counts = {s: sum(1 for v in h.styles.values() if v == s) for s in styles}
    head = ["chunker", "mode", *(f"{s} ({counts[s]})" for s in styles)]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(styles)]
    for mode in h.run.config["modes"]:
        for c in h.run.chunkers:
            f = h.figures(c.key, mode, split)
            cells = [_f(f.get(f"style:{s}")) for s in styles]
            lines.append(f"| {c.label} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(
    public: QuestionSet,
    heldout: Sequence[QuestionSet],
    split: Sequence[str],
    ours: str = DEFAULT_KEY,
    reference: str = REFERENCE_KEY,
    margin: float = DROP_MARGIN,
) -> list[str]:
    """Per mode: does ``ours`` beat ``reference`` on every held-out set and on each public half,
    and is its public -> held-out drop no larger than the reference's plus ``margin``?"""
    a, b = public.chunker(ours), public.chunker(reference)
    if a is None or b is None:
        return []
    out = []
    for mode in public.run.config["modes"]:
        views: list[tuple[str, float, float, str]] = []
        pa, pb = public.figures(ours, mode, split), public.figures(reference, mode, split)
        drops = []
        for qs, fa, fb in [(public, pa, pb)] + [
            (h, h.figures(ours, mode, split), h.figures(reference, mode, split)) for h in heldout
        ]:
            ca, cb = qs.chunker(ours), qs.chunker(reference)
            if not fa or not fb or ca is None or cb is None:
                continue
            for part in ("A", "B") if qs is public else ("all", "A", "B"):
                name = qs.name if part == "all" else f"{qs.name} {part}"
                keep = (
                    (lambda s: True)
                    if part == "all"
                    else (lambda s, p=part: half(s.book, split) == p)
                )
                gap, lo, hi = paired_gap(ca.scores[mode], cb.scores[mode], keep)
                won, lost, tied = wins_losses(ca.scores[mode], cb.scores[mode], keep)
                views.append(
                    (
                        name,
                        fa[part],
                        fb[part],
                        f"gap {gap:+.3f}, 95% CI {lo:+.3f}..{hi:+.3f}; "
                        f"questions won {won}, lost {lost}, tied {tied}",
                    )
                )
            if qs is not public:
                drops.append((qs.name, fa["all"] - pa["all"], fb["all"] - pb["all"]))
        wins = [f"{n} {x:.3f} vs {y:.3f} ({g})" for n, x, y, g in views if x > y]
        losses = [f"{n} {x:.3f} vs {y:.3f} ({g})" for n, x, y, g in views if not x > y]
        verdict = "beats" if not losses else "does NOT beat"
        line = f"- {mode}: {a.label} {verdict} {b.label} on every held-out view"
        line += f" (loses on {'; '.join(losses)})" if losses else f" ({'; '.join(wins)})"
        for name, da, db in drops:
            ok = da >= db - margin
            line += (
                f"; drop on {name} {da:+.3f} vs {db:+.3f}: "
                + ("within" if ok else "NOT within")
                + f" theirs + {margin:g}"
            )
        out.append(line)
    return out


def markdown(
    public: QuestionSet,
    heldout: Sequence[QuestionSet],
    split: Sequence[str],
    command: str | None = None,
) -> str:
    """The held-out report: the drop table, styles, verdicts, and what was run."""
    cfg = public.run.config
    other = sorted({book_key(b) for b in public.run.books} - set(split))
    parts = ["# Held-out retrieval", ""]
    if command:
        parts += ["```", command, "```", ""]
    parts += [
        f"Public set: {public.name}, {public.run.questions} questions. Held-out: "
        + "; ".join(f"{h.name}, {h.run.questions} questions" for h in heldout)
        + f". Book split: half A = {', '.join(split)}; half B = {', '.join(other)} "
        "(choose a setting on one half, report it on the other).",
        f"Retrieval as `litrag eval retrieval` runs it: top {cfg['top_k']} within the question's "
        f"book, dense `{cfg['embedding_model']}` over "
        f"{cfg.get('dense_vectors', 'one vector per chunk')}, BM25 best-window weight "
        f"{cfg.get('bm25_windows', 0)}. MRR over "
        "questions; 'drop' is "
        "held-out minus public.",
        "",
        "## MRR: public -> held-out, and by book half",
        "",
        drop_table(public, heldout, split),
        "",
    ]
    for h in heldout:
        table = style_table(h, split)
        if table:
            parts += [f"## {h.name}: MRR by question style", "", table, ""]
    lines = verdicts(public, heldout, split)
    if lines:
        parts += [
            f"## Verdict: {DEFAULT_KEY} against {REFERENCE_KEY} (drop margin {DROP_MARGIN:g})",
            "",
            *lines,
            "",
        ]
    env = public.run.environment
    parts += ["## Environment", "", ", ".join(f"{k} {v}" for k, v in env.items()), ""]
    return "\n".join(parts)
