"""Retrieval quality of the two store backends on the six-book question set, same nodes.

    python benchmarks/eval_backends.py --home DIR    # a LITRAG_HOME with the six books ingested

The embedded Edge library at ``--home`` is exported (``litrag export``'s code) into a
qdrant-client local-mode collection, so both backends hold exactly the same points (text,
dense vector, payload); BM25 goes through the same encoder. Every question is then asked
through the product retriever (``BookRetriever``, its book filter) on each backend in dense,
BM25 and the default hybrid mode, and scored with the harness's metrics: MRR and Hit@k of the
first block containing the gold span.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

from llama_index.core.schema import QueryBundle

from litrag.builders import build_embed_model
from litrag.eval.metrics import first_relevant_rank, hit_at, reciprocal_rank
from litrag.eval.questions import load_questions
from litrag.eval.spans import contains_span
from litrag.ingestion.library import Library
from litrag.retrieval.retriever import BookRetriever, RetrievalSettings
from litrag.settings import Settings
from litrag.stores.factory import make_vector_store

DATA = Path(__file__).resolve().parents[1] / "data"
TOP_K = 20


def book_ids_by_file(home: Path) -> dict[str, str]:
    return {Path(r.source).stem.removesuffix("_0"): r.book_id for r in Library.read_registry(home)}


def score(store, embed, questions, ids: dict[str, str], mode: str) -> dict[str, float]:
    settings = RetrievalSettings.from_preset("embedded", mode=mode, top_k=TOP_K)
    settings.dense_top_k = settings.sparse_top_k = TOP_K
    rr, h1, h5, lat = [], [], [], []
    for q in questions:
        book = ids[Path(q.book_file).stem]
        retriever = BookRetriever(store, embed, book, settings=settings)
        t0 = time.perf_counter()
        nodes = retriever.retrieve(QueryBundle(q.question))
        lat.append(time.perf_counter() - t0)
        rank = first_relevant_rank(
            [any(contains_span(n.node.get_content(), s) for s in q.spans) for n in nodes]
        )
        rr.append(reciprocal_rank(rank))
        h1.append(hit_at(rank, 1))
        h5.append(hit_at(rank, 5))
    lat.sort()
    n = len(questions)
    return {
        "MRR": sum(rr) / n,
        "Hit@1": sum(h1) / n,
        "Hit@5": sum(h5) / n,
        "p50 ms": 1000 * lat[n // 2],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--home", type=Path, required=True, help="LITRAG_HOME with the six books")
    p.add_argument("--questions", type=Path, default=DATA / "gutenqa" / "questions.jsonl")
    args = p.parse_args()
    s = Settings(home=args.home)
    questions = load_questions(args.questions)
    ids = book_ids_by_file(args.home)
    questions = [q for q in questions if Path(q.book_file).stem in ids]
    embed = build_embed_model(s)

    from qdrant_client import QdrantClient

    from litrag.stores.export import export_library

    target = Path(tempfile.mkdtemp(prefix="litrag-qdrant-local-"))
    edge = make_vector_store(args.home, s.collection, url="")
    client = QdrantClient(path=str(target))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect")
        report = export_library(edge, client, s.collection, progress_file=target / "p.json")
    client.close()
    print(
        f"{len(questions)} questions; exported {report.exported} points (verified: "
        f"{report.verified})"
    )
    local = make_vector_store(args.home, s.collection, url=f"path:{target}")

    print("| backend | mode | MRR | Hit@1 | Hit@5 | query p50 ms |\n|---|---|---|---|---|---|")
    for name, store in (("Edge", edge), ("qdrant-client local", local)):
        for mode in ("dense", "sparse", "hybrid"):
            r = score(store, embed, questions, ids, mode)
            label = {"sparse": "bm25", "hybrid": "hybrid (embedded preset)"}.get(mode, mode)
            print(
                f"| {name} | {label} | {r['MRR']:.3f} | {r['Hit@1']:.3f} | {r['Hit@5']:.3f} | "
                f"{r['p50 ms']:.1f} |",
                flush=True,
            )
    edge.close()


if __name__ == "__main__":
    main()
