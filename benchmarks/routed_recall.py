"""Is the gold span in what the local model reads, for the questions the router steers to a
character (who is X, X and Y together)? Whole steered blocks against the sentences naming them.

    python benchmarks/routed_recall.py --home LITRAG_HOME [--book pg11 --book pg215 ...]

Each question of the span sets (the public GutenQA set and the blind frozen set) whose book is
in the library and which ``litrag ask`` would route to a narrative tool is asked of the routed
engine with a scripted LLM (only the prompt is read: no answer is scored), within the packaged
model's 650-word budget, twice: with ``litrag.narrative.excerpts.naming_excerpt`` (today) and
with it returning None for every block (the blocks whole, as before). A hit: the question's
``chunk_must_contain`` in the prompt (letters and digits only, spaces folded). Printed by set
and book half.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from question_sets import DATA, QUESTIONS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
SETS = [DATA / "gutenqa" / "questions.jsonl", QUESTIONS / "blind_frozen.jsonl"]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def main() -> int:
    from scripted_llm import ScriptedLLM

    import litrag.narrative.engine as routed
    from litrag.builders import (
        build_children_store,
        build_embed_model,
        build_routed_engine,
        build_store,
    )
    from litrag.settings import Settings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="an ingested LITRAG_HOME")
    ap.add_argument("--book", action="append", default=[], help="book ids (default: three)")
    ap.add_argument("--half-a", default="pg11,pg84,pg215", help="books of half A")
    args = ap.parse_args()
    books = args.book or ["pg11", "pg215", "pg1661"]
    half_a = set(args.half_a.split(","))
    s = Settings(home=args.home.expanduser().resolve())
    embed, store = build_embed_model(s), build_store(s)
    children = build_children_store(s) if s.children else None
    cut = routed.naming_excerpt
    hits: dict[tuple[str, str, str], list[int]] = {}
    for book in books:
        engine = build_routed_engine(
            s,
            book,
            use_agent=False,
            llm=ScriptedLLM([]),
            store=store,
            children_store=children,
            embed_model=embed,
        )
        engine.streaming = False
        engine.book.read_words = 650
        for path in SETS:
            for line in path.read_text(encoding="utf-8").splitlines():
                q = json.loads(line)
                if Path(q["book_file"]).name.split("_")[0] != book:
                    continue
                if engine.route(q["question"]).tool == "search_passages":
                    continue
                half = "A" if book in half_a else "B"
                for arm, excerpt in (("sentences naming them", cut), ("whole blocks", None)):
                    routed.naming_excerpt = excerpt or (lambda *a, **k: None)
                    engine.llm = llm = ScriptedLLM(["An answer."])
                    engine.ask(q["question"]).answer()
                    read = _norm(llm.requests[0][1].content) if llm.requests else ""
                    row = hits.setdefault((path.stem, half, arm), [0, 0])
                    row[0] += _norm(q["chunk_must_contain"]) in read
                    row[1] += 1
        routed.naming_excerpt = cut
    print("| set | half | reading | gold in what is read |")
    print("|---|---|---|---:|")
    for (name, half, arm), (n_hit, n) in sorted(hits.items()):
        print(f"| {name} | {half} | {arm} | {n_hit}/{n} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
