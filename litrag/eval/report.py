"""Reports of a retrieval run: a Markdown table, the full JSON, and a PNG plot when possible.

The Markdown puts chunk count, mean/median words and the split-span share beside every metric
row, since longer chunks contain spans more easily; a closing "quality bar" section states, per
mode, whether our segmenter's MRR beats every reference chunker's.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from litrag.eval.registry import is_ours
from litrag.eval.retrieval import RetrievalRun
from litrag.ingestion.input_file import read_input_text

_COLS = ("MRR", "Hit@1", "Hit@5", "Hit@20", "DCG@20")


def _f(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def metrics_table(run: RetrievalRun) -> str:
    """One row per chunker and mode: sizes, split share, metrics over questions, MRR over books."""
    head = ["chunker", "mode", "chunks", "mean w", "median w", "split", *_COLS, "MRR (books)"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for mode in run.config["modes"]:
        for c in run.chunkers:
            agg = c.modes[mode]
            m = agg.over_questions
            cells = [
                c.label,
                mode,
                str(c.chunks),
                f"{c.mean_words:.0f}",
                f"{c.median_words:.0f}",
                f"{c.split_spans:.3f}",
                *(_f(m[k]) for k in _COLS),
                _f(agg.over_books["MRR"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mrr_matrix(run: RetrievalRun) -> str:
    """Compact view: MRR per chunker (rows) and mode (columns)."""
    modes = run.config["modes"]
    lines = [
        "| chunker | mean w | " + " | ".join(modes) + " |",
        "|---|---:|" + "---:|" * len(modes),
    ]
    for c in run.chunkers:
        cells = [_f(c.modes[m].over_questions["MRR"]) for m in modes]
        lines.append(f"| {c.label} | {c.mean_words:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def intrinsic_table(run: RetrievalRun) -> str | None:
    rows = [c for c in run.chunkers if c.intrinsic]
    if not rows:
        return None
    model = rows[0].intrinsic["model"]  # type: ignore[index]
    lines = [
        f"Boundary cosine (lower = cuts between less similar sentences), model `{model}`:",
        "",
        "| chunker | boundaries | mean cos | median cos |",
        "|---|---:|---:|---:|",
    ]
    for c in rows:
        b = c.intrinsic or {}
        lines.append(
            f"| {c.label} | {b['boundaries']} | {_f(b['mean_cosine'])} | {_f(b['median_cosine'])} |"
        )
    return "\n".join(lines)


def timing_table(run: RetrievalRun) -> str:
    lines = [
        "| chunker | chunk s | embed s | store s | query s | rerank s | intrinsic s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in run.chunkers:
        s = c.seconds
        lines.append(
            f"| {c.label} | {s['chunk']:.1f} | {s['embed']:.1f} | {s['store']:.1f} | "
            f"{s['query']:.1f} | {s.get('rerank', 0.0):.1f} | {s['intrinsic']:.1f} |"
        )
    return "\n".join(lines)


def per_book_table(run: RetrievalRun) -> str | None:
    """Seconds per book per chunker: chunking + embedding + storing (queries are per run)."""
    books = list(dict.fromkeys(b for c in run.chunkers for b in c.seconds_per_book))
    if not books:
        return None
    names = [Path(b).stem.split("_")[0] for b in books]
    lines = ["| chunker | " + " | ".join(names) + " |", "|---|" + "---:|" * len(books)]
    for c in run.chunkers:
        cells = []
        for b in books:
            t = c.seconds_per_book.get(b)
            cells.append(f"{t['chunk'] + t['embed'] + t['store']:.0f}" if t else "-")
        lines.append(f"| {c.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def outcomes_table(run: RetrievalRun) -> str | None:
    """Chunks per LLM outcome (valid / repaired / fallback / ...) for the LLM chunkers."""
    rows = [c for c in run.chunkers if c.outcomes]
    if not rows:
        return None
    names = sorted({k for c in rows for k in c.outcomes})
    lines = ["| chunker | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for c in rows:
        lines.append(
            f"| {c.label} | " + " | ".join(str(c.outcomes.get(k, 0)) for k in names) + " |"
        )
    return "\n".join(lines)


def head_to_head(
    run: RetrievalRun, ours: str = "litseg-lite", theirs: str = "lumberchunker"
) -> list[str]:
    """Per mode: LitSeg-Lite against LumberChunker (the same LLM, the same books)."""
    keys = {c.key: c for c in run.chunkers}
    if ours not in keys or theirs not in keys:
        return []
    a, b = keys[ours], keys[theirs]
    out = []
    for mode in run.config["modes"]:
        x, y = a.modes[mode].over_questions["MRR"], b.modes[mode].over_questions["MRR"]
        verdict = "beats" if x > y else "does NOT beat"
        out.append(
            f"- {mode}: {a.label} MRR {x:.3f} {verdict} {b.label} {y:.3f} (gap {x - y:+.3f})"
        )
    return out


def quality_bar(run: RetrievalRun) -> list[str]:
    """Per mode and per chunker of ours: MRR vs the best reference chunker's, with the gap."""
    ours = [c for c in run.chunkers if is_ours(c.key)]
    refs = [c for c in run.chunkers if not is_ours(c.key)]
    if not ours or not refs:
        return []
    out = []
    for mode in run.config["modes"]:
        best = max(refs, key=lambda c: c.modes[mode].over_questions["MRR"])
        b = best.modes[mode].over_questions["MRR"]
        for c in ours:
            m = c.modes[mode].over_questions["MRR"]
            verdict = "beats" if m > b else "does NOT beat"
            out.append(
                f"- {mode}: {c.label} MRR {m:.3f} {verdict} the best reference "
                f"({best.label}, {b:.3f}; gap {m - b:+.3f})"
            )
    return out


