"""Is the answer in what the answering LLM reads? Prompt recall of each way of reading.

    python benchmarks/prompt_recall.py --home HOME --book pg11 --book pg215 --book pg1661 \
        [--half-a pg11,pg84,pg215] [--out ROWS.jsonl]

``litrag ask`` retrieves 5 blocks; what the LLM then reads of them decides whether it can
answer. On the default retrieval of an ingested library, for each question this checks whether
the gold is in the 5 blocks whole (the ceiling, ~1,350 words) and in what each way of reading
keeps, through the engine's own functions (``fit_to_context``, ``within_words``):

- whole blocks, best first, while their chunks (heading and context sentences included)
  hold N words in all, the first always: 450, 550, 650 (the local model's default), 700,
  800. (Excerpts, the next block's paragraph, reading on and the winning paragraphs lost and
  were deleted: docs/lab/.)

Gold, per question set: GutenQA-style sets (the public set, the blind frozen set): a sentence of
the question's ``chunk_must_contain`` span (4 words or more) stands whole in a passage ("any") /
every such sentence does ("all"); keyed sets (the reader benchmark, Call of the Wild's keyed
checks): every key fact (one of its variants, or the key's pattern) is in what is read. Printed
per set and book half, with the words read (mean per question).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from question_sets import DATA, QUESTIONS, by_half

SPAN_SETS = [DATA / "gutenqa" / "questions.jsonl", QUESTIONS / "blind_frozen.jsonl"]
KEYED_SETS = [QUESTIONS / "reader_questions.jsonl", QUESTIONS / "call_of_the_wild_keyed.jsonl"]


def _questions(path: Path, book: str) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        q = json.loads(line) if line.strip() else {}
        name = Path(q.get("book_file", "")).name
        if q and (q.get("book") == book or name.startswith(f"{book}_")):
            out.append(q)
    return out


def _gold_test(q: dict):
    """A function of the texts a model reads -> (any, all) gold found."""
    from litrag.eval.spans import normalize
    from litrag.segment.sentences import split_sentences

    if q.get("chunk_must_contain"):
        sents = [normalize(s.flat) for s in split_sentences(q["chunk_must_contain"])]
        sents = [s for s in sents if len(s.split()) >= 4] or [normalize(q["chunk_must_contain"])]

        def span_test(texts: list[str]) -> tuple[bool, bool]:
            norm = [normalize(t.replace("[...]", " ")) for t in texts]
            found = [any(s in t for t in norm) for s in sents]
            return any(found), all(found)

        return span_test
    if q.get("key_facts"):
        facts = [[v.lower() for v in fact] for fact in q["key_facts"]]

        def fact_test(texts: list[str]) -> tuple[bool, bool]:
            low = " ".join(texts).lower()
            found = [any(v in low for v in fact) for fact in facts]
            return any(found), all(found)

        return fact_test
    if q.get("key"):
        pattern = re.compile(q["key"], re.IGNORECASE)

        def key_test(texts: list[str]) -> tuple[bool, bool]:
            hit = bool(pattern.search(" ".join(texts)))
            return hit, hit

        return key_test
    return None


# name: words read in all, the best blocks whole (0: every block)
VARIANTS = {
    "whole, 450 words": 450,
    "whole, 550 words": 550,
    "whole, 650 words (default)": 650,
    "whole, 700 words": 700,
    "whole, 800 words": 800,
}


def collect(home: Path, books: list[str], sets: list[Path]) -> list[dict]:
    from litrag.answering.answer import fit_to_context, within_words
    from litrag.answering.answer_types import passage
    from litrag.builders import build_query_engine
    from litrag.settings import Settings

    s = Settings(home=home)
    rows: list[dict] = []
    for book in books:
        engine = build_query_engine(s, book)
        r = engine.retriever
        budget = 10**6  # the local model's 4k context holds all 5 blocks: only words cut
        try:
            for path in sets:
                for q in _questions(path, book):
                    test = _gold_test(q)
                    if test is None:
                        continue
                    question = q["question"]
                    nodes = r.retrieve(question)[: r.settings.top_k]
                    texts = [passage(n) for n in nodes]
                    variants = {"blocks": texts}
                    for name, read in VARIANTS.items():
                        fitted = within_words(fit_to_context(nodes, budget), read)
                        variants[name] = [chunk for _, chunk in fitted]
                    row = {"set": path.stem, "book": book, "id": q.get("id", question)}
                    for name, read in variants.items():
                        row[name] = test(read)
                        row[f"{name} words"] = sum(len(t.split()) for t in read)
                    rows.append(row)
        finally:
            r.vector_store.close()
            if getattr(r, "children_store", None) is not None:
                r.children_store.close()
    return rows


def _share(rows: list[dict], variant: str, k: int) -> float:
    """The share of ``rows`` where ``variant`` read the gold (k 0: any of it, 1: all)."""
    return statistics.mean(r[variant][k] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="an ingested LITRAG_HOME")
    ap.add_argument("--book", action="append", required=True, help="book id; repeat")
    ap.add_argument("--questions", type=Path, action="append", help="default: public, blind, keyed")
    ap.add_argument("--half-a", default="pg11,pg84,pg215", help="half A's book ids")
    ap.add_argument("--out", type=Path, help="write the per-question rows here (JSONL)")
    args = ap.parse_args()
    sets = args.questions or SPAN_SETS + KEYED_SETS
    rows = collect(args.home.expanduser().resolve(), args.book, sets)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    half_a = set(args.half_a.split(","))
    groups = by_half(rows, half_a)
    variants = ("blocks", *VARIANTS)
    print("| set | n | " + " | ".join(f"{v} any / all" for v in variants) + " | words read |")
    print("|---|---:|" + "---:|" * (len(variants) + 1))
    for g in sorted(groups):
        rs = groups[g]
        cells = [f"{_share(rs, v, 0):.3f} / {_share(rs, v, 1):.3f}" for v in variants]
        words = " / ".join(f"{statistics.mean(r[f'{v} words'] for r in rs):.0f}" for v in variants)
        # mean words per block read x blocks read = words the model reads
        print(f"| {g} | {len(rs)} | " + " | ".join(cells) + f" | {words} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
