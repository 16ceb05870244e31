"""Reports of an answer run: Markdown (the figures, what each metric is, samples) and the JSON.

Every metric's label travels with the numbers, so a METEOR computed without WordNet, a skipped
BERTScore or a missing judge is visible in the table header notes, not only in a log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from litrag.eval.answers import AnswerRun

_COLS = (
    ("em", "EM"),
    ("f1", "F1"),
    ("rouge_l", "ROUGE-L"),
    ("meteor", "METEOR"),
    ("bertscore", "BERTScore"),
    ("answer_accuracy", "AA"),
    ("context_relevance", "CR"),
)


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def _active(run: AnswerRun) -> list[tuple[str, str]]:
    """Columns with at least one value (skipped metrics are listed under the table)."""
    agg = run.overall
    return [(k, name) for k, name in _COLS if agg.get(f"{k}_n")]


def scores_table(run: AnswerRun) -> str:
    """Overall and per book: question count, every computed metric, evidence@k, errors."""
    cols = _active(run)
    head = ["set", "questions", *(name for _, name in cols), "evidence@k", "LLM errors"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def row(name: str, agg: dict[str, Any]) -> str:
        cells = [name, str(agg["questions"]), *(_f(agg[k]) for k, _ in cols)]
        cells += [_f(agg["evidence_hit"]), str(agg["errors"])]
        return "| " + " | ".join(cells) + " |"

    lines.append(row("**all**", run.overall))
    for book, agg in run.per_book().items():
        lines.append(row(Path(book).stem, agg))
    return "\n".join(lines)


_JUDGE_COUNTS = ("asked", "valid", "repaired", "errors")


def judge_summary(run: AnswerRun) -> list[str]:
    """Per judge prompt: valid ratings, replies that needed a repair, failed calls."""
    stats: dict[str, dict[str, int]] = {}
    for r in run.rows:
        for res in r.judge.values():
            for rating in res["ratings"]:
                s = stats.setdefault(rating["prompt"], dict.fromkeys(_JUDGE_COUNTS, 0))
                s["asked"] += 1
                s["valid"] += rating["rating"] is not None
                s["repaired"] += rating["rating"] is not None and len(rating["replies"]) > 1
                s["errors"] += rating["error"] is not None
    return [
        f"- `{name}`: {s['valid']}/{s['asked']} valid ratings, {s['repaired']} after a repair, "
        f"{s['errors']} failed calls"
        for name, s in stats.items()
    ]


def samples(run: AnswerRun, n: int = 8) -> str:
    lines = ["| id | question | reference | answer | F1 | AA |", "|---|---|---|---|---:|---:|"]

    def cell(text: str, limit: int = 160) -> str:
        text = " ".join(text.split()).replace("|", "/")
        return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"

    for r in run.rows[:n]:
        lines.append(
            f"| {r.id} | {cell(r.question)} | {cell(r.references[0])} | "
            f"{cell(r.prediction) or '(empty)'} | {_f(r.scores.get('f1'))} | "
            f"{_f(r.scores.get('answer_accuracy'))} |"
        )
    return "\n".join(lines)


def markdown(run: AnswerRun, command: str | None = None) -> str:
    cfg = run.config
    parts = [f"# Answer evaluation ({cfg['dataset']})", ""]
    if command:
        parts += ["```", command, "```", ""]
    parts += [
        f"{len(run.rows)} questions; dropped: {', '.join(run.dropped) or 'none'}.",
        f"Passages: {cfg['source']}; retrieval {cfg['retrieval']}.",
        f"Answers: {cfg['llm']} (answer cap {cfg['answer_tokens']} tokens, passages in "
        f"{cfg.get('passage_order', 'score')} order, "
        f"{_read(cfg.get('read_words', 0))}); "
        f"judge: {cfg['judge'] or 'none'}.",
        "Means over questions (a metric's missing values are left out); 'evidence@k': share of "
        "questions whose gold span is inside the retrieved passages (GutenQA only).",
        "",
        "## Scores",
        "",
        scores_table(run),
        "",
        "## What each metric is",
        "",
        *(f"- {name}: {run.metrics.get(key, '-')}" for key, name in _COLS),
        "",
    ]
    judged = judge_summary(run)
    if judged:
        parts += ["## Judge replies", "", *judged, ""]
    parts += ["## Samples", "", samples(run), ""]
    gen = run.answers_generated
    per = f", {run.generation_seconds / gen:.1f} s per generated answer" if gen else ""
    parts += [
        "## Timing",
        "",
        f"Wall {run.seconds:.0f} s, peak RSS {run.peak_rss_mb:.0f} MB; answers generated {gen}, "
        f"from cache {run.answers_cached}{per}; judge calls {run.judge_calls}, judge verdicts "
        f"from cache {run.judge_cached}.",
        "",
        "## Environment",
        "",
        ", ".join(f"{k} {v}" for k, v in run.environment.items()),
        "",
    ]
    return "\n".join(parts)


def write_reports(run: AnswerRun, out: Path, command: str | None = None) -> dict[str, Path]:
    """``answers-<dataset>.md`` and ``answers-<dataset>.json`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"answers-{run.config['dataset']}"
    paths = {"markdown": out / f"{stem}.md", "json": out / f"{stem}.json"}
    paths["markdown"].write_text(markdown(run, command), encoding="utf-8")
    data = run.to_json()
    data["command"] = command
    paths["json"].write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    return paths


def _read(read: int = 0) -> str:
    return f"read whole, best first, <= {read} words in all" if read else "read whole"