def markdown(run: RetrievalRun, command: str | None = None, plot_file: str | None = None) -> str:
    cfg, env = run.config, run.environment
    parts = ["# Retrieval evaluation", ""]
    if command:
        parts += ["```", command, "```", ""]
    parts += [
        f"{run.questions} questions over {len(run.books)} books "
        f"({', '.join(f'{Path(b).name}: {n}' for b, n in run.books.items())}); "
        f"dropped (span not in the {'text evaluated' if cfg.get('max_chapters') else 'book'}): "
        f"{', '.join(run.dropped) or 'none'}.",
        *(
            [f"**Sub-corpus: the first {cfg['max_chapters']} chapters of each book only.**"]
            if cfg.get("max_chapters")
            else []
        ),
        f"Retrieval within the question's book, top {cfg['top_k']} "
        f"(fusion candidates {cfg['fusion_candidates']} per list); "
        f"BM25 avg_len {cfg['bm25_avg_len']}, {cfg['sparse_idf']}, "
        f"best-window weight {cfg.get('bm25_windows', 0)}; "
        f"dense `{cfg['embedding_model']}` over "
        f"{cfg.get('dense_vectors', 'one vector per chunk')}; {cfg['store']}.",
        *(
            [
                f"LLM chunkers: `{cfg['llm']}` ("
                + ", ".join(f"{k} {v}" for k, v in cfg.get("llm_settings", {}).items())
                + ")."
            ]
            if cfg.get("llm")
            else []
        ),
        *([f"Reranker: `{cfg['reranker']}`."] if cfg.get("reranker") else []),
        "Metrics over questions (MRR is MRR@k: ranks beyond k count 0); 'MRR (books)' is per "
        "book then over books; 'split' is the share of gold spans no chunk contains whole.",
        "",
        "## MRR",
        "",
        mrr_matrix(run),
        "",
        *([f"![MRR, Hit@5 and chunk lengths per chunker]({plot_file})", ""] if plot_file else []),
        "## All metrics",
        "",
        metrics_table(run),
        "",
    ]
    bar = quality_bar(run)
    if bar:
        parts += ["## Quality bar (ours vs the best reference chunker, MRR)", "", *bar, ""]
    duel = head_to_head(run)
    if duel:
        parts += ["## LitSeg-Lite vs LumberChunker (same LLM, MRR)", "", *duel, ""]
    outcomes = outcomes_table(run)
    if outcomes:
        parts += ["## LLM outcomes (chunks per outcome)", "", outcomes, ""]
    intr = intrinsic_table(run)
    if intr:
        parts += ["## Intrinsic boundary metric", "", intr, ""]
    parts += [
        "## Timing",
        "",
        f"Wall {run.seconds:.0f} s, peak RSS {run.peak_rss_mb:.0f} MB; embeddings computed "
        f"{run.embeddings_computed}, from cache {run.embeddings_cached}.",
        "",
        timing_table(run),
        "",
        *(
            ["Seconds per book (chunk + embed + store; cached work counts ~0):", "", table, ""]
            if (table := per_book_table(run))
            else []
        ),
        "## Environment",
        "",
        ", ".join(f"{k} {v}" for k, v in env.items()),
        "",
    ]
    return "\n".join(parts)


