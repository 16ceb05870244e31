"""Chat benchmark: retrieval + fusion latency, LLM time to first token and tokens/s, UI memory.

python benchmarks/bench_chat.py --home LITRAG_HOME [--queries 200] [--llm-questions 5]
                                [--local-llm qwen2.5-coder-1.5b] [--ui-questions 3] [--skip ui,llm]

Three phases on an ingested library (``litrag ingest`` into ``--home`` first; e.g. the six books):

1. retrieval: the default preset (hybrid dense + BM25, relative-score fusion, no reranker) for
   ``--queries`` questions spread over the books, in process; p50/p95 of the whole retrieve
   (query embedding + store query + fusion) and of its parts.
2. llm: the packaged local model on llama.cpp (``--local-llm``, or ``LITRAG_LLM_URL``) answering
   ``--llm-questions`` questions with the retrieved blocks as ``litrag ask`` gives them (for the
   local model, the best blocks whole within its word budget): time to first token and decode
   tokens/s (one streamed delta = one token, as llama.cpp's server sends them).
3. ui: ``litrag chat`` in its own process with the local LLM, asked ``--ui-questions`` questions
   through gradio_client; peak RSS of the UI process and of it plus its llama.cpp server
   (target: under 3 GB), sampled every 0.1 s.

Prints one JSON line per phase and a summary table. The figures depend on what else runs: bench on
a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Call of the Wild (issue 4's acceptance set) and questions any novel can take.
WILD_QUESTIONS = [
    "What kind of dog is Buck's father?",
    "Who stole Buck from Judge Miller's place?",
    "What does the man in the red sweater beat Buck with?",
    "Which dog leads the team before Buck?",
    "What did Buck do to Spitz in the end?",
    "Who is Buck's last master?",
    "How much money did Thornton win on the wager?",
    "Where did Thornton's party find the gold?",
    "Who killed Thornton?",
    "What does Buck become at the end of the story?",
]
ANY_BOOK = [
    "Who is the main character?",
    "Where does the story begin?",
    "Who dies in the story?",
    "What happens at the end?",
    "Who falls in love?",
    "What does the hero fear most?",
    "Who tells the story?",
    "What letter arrives, and who wrote it?",
    "Where do they travel?",
    "Who is the villain?",
]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def stats_ms(xs: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in xs]
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(pct(ms, 0.95), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def questions_for(book_ids: list[str], n: int) -> list[tuple[str, str]]:
    """``n`` (book, question) pairs, cycling over the books and each book's questions."""
    out = []
    for i in range(n):
        book = book_ids[i % len(book_ids)]
        pool = WILD_QUESTIONS if book == "pg215" else ANY_BOOK
        out.append((book, pool[(i // len(book_ids)) % len(pool)]))
    return out


def loaded(home: Path) -> list[str]:
    from litrag.ingestion.library import Library

    ids = [r.book_id for r in Library.read_registry(home) if r.status == "complete"]
    if not ids:
        sys.exit(f"no books in {home}: litrag ingest BOOKS first (LITRAG_HOME={home})")
    return ids


# --------------------------------------------------------------------------- 1. retrieval
def bench_retrieval(home: Path, n: int) -> dict[str, Any]:
    from llama_index.core.schema import QueryBundle

    from litrag.builders import build_embed_model, build_query_engine
    from litrag.settings import Settings

    s = Settings(home=home)
    books = loaded(home)
    embed = build_embed_model(s)
    pairs = questions_for(books, n)
    engine = build_query_engine(s, books[0], embed_model=embed)
    store = engine.retriever.vector_store
    try:
        for book, q in pairs[:5]:  # warm-up: model, caches, the shard's pages
            engine.retriever.select(book)
            engine.retrieve(QueryBundle(q))
        total, embed_t, store_t, hits = [], [], [], []
        for book, q in pairs:
            r = engine.retriever
            r.select(book)
            t0 = time.perf_counter()
            nodes = engine.retrieve(QueryBundle(q))
            total.append(time.perf_counter() - t0)
            hits.append(len(nodes))
            t0 = time.perf_counter()
            vq = r.vector_query(q)  # embeds the question
            embed_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            store.query(vq)  # the store's hybrid query with its fusion
            store_t.append(time.perf_counter() - t0)
        points = store.count() if hasattr(store, "count") else None
        return {
            "phase": "retrieval",
            "books": len(books),
            "points": points,
            "queries": n,
            "preset": engine.retriever.describe(),
            "retrieve": stats_ms(total),
            "query_embedding": stats_ms(embed_t),
            "store_query_with_fusion": stats_ms(store_t),
            "mean_blocks": round(statistics.fmean(hits), 2),
        }
    finally:
        store.close()
        if engine.retriever.children_store is not None:
            engine.retriever.children_store.close()


# --------------------------------------------------------------------------- 2. llm
def bench_llm(home: Path, n: int, local_llm: str | None, max_tokens: int) -> dict[str, Any]:
    from litrag.builders import build_answer_llm, build_embed_model, build_query_engine
    from litrag.settings import Settings

    s = Settings(home=home)
    if local_llm:
        s.local_llm = local_llm
    books = loaded(home)
    t0 = time.perf_counter()
    answer_llm = build_answer_llm(s, max_tokens=max_tokens)
    start_s = time.perf_counter() - t0
    embed = build_embed_model(s)
    engine = build_query_engine(
        s,
        books[0],
        llm=answer_llm.llm,
        llm_description=answer_llm.description,
        embed_model=embed,
    )
    ttft, rates, tokens, errors, chars = [], [], [], [], []
    try:
        for book, q in questions_for(books, n):
            engine.retriever.select(book)
            t0 = time.perf_counter()
            stream = engine.ask(q)
            first = last = None
            count = 0
            for _piece in stream:
                now = time.perf_counter()
                first = first or now
                last = now
                count += 1
            answer = stream.answer()
            chars.append(sum(len(x.excerpt or x.text) for x in answer.sources))
            if answer.error:
                errors.append(answer.error)
            if first is None:
                continue
            ttft.append(first - t0)
            tokens.append(count)
            if count > 1 and last is not None and last > first:
                rates.append((count - 1) / (last - first))
    finally:
        engine.retriever.vector_store.close()
        if engine.retriever.children_store is not None:
            engine.retriever.children_store.close()
        answer_llm.close()
    return {
        "phase": "llm",
        "llm": answer_llm.description,
        "passages": engine.describe(),
        "passage_chars_mean": round(statistics.fmean(chars)) if chars else None,
        "server_start_s": round(start_s, 2),
        "questions": n,
        "answered": len(ttft),
        "time_to_first_token": stats_ms(ttft) if ttft else None,
        "tokens_per_s_median": round(statistics.median(rates), 2) if rates else None,
        "mean_tokens": round(statistics.fmean(tokens), 1) if tokens else None,
        "errors": errors[:3],
    }


# --------------------------------------------------------------------------- 3. ui memory
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PeakRSS(threading.Thread):
    """Samples RSS of a process (and with its children) until stopped; peaks in bytes."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        super().__init__(daemon=True)
        import psutil

        self.proc = psutil.Process(pid)
        self.every = every
        self.peak_self = 0
        self.peak_tree = 0
        self.halt = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.halt.is_set():
            try:
                own = self.proc.memory_info().rss
                kids = sum(c.memory_info().rss for c in self.proc.children(recursive=True))
            except psutil.Error:
                break
            self.peak_self = max(self.peak_self, own)
            self.peak_tree = max(self.peak_tree, own + kids)
            self.halt.wait(self.every)


def bench_ui(home: Path, n: int, local_llm: str | None, timeout: float) -> dict[str, Any]:
    from gradio_client import Client

    books = loaded(home)
    env = dict(os.environ, LITRAG_HOME=str(home))
    if local_llm:
        env["LITRAG_LOCAL_LLM"] = local_llm
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "litrag.cli", "chat", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    sampler = PeakRSS(proc.pid)
    sampler.start()
    t0 = time.perf_counter()
    try:
        line = ""
        while proc.stdout is not None and not line.startswith("litrag chat: http"):
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError(f"litrag chat exited with {proc.returncode}")
        ready_s = time.perf_counter() - t0
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        errors = []
        for book, q in questions_for(books, n):
            job = client.submit(q, [book], api_name="/answer")
            msg = json.loads(job.result(timeout=timeout))
            if msg.get("answer", {}).get("error") or msg.get("input_error"):
                errors.append(msg.get("input_error") or msg["answer"]["error"])
        llm_line = line.split("LLM:", 1)[-1].strip().removesuffix(")")
    finally:
        sampler.halt.set()
        sampler.join(5)
        proc.terminate()
        proc.wait(120)
    gib = 1024**3
    return {
        "phase": "ui",
        "llm": llm_line,
        "ready_s": round(ready_s, 1),
        "questions": n,
        "peak_rss_ui_gib": round(sampler.peak_self / gib, 3),
        "peak_rss_ui_plus_llm_server_gib": round(sampler.peak_tree / gib, 3),
        "under_3_gib": sampler.peak_tree < 3 * gib,
        "errors": errors[:3],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, required=True, help="an ingested LITRAG_HOME")
    ap.add_argument("--queries", type=int, default=200, help="retrieval queries")
    ap.add_argument("--llm-questions", type=int, default=5, help="questions for TTFT / tok/s")
    ap.add_argument("--ui-questions", type=int, default=3, help="questions asked through the UI")
    ap.add_argument(
        "--local-llm", help="packaged model (default: LITRAG_LOCAL_LLM or qwen2.5-coder-1.5b)"
    )
    ap.add_argument("--max-tokens", type=int, default=128, help="answer length cap (llm phase)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per UI question")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: retrieval,llm,ui")
    args = ap.parse_args(argv)
    home = args.home.expanduser().resolve()
    skip = set(filter(None, args.skip.split(",")))
    rows = []
    if "retrieval" not in skip:
        rows.append(bench_retrieval(home, args.queries))
        print(json.dumps(rows[-1]), flush=True)
    if "llm" not in skip:
        rows.append(bench_llm(home, args.llm_questions, args.local_llm, args.max_tokens))
        print(json.dumps(rows[-1]), flush=True)
    if "ui" not in skip:
        rows.append(bench_ui(home, args.ui_questions, args.local_llm, args.timeout))
        print(json.dumps(rows[-1]), flush=True)
    print("\n| phase | figure | value |\n|---|---|---|")
    for r in rows:
        if r["phase"] == "retrieval":
            for part in ("retrieve", "query_embedding", "store_query_with_fusion"):
                print(
                    f"| retrieval ({r['points']} blocks) | {part} p50 / p95 ms "
                    f"| {r[part]['p50_ms']} / {r[part]['p95_ms']} |"
                )
        elif r["phase"] == "llm":
            t = r["time_to_first_token"] or {}
            print(
                f"| llm ({r['llm']}) | time to first token p50 / p95 ms "
                f"| {t.get('p50_ms')} / {t.get('p95_ms')} |"
            )
            print(f"| llm ({r['llm']}) | decode tokens/s (median) | {r['tokens_per_s_median']} |")
        else:
            print(
                f"| ui ({r['llm']}) | peak RSS UI / UI + llama.cpp GiB "
                f"| {r['peak_rss_ui_gib']} / {r['peak_rss_ui_plus_llm_server_gib']} |"
            )


if __name__ == "__main__":
    main()
