"""The product's default on a frozen question set: retrieval, prompt recall, answers, times.

    python benchmarks/default_on_set.py --home runs/more-home --out runs/more \
        [--questions data/questions/more_frozen.jsonl] [--stages ingest,retrieval,answers]

Stages (``litrag.eval.default_run``), each resumable from ``OUT/rows.jsonl``:

- ``ingest``: the set's books into ``--home`` with the default settings (as ``litrag ingest``);
- ``retrieval``: every question, no LLM: the gold block's rank in the default retrieval's 20
  best (MRR@20, hit@5) and prompt recall, the gold span whole in what the model reads, for the
  default reading (the best blocks whole within 650 words) and the five blocks whole;
- ``answers``: the local LLM through the routed engine ``litrag ask`` uses, on a stratified
  subset fixed before any answer was seen: per book the first 6 blind and the first 4 reader
  questions in file order (``--answer-blind``, ``--answer-reader``; 40 questions on
  ``more_frozen.jsonl``): right, declined, confident wrong, gold read, seconds to the first word
  and per answer; asked in rounds over the books, alternating kinds (``balanced``), so a run
  stopped early is still spread over every book and both kinds;
- ``patient``: the same subset with the five blocks read whole (``LITRAG_READ_WORDS=0``);
- ``report``: only rewrite the reports from the rows.

``OUT/report.md`` and ``OUT/report.json`` are rewritten from the rows after every stage.
Times are those of the machine it runs on (2 shared cores: upper bounds when others work).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from litrag.eval.default_run import (  # noqa: E402
    RowLog,
    answer_rows,
    ingest_books,
    load_set,
    markdown,
    retrieval_rows,
    stratified,
    summarise,
)
from litrag.settings import data_dir  # noqa: E402

READ_VARIANTS = {"650 words (default)": 650, "five blocks whole": 0}
STAGES = ("ingest", "retrieval", "answers", "patient", "report")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=Path, default=data_dir() / "questions/more_frozen.jsonl")
    ap.add_argument("--home", type=Path, required=True, help="the library home (made if absent)")
    ap.add_argument("--out", type=Path, required=True, help="rows.jsonl, report.md, report.json")
    ap.add_argument("--stages", default="ingest,retrieval,answers", help=",".join(STAGES))
    ap.add_argument("--answer-blind", type=int, default=6, help="blind questions per book")
    ap.add_argument("--answer-reader", type=int, default=4, help="reader questions per book")
    args = ap.parse_args()
    stages = [s for s in args.stages.split(",") if s]
    if bad := [s for s in stages if s not in STAGES]:
        print(f"error: unknown stage {bad[0]!r}; stages are {', '.join(STAGES)}", file=sys.stderr)
        return 2
    command = "python benchmarks/default_on_set.py " + " ".join(map(shlex.quote, sys.argv[1:]))
    say = lambda m: print(m, flush=True)  # noqa: E731
    questions = load_set(args.questions)
    subset = stratified(questions, args.answer_blind, args.answer_reader)
    home = args.home.expanduser().resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    log = RowLog(args.out / "rows.jsonl")
    books = sorted({args.questions.resolve().parent.parent / q.book_file for q in questions})
    for stage in stages:
        say(f"== {stage}")
        if stage == "ingest":
            ingest_books(home, books, say)
        elif stage == "retrieval":
            retrieval_rows(home, questions, log, READ_VARIANTS, say=say)
        elif stage == "answers":
            answer_rows(home, subset, log, "default", None, say)
        elif stage == "patient":
            answer_rows(home, subset, log, "five blocks whole", 0, say)
        write_report(log, args.out, command, [q.id for q in subset])
    return 0


def write_report(log: RowLog, out: Path, command: str, subset: list[str]) -> None:
    summary = summarise(log.rows, list(READ_VARIANTS))
    commands = []  # every command that added rows, in order (a report-only rerun adds none)
    if (out / "report.json").exists():
        before = json.loads((out / "report.json").read_text())
        commands = before.get("commands") or [c for c in [before.get("command")] if c]
        commands = [c for c in commands if "--stages report" not in c]
    if "--stages report" not in command and command not in commands:
        commands.append(command)
    summary["commands"] = commands
    summary["answer_subset"] = subset
    summary["rows"] = log.rows
    (out / "report.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(summary, list(READ_VARIANTS), "; ".join(commands)))


if __name__ == "__main__":
    raise SystemExit(main())
