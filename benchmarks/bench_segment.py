"""Segmentation benchmarks: print the figures the node-parser issue asks for.

python benchmarks/bench_segment.py offline [--books DIR]
    each book in its own process: load + chapters + offline segmentation; seconds, words/s,
    blocks, block sizes and peak memory (max RSS of that process)
python benchmarks/bench_segment.py llm [--model smollm2|qwen2.5-coder-1.5b] [--workers N]
    LitSeg-Lite through the packaged llama.cpp server on one chapter: calls, retries,
    tokens, seconds, and the most LLM calls seen in flight at once
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_BOOKS = Path(__file__).resolve().parents[1] / "data" / "books"


def one_book(path: str) -> dict:
    t0 = time.perf_counter()
    from litrag import LitSegNodeParser
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book

    t_import = time.perf_counter() - t0
    t1 = time.perf_counter()
    docs = split_chapters(load_book(path))
    t_load = time.perf_counter() - t1
    parser = LitSegNodeParser()
    t2 = time.perf_counter()
    nodes = parser.get_nodes_from_documents(docs)
    t_seg = time.perf_counter() - t2
    words = sum(len(d.text.split()) for d in docs)
    s = parser.summary.as_dict()
    return {
        "book": Path(path).name,
        "words": words,
        "chapters": len(docs),
        "blocks": len(nodes),
        "mean_words": s["mean_words"],
        "median_words": s["median_words"],
        "import_s": round(t_import, 2),
        "load_s": round(t_load, 2),
        "segment_s": round(t_seg, 2),
        "words_per_s": round(words / t_seg),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def bench_offline(books: Path) -> None:
    rows = []
    for path in sorted(books.glob("*.txt")):
        if "LICENSE" in path.name:
            continue
        out = subprocess.run(
            [sys.executable, __file__, "_one", str(path)], capture_output=True, text=True
        )
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            raise SystemExit(out.returncode)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    total_w = sum(r["words"] for r in rows)
    total_s = sum(r["load_s"] + r["segment_s"] for r in rows)
    print(
        f"\nall six: {total_w} words in {total_s:.1f} s (load + segment) = {total_w / total_s:.0f}"
        " words/s; each book in a fresh process (imports excluded)"
    )


def bench_llm(
    model: str, workers: int, chapters: int, max_unit_words: int, max_output_tokens: int
) -> None:
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMChatStartEvent

    from litrag import LitSegNodeParser
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book
    from litrag.models.llama_server import LlamaServer, local_model_path

    class InFlight(BaseEventHandler):
        now: int = 0
        peak: int = 0

        @classmethod
        def class_name(cls) -> str:
            return "InFlight"

        def handle(self, event, **kwargs) -> None:
            if isinstance(event, LLMChatStartEvent):
                self.now += 1
                self.peak = max(self.peak, self.now)
            elif isinstance(event, LLMChatEndEvent):
                self.now -= 1

    counter = InFlight()
    get_dispatcher().add_event_handler(counter)
    book = DEFAULT_BOOKS / "pg215_call_of_the_wild.txt"
    docs = split_chapters(load_book(book))[:chapters]
    with LlamaServer(local_model_path(model), n_ctx=8192) as server:
        llm = server.llm(timeout=600)
        parser = LitSegNodeParser(
            llm=llm,
            num_workers=workers,
            max_retries=2,
            max_unit_words=max_unit_words,
            max_output_tokens=max_output_tokens,
        )
        t0 = time.perf_counter()
        parser.get_nodes_from_documents(docs)
        elapsed = time.perf_counter() - t0
    s = parser.summary.as_dict()
    print(
        json.dumps(
            {
                "model": model,
                "chapters": [d.metadata["chapter_title"] for d in docs],
                "units_sent": s["parts"],
                "num_workers": workers,
                "peak_calls_in_flight": counter.peak,
                "llm_calls": s["llm_calls"],
                "retries": s["retries"],
                "valid": s["valid"],
                "repaired": s["repaired"],
                "fallback": s["fallback"],
                "prompt_tokens": s["prompt_tokens"],
                "completion_tokens": s["completion_tokens"],
                "blocks": s["blocks"],
                "seconds": round(elapsed, 1),
            },
            indent=2,
        )
    )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_one":
        print(json.dumps(one_book(sys.argv[2])))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    off = sub.add_parser("offline")
    off.add_argument("--books", type=Path, default=DEFAULT_BOOKS)
    llm = sub.add_parser("llm")
    llm.add_argument(
        "--model", default="smollm2", choices=["smollm2", "qwen2.5-coder-1.5b", "qwen2.5-1.5b"]
    )
    llm.add_argument("--workers", type=int, default=4)
    llm.add_argument("--chapters", type=int, default=1)
    llm.add_argument("--max-unit-words", type=int, default=1500)
    llm.add_argument("--max-output-tokens", type=int, default=1500)
    args = p.parse_args()
    if args.what == "offline":
        bench_offline(args.books)
    else:
        bench_llm(
            args.model, args.workers, args.chapters, args.max_unit_words, args.max_output_tokens
        )


if __name__ == "__main__":
    main()