def plot(run: RetrievalRun, path: Path) -> bool:
    """MRR and Hit@5 per chunker and mode, and chunk-length distributions; False without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    modes = run.config["modes"]
    labels = [c.label for c in run.chunkers]
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    width = 0.8 / max(len(modes), 1)
    for ax, metric in zip(axes[:2], ("MRR", "Hit@5"), strict=True):
        for j, mode in enumerate(modes):
            vals = [c.modes[mode].over_questions[metric] for c in run.chunkers]
            xs = [i + (j - (len(modes) - 1) / 2) * width for i in range(len(labels))]
            ax.bar(xs, vals, width, label=mode)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(f"{metric} (over {run.questions} questions)")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[2].boxplot([c.words for c in run.chunkers], showfliers=False)
    axes[2].set_xticks(range(1, len(labels) + 1), labels, rotation=30, ha="right", fontsize=8)
    axes[2].set_title("words per chunk (no outliers)")
    axes[2].grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_reports(run: RetrievalRun, out: Path, command: str | None = None) -> dict[str, Path]:
    """``retrieval.md``, ``retrieval.json`` and (with matplotlib) ``retrieval.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = _data_and_plot(run, out / "retrieval.json", out / "retrieval.png", command)
    paths["markdown"] = out / "retrieval.md"
    plot_file = paths["png"].name if "png" in paths else None
    paths["markdown"].write_text(markdown(run, command, plot_file), encoding="utf-8")
    return paths


RESULTS_TITLE = "# litrag results"
RESULTS_INTRO = (
    "Written by `litrag eval retrieval --report`. Each section is rewritten by the command it "
    "shows (`--section` names it), so every number here can be reproduced from a clone."
)


def check_section(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"section names are letters, digits, '.', '_' and '-': {name!r}")


def write_section(
    run: RetrievalRun, report: Path, section: str = "default", command: str | None = None
) -> dict[str, Path]:
    """Put this run in ``report`` as section ``section``, replacing that section only.

    One Markdown file then holds several runs (the default chunker set over every book, an LLM
    chunker run on a sub-corpus, ...), each with its command; its JSON and plot lie beside it as
    ``<stem>-<section>.json`` / ``.png``.
    """
    check_section(section)
    report.parent.mkdir(parents=True, exist_ok=True)
    base = report.with_suffix("")
    paths = _data_and_plot(
        run,
        base.with_name(f"{base.name}-{section}.json"),
        base.with_name(f"{base.name}-{section}.png"),
        command,
    )
    plot_file = paths["png"].name if "png" in paths else None
    paths["markdown"] = replace_section(
        report, section, f"Retrieval evaluation: {section}", markdown(run, command, plot_file)
    )
    return paths


def replace_section(report: Path, section: str, title: str, document: str) -> Path:
    """Put ``document`` (Markdown under a ``# ...`` title, which is dropped) in ``report`` as
    section ``section`` headed ``## title``, its headings one level down; other sections stay."""
    check_section(section)
    report.parent.mkdir(parents=True, exist_ok=True)
    body = document.split("\n", 1)[1]  # drop the "# ..." title
    body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.MULTILINE)  # one level down
    block = f"<!-- section {section} -->\n## {title}\n{body.rstrip()}\n<!-- /section {section} -->"
    text = read_input_text(report, "--report") if report.exists() else ""  # a FIFO: refused
    if not text.strip():
        text = f"{RESULTS_TITLE}\n\n{RESULTS_INTRO}\n"
    pattern = re.compile(
        rf"<!-- section {re.escape(section)} -->.*?<!-- /section {re.escape(section)} -->",
        re.DOTALL,
    )
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip() + "\n\n" + block
    report.write_text(text.rstrip() + "\n", encoding="utf-8")
    return report


def _data_and_plot(
    run: RetrievalRun, json_path: Path, png_path: Path, command: str | None
) -> dict[str, Path]:
    data = run.to_json()
    data["command"] = command
    json_path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    paths = {"json": json_path}
    if plot(run, png_path):
        paths["png"] = png_path
    return paths
