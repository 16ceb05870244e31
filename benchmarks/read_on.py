"""Would reading on help? The block after a well-ranked block, lent part of its score.

    python benchmarks/read_on.py --home HOME --book pg11 --book pg215 --book pg1661 \
        [--questions SET.jsonl ...] [--half-a pg11,pg84,pg215]

A question about an event is often worded with its setting ("Who stole Buck from Judge Miller's
place?" matches the block describing the place; Manuel leads Buck away in the next block). This
measures, on the default retrieval of an ingested library (as ``litrag ask``: children ranked,
collapsed to blocks, top 20), two ways of lending each of the first 5 blocks' score x W to the
block that follows it in the book:

- free: the lent block takes max(own, W x score) and the list is sorted again;
- bounded: the same order, but no block may fall below the rank of its best child (where
  small-to-big put it), so the property "a block ranks no worse than its paragraph" still holds.

A third way, bridging: a block not ranked (or ranked low) whose previous and next blocks are both
among the first K takes min (or the geometric mean) of their scores, and the list is sorted
again (a question's words may match the setup and the aftermath of an event told in other words).

It prints MRR@20 / hit@3 per question set and book half, and how many questions had a gold block
pushed below its best child's rank (the property broken). Gold: the block holds the question's
``chunk_must_contain`` span (the harness's match). Questions: the public GutenQA set and the
blind frozen set by default.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from question_sets import by_half

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
SETS = [DATA / "gutenqa" / "questions.jsonl", DATA / "questions" / "blind_frozen.jsonl"]
DEPTH = 5


def read_on(
    ranked: Sequence[tuple[str, float]], next_of: Callable[[str], str | None], weight: float
) -> list[str]:
    """Free reading on: the next block of each of the first DEPTH gets max(own, W x score)."""
    scores = dict(ranked)
    order = [k for k, _ in ranked]
    for key, score in ranked[:DEPTH]:
        nxt = next_of(key)
        if nxt is None:
            continue
        if nxt not in scores:
            order.append(nxt)
        scores[nxt] = max(scores.get(nxt, 0.0), weight * score)
    pos = {k: i for i, k in enumerate(order)}
    return sorted(order, key=lambda k: (-scores[k], pos[k]))


def bridge(
    ranked: Sequence[tuple[str, float]],
    next_of: Callable[[str], str | None],
    prev_of: Callable[[str], str | None],
    depth: int,
    how: str,
) -> list[str]:
    """Bridging: a block whose neighbours both rank in the first ``depth`` takes min (or the
    geometric mean, ``how="gm"``) of their scores, if that is more than its own."""
    scores = dict(ranked)
    order = [k for k, _ in ranked]
    top = order[:depth]
    for a in top:
        b = next_of(a)
        for c in top:
            if b is None or c == a or prev_of(c) != b:
                continue
            s = min(scores[a], scores[c]) if how == "min" else math.sqrt(scores[a] * scores[c])
            if b not in scores:
                order.append(b)
            scores[b] = max(scores.get(b, 0.0), s)
    pos = {k: i for i, k in enumerate(order)}
    return sorted(order, key=lambda k: (-scores[k], pos[k]))


def bounded(desired: list[str], originals: list[str], bound: dict[str, int]) -> list[str]:
    """``desired`` order, but each original block placed no later than its bound (earliest
    deadline first: the bounds rise along ``originals``, and the original order meets them)."""
    out: list[str] = []
    placed: set[str] = set()
    rest = iter(desired)
    while len(out) < len(desired):
        t = len(out) + 1
        pick = next((o for o in originals if o not in placed and bound[o] <= t), None)
        while pick is None:
            cand = next(rest)
            pick = None if cand in placed else cand
        out.append(pick)
        placed.add(pick)
    return out


def collect(home: Path, books: list[str], sets: list[Path]) -> list[dict]:
    from llama_index.core.schema import NodeRelationship

    from litrag.answering.answer_types import passage
    from litrag.builders import build_query_engine
    from litrag.chunkers.children import PARENT_KEY
    from litrag.eval.spans import contains_span
    from litrag.retrieval.retriever import RetrievalSettings
    from litrag.settings import Settings

    s = Settings(home=home)
    rows = []
    for book in books:
        r = build_query_engine(s, book).retriever
        r.settings = RetrievalSettings.from_settings(s).model_copy(
            update={"top_k": 20, "candidates": 20}
        )
        texts: dict[str, str] = {}
        nexts: dict[str, str | None] = {}
        prevs: dict[str, str | None] = {}
        try:
            for path in sets:
                for line in path.read_text().splitlines():
                    q = json.loads(line) if line.strip() else {}
                    name = Path(q.get("book_file", "")).name
                    if not name.startswith(f"{book}_") or not q.get("chunk_must_contain"):
                        continue
                    nodes = r.retrieve(q["question"])
                    bound: dict[str, int] = {}
                    for i, c in enumerate(r.rank_children(q["question"])):
                        bound.setdefault(str(c.node.metadata.get(PARENT_KEY) or ""), i + 1)
                    for n in nodes:
                        texts[n.node_id] = passage(n)
                        rel = n.node.relationships.get(NodeRelationship.NEXT)
                        nexts[n.node_id] = rel.node_id if rel else None
                        rel = n.node.relationships.get(NodeRelationship.PREVIOUS)
                        prevs[n.node_id] = rel.node_id if rel else None
                    near = [*nexts.values(), *prevs.values()]
                    want = list(dict.fromkeys(x for x in near if x and x not in texts))
                    for n in r.vector_store.get_nodes(node_ids=want):
                        texts[n.node_id] = n.get_content()
                    span = q["chunk_must_contain"]
                    ids = [n.node_id for n in nodes]
                    pool = set(ids) | {x for i in ids if (x := nexts.get(i)) and x in texts}
                    pool |= {x for i in ids if (x := prevs.get(i)) and x in texts}
                    rows.append(
                        {
                            "set": path.stem,
                            "book": book,
                            "ranked": [(n.node_id, n.score or 0.0) for n in nodes],
                            "next": {i: nexts[i] for i in ids if nexts.get(i)},
                            "prev": {i: prevs[i] for i in ids if prevs.get(i)},
                            "bound": {i: bound[i] for i in ids},
                            "gold": [
                                i for i in pool if i in texts and contains_span(texts[i], span)
                            ],
                        }
                    )
        finally:
            r.vector_store.close()
            if getattr(r, "children_store", None) is not None:
                r.children_store.close()
    return rows


def rr(order: list[str], gold: set[str]) -> float:
    return next((1 / (k + 1) for k, i in enumerate(order[:20]) if i in gold), 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="an ingested LITRAG_HOME")
    ap.add_argument("--book", action="append", required=True, help="book id; repeat")
    ap.add_argument("--questions", type=Path, action="append", help="default: public + blind")
    ap.add_argument("--half-a", default="pg11,pg84,pg215", help="half A's book ids")
    ap.add_argument("--weights", default="0.5,0.6,0.7,0.8,0.9")
    args = ap.parse_args()
    rows = collect(args.home.expanduser().resolve(), args.book, args.questions or SETS)
    half_a = set(args.half_a.split(","))
    groups = by_half(rows, half_a)
    names = sorted(groups)
    variants: dict[str, Callable[[dict], list[str]]] = {
        "default": lambda r: [k for k, _ in r["ranked"]]
    }
    for w in (float(x) for x in args.weights.split(",")):
        variants[f"free W={w:g}"] = lambda r, w=w: read_on(r["ranked"], r["next"].get, w)
        variants[f"bounded W={w:g}"] = lambda r, w=w: bounded(
            read_on(r["ranked"], r["next"].get, w), [k for k, _ in r["ranked"]], r["bound"]
        )
    for depth in (5, 10, 20):
        for how in ("min", "gm"):
            variants[f"bridge K={depth} {how}"] = lambda r, d=depth, h=how: bridge(
                r["ranked"], r["next"].get, r["prev"].get, d, h
            )
    print("| variant | " + " | ".join(f"{g} ({len(groups[g])})" for g in names) + " | broken |")
    print("|---|" + "---:|" * (len(names) + 1))
    for name, f in variants.items():
        orders = {id(r): f(r) for r in rows}
        cells = []
        for g in names:
            rs = groups[g]
            mrr = statistics.mean(rr(orders[id(r)], set(r["gold"])) for r in rs)
            hit = statistics.mean(any(i in r["gold"] for i in orders[id(r)][:3]) for r in rs)
            cells.append(f"{mrr:.3f} / {hit:.2f}")
        broken = sum(
            any(g in r["bound"] and orders[id(r)].index(g) + 1 > r["bound"][g] for g in r["gold"])
            for r in rows
        )
        print(f"| {name} | " + " | ".join(cells) + f" | {broken} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
