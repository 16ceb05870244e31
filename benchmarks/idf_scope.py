"""How much collection-wide BM25 IDF changes the ranking, against per-book IDF, on the six books.

python benchmarks/idf_scope.py [--data DIR] [--out FILE.json]

The six GutenQA books are segmented (LitSeg offline, the default segmenter), loaded into one
embedded store (WordLlama dense vectors, litrag's BM25 with the sentence-window terms), and each
public question is asked within its own book (``book_id`` filter) twice: with IDF over the
points the filter selects (the embedded store's ``sparse_idf_scope="filter"``, per-book BM25) and
with IDF over the whole collection (what a Qdrant server computes with ``Modifier.IDF``). For
BM25 alone and for hybrid (alpha 0.3, BM25 windows 0.3: the retrieval defaults) it reports how
many questions keep the same top 5 (same blocks in the same order, and as a set), the mean
overlap, and Hit@5 (a top-5 block holds the gold span) under each scope.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from litrag.eval.spans import normalize
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.scoring.bm25 import BM25Encoder
from litrag.segment import LitSegNodeParser
from litrag.segment.offline import StaticVectors
from litrag.stores.edge_store import QdrantEdgeVectorStore

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data"
TOP = 5


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = [json.loads(x) for x in (args.data / "gutenqa" / "questions.jsonl").open()]
    rows = [q for q in rows if q.get("chunk_must_contain")]
    parser, sv, enc = LitSegNodeParser(), StaticVectors(), BM25Encoder()
    nodes = []
    for book_file in sorted({q["book_file"] for q in rows}):
        book = load_book(args.data / book_file)
        got = parser.get_nodes_from_documents(split_chapters(book))
        for n in got:
            n.metadata["book_id"] = book.book_id
        nodes += got
        print(f"  {book_file}: {len(got)} blocks", file=sys.stderr)
    texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
    for n, v in zip(nodes, sv.encode(texts), strict=True):
        n.embedding = v.tolist()
    book_of = {q["book_file"]: load_book(args.data / q["book_file"]).book_id for q in rows}
    norm = {n.node_id: normalize(t) for n, t in zip(nodes, texts, strict=True)}
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = QdrantEdgeVectorStore(
            tmp, "six", sparse_doc_fn=enc.doc_fn, sparse_query_fn=enc.query_fn
        )
        store.add(nodes)
        store.optimize()
        for mode in (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.HYBRID):
            tops: dict[str, list[list[str]]] = {"filter": [], "collection": []}
            for scope in tops:
                store.sparse_idf_scope = scope  # type: ignore[assignment]
                for q in rows:
                    flt = MetadataFilters(
                        filters=[
                            MetadataFilter(
                                key="book_id",
                                value=book_of[q["book_file"]],
                                operator=FilterOperator.EQ,
                            )
                        ]
                    )
                    query = VectorStoreQuery(
                        query_str=q["question"],
                        query_embedding=sv.encode([q["question"]])[0].tolist(),
                        similarity_top_k=10,
                        sparse_top_k=10,
                        hybrid_top_k=TOP,
                        alpha=0.3,
                        mode=mode,
                        filters=flt,
                    )
                    res = store.query(query, sparse_window_weight=0.3)
                    tops[scope].append(res.ids[:TOP])
            spans = [normalize(q["chunk_must_contain"]) for q in rows]

            def hit(lists: list[list[str]], spans: list[str] = spans) -> float:
                return statistics.fmean(
                    any(s in norm[i] for i in ids) for ids, s in zip(lists, spans, strict=True)
                )

            pairs = list(zip(tops["filter"], tops["collection"], strict=True))
            out[mode.value] = {
                "questions": len(rows),
                "same top 5 (order)": sum(a == b for a, b in pairs),
                "same top 5 (set)": sum(set(a) == set(b) for a, b in pairs),
                "mean overlap of top 5": statistics.fmean(len(set(a) & set(b)) for a, b in pairs),
                "same first block": sum(a[:1] == b[:1] for a, b in pairs),
                "Hit@5 per-book IDF": hit(tops["filter"]),
                "Hit@5 collection IDF": hit(tops["collection"]),
            }
        store.close()
    out["_run"] = {"blocks": len(nodes), "seconds": round(time.perf_counter() - t0)}
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
