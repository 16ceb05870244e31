"""Ask a list of questions through the real `litrag ask` CLI and print answers, sources and times.

Each question is one `litrag ask --json` process, exactly as a reader runs it (the local LLM is
started and stopped every time, so wall time includes that). The library is whatever
``LITRAG_HOME`` holds; ``--ingest FILE`` adds a book first (the bundled Call of the Wild, say).

    python benchmarks/ask_questions.py --home /tmp/cotw \
        --ingest litrag/data/pg215_call_of_the_wild.txt --book pg215 \
        --questions data/questions/call_of_the_wild.txt --out /tmp/cotw/answers.md

Grading is left to a reader: the report lists each answer next to its sources.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def ask(question: str, book: str, env: dict[str, str], extra: list[str]) -> tuple[dict, float]:
    cmd = ["litrag", "ask", question, "--book", book, "--json", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    secs = time.perf_counter() - start
    try:
        return json.loads(proc.stdout), secs
    except json.JSONDecodeError:
        return {"text": "", "sources": [], "error": proc.stderr.strip()[-500:]}, secs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="LITRAG_HOME of the library")
    ap.add_argument("--ingest", type=Path, action="append", default=[], help="book(s) to add")
    ap.add_argument("--book", required=True, help="book id to ask about")
    ap.add_argument("--questions", type=Path, required=True, help="one question per line")
    ap.add_argument("--out", type=Path, help="also write the Markdown report here")
    ap.add_argument("ask_args", nargs="*", help="passed to `litrag ask` (after --)")
    args = ap.parse_args()

    env = {**os.environ, "LITRAG_HOME": str(args.home)}
    if args.ingest:
        subprocess.run(["litrag", "ingest", *map(str, args.ingest)], env=env, check=True)
    questions = [q.strip() for q in args.questions.read_text().splitlines() if q.strip()]
    lines = [f"# `litrag ask` on {args.book} ({len(questions)} questions)", ""]
    for i, q in enumerate(questions, 1):
        got, secs = ask(q, args.book, env, args.ask_args)
        lines.append(f"{i}. **{q}** → {got.get('text', '').strip() or '(no answer)'}")
        if got.get("error"):
            lines.append(f"   error: {got['error']}")
        lines.append(
            f"   ({secs:.0f} s; {got.get('answered_by', '?')}; {got.get('retrieval', '')})"
        )
        for s in got.get("sources", []):
            lines.append(
                f"   [{s['rank']}] ch. {s['chapter_index']} s{s['sentence_from']}-"
                f'{s["sentence_to"]} "{s["subtitle"]}"'
            )
        print("\n".join(lines[-(2 + len(got.get("sources", [])) + bool(got.get("error"))) :]))
        sys.stdout.flush()
    if args.out:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
