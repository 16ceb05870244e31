"""Where one passage ranks for one question, under each ranking and mode of the library.

    python benchmarks/rank_of_passage.py --home HOME --book pg215 \
        --question "Who stole Buck from Judge Miller's place?" --needle "Manuel's treachery"

HOME is an ingested library (``litrag ingest``; with children for the children rows). Prints,
for paragraph-children and block ranking and for hybrid, BM25 and dense, the 1-based rank of the
first returned block whose text holds ``--needle`` (case-insensitive), or "-" past ``--depth``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from llama_index.core.schema import MetadataMode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--book", required=True)
    ap.add_argument("--question", required=True)
    ap.add_argument("--needle", required=True, help="text the wanted block holds")
    ap.add_argument("--depth", type=int, default=20, help="blocks looked at")
    args = ap.parse_args()

    from litrag.builders import build_library
    from litrag.retrieval.retriever import BookRetriever, RetrievalSettings
    from litrag.settings import Settings

    lib = build_library(Settings(home=args.home.expanduser().resolve()))
    needle = args.needle.lower()
    try:
        print("| ranking | mode | rank |\n|---|---|---:|")
        for through in ("children", "blocks"):
            for mode in ("hybrid", "sparse", "dense"):
                settings = RetrievalSettings(mode=mode, top_k=args.depth, rank_through=through)
                found = BookRetriever(
                    lib.store,
                    lib.embed_model,
                    args.book,
                    settings=settings,
                    children_store=lib.children_store,
                ).retrieve(args.question)
                texts = [n.node.get_content(metadata_mode=MetadataMode.NONE).lower() for n in found]
                rank = next((i for i, t in enumerate(texts, 1) if needle in t), None)
                print(f"| {through} | {mode} | {rank or '-'} |")
    finally:
        lib.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
