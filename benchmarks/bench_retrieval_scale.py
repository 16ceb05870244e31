"""Retrieval latency of a large library ranked through its children (issue 30's cost bullet).

python benchmarks/bench_retrieval_scale.py [--blocks 100000] [--book-blocks 250] [--dir DIR]
    [--questions N] [--configs NAME,...] [--warm] [--profile NAME] [--no-minilm] [--keep]

A synthetic library of ``--blocks`` narrative blocks in books of ``--book-blocks``, with their
paragraph children, written through the product's own stores (``make_vector_store`` as
``litrag.builders.build_store`` / ``build_children_store`` call it: Edge, BM25 sparse vectors,
children with sentence-window multivectors and paragraph BM25 statistics, payload indexes),
optimized, closed; then, in a fresh process, reopened and queried with the product's
``BookRetriever`` under a book filter (and a spoiler limit), over the GutenQA questions.

Text. The six shared books are cut as an ingest cuts them (``build_parser``'s offline LitSeg,
``ParagraphAligner``, ``block_children``: 2,028 blocks, 3,133 children, 1.54 per block), and the
library cycles through that sequence: book ``b`` holds blocks ``b * book_blocks ...`` of it, with
their children, under new ids, its chapters renumbered from 1. Texts, payloads and BM25
statistics are therefore real (a book's IDF is over its own blocks, as ``EDGE_IDF_SCOPE``).

Vectors. Embedding 250k texts and ~600k windows with MiniLM takes hours on 2 cores, so every
distinct text (block, child, window, question) is embedded once with WordLlama (packaged,
256-d, ~2k texts/s), mapped isometrically into 384-d (MiniLM's size: a fixed matrix with
orthonormal columns keeps every cosine) and, per copy, perturbed by Gaussian noise (cosine ~0.9
to its original) and renormalised, so no two points share a vector and the HNSW graph is built
over distinct points. Scores keep a semantic shape (the question's words pull the right
passages), which random vectors would not; the search work only depends on the sizes. The
question vectors are computed before the clock starts; the packaged MiniLM's query embedding is
timed on its own (``minilm query embed``), since ``litrag ask`` pays it once per question.

Timing. Each configuration's ``retrieve`` per question (the ``BookRetriever`` call a question
makes: child search, window BM25 re-scoring, collapse, block fetch), after 5 warm-up questions.
``window_bm25`` caches window terms by text; the library repeats its six books' texts, which
would make that cache hit far more often than in a real library, so it is cleared before every
question, and so is what the stores keep between writes (the IDF read back per book filter:
``forget_reads``), so each question is a first question about its book; ``--warm`` keeps both
(a reader's next question about the same book). Prints p50 / p95
per configuration (and the CPU time p50: what a quiet machine would show when others share the
cores), build (write, optimize), reopen time, RSS, disk size, and one JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pickle
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from litrag.scoring.bm25 import BM25Encoder
from litrag.scoring.windows import SentenceWindowEncoder
from litrag.stores import edge_store

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BOOKS = ROOT / "data" / "books"
DEFAULT_QUESTIONS = ROOT / "data" / "gutenqa" / "questions.jsonl"
NS = uuid.UUID("0b3a4c7e-61d2-4f0a-8e59-7c1d2e3f4a5b")
DIM = 384
NOISE = 0.5  # per-copy noise norm before renormalising: cosine ~0.9 to the original vector
COLLECTION = "litrag"

# name: (rank_through, mode, spoiler limit)
CONFIGS: dict[str, tuple[str, str, bool]] = {
    "children hybrid": ("children", "hybrid", False),
    "children hybrid + spoiler": ("children", "hybrid", True),
    "children bm25": ("children", "sparse", False),
    "children dense": ("children", "dense", False),
    "blocks hybrid": ("blocks", "hybrid", False),
    "blocks bm25": ("blocks", "sparse", False),
    "blocks dense": ("blocks", "dense", False),
}


def rss_mb() -> float:
    """This process's resident memory now (MB)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def du_mb(path: Path) -> float:
    """Disk space the files under ``path`` take (allocated blocks: Edge preallocates its WAL,
    so the files' sizes say more than is used)."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file()) / 2**20


# ----------------------------------------------------------------------------- the real units
def real_units(books: Path, cache: Path) -> list[dict[str, Any]]:
    """The six books' aligned blocks and children, cut as an ingest cuts them; cached in
    ``cache`` (the offline segmenter takes ~50 s). One entry per block: ``block``, ``children``."""
    if cache.is_file():
        with cache.open("rb") as fh:
            return pickle.load(fh)  # our own cache file
    from litrag.builders import build_parser
    from litrag.chunkers.children import PARENT_KEY, ParagraphAligner, block_children
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import iter_book_files, load_book
    from litrag.settings import Settings

    parser = build_parser(Settings(), None)  # the offline segmenter, as ingest without an LLM
    aligner = ParagraphAligner()
    units: list[dict[str, Any]] = []
    for path in iter_book_files(books):
        docs = split_chapters(load_book(path))
        blocks = aligner.for_chapters(docs)(parser(docs))
        kids = block_children(blocks, docs)
        by_parent: dict[str, list[Any]] = {}
        for kid in kids:
            by_parent.setdefault(kid.metadata[PARENT_KEY], []).append(kid)
        units += [{"block": b, "children": by_parent.get(b.node_id, [])} for b in blocks]
    cache.parent.mkdir(parents=True, exist_ok=True)
    with cache.open("wb") as fh:
        pickle.dump(units, fh)
    return units


class Vectors:
    """WordLlama vectors of distinct texts in 384-d, and noisy copies of them (see above)."""

    def __init__(self, seed: int = 0) -> None:
        from litrag.segment.offline import StaticVectors

        self.model = StaticVectors()
        rng = np.random.default_rng(seed)
        width = self.model.encode(["probe"]).shape[1]
        q, _ = np.linalg.qr(rng.standard_normal((DIM, width)))
        self.lift = q.astype(np.float32)  # DIM x width, orthonormal columns: keeps cosines
        self.base: dict[str, np.ndarray] = {}

    def learn(self, texts: Sequence[str]) -> None:
        new = list(dict.fromkeys(t for t in texts if t not in self.base))
        for i in range(0, len(new), 2048):
            part = new[i : i + 2048]
            lifted = self.model.encode(part) @ self.lift.T
            self.base.update(zip(part, lifted, strict=True))

    def exact(self, texts: Sequence[str]) -> np.ndarray:
        self.learn(texts)
        return _unit(np.stack([self.base[t] for t in texts]))

    def noisy(self, texts: Sequence[str], rng: np.random.Generator) -> np.ndarray:
        self.learn(texts)
        base = np.stack([self.base[t] for t in texts])
        noise = rng.standard_normal(base.shape).astype(np.float32) * (NOISE / np.sqrt(DIM))
        return _unit(base + noise)


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


# ----------------------------------------------------------------------------- the library
def book_plan(n_units: int, blocks: int, book_blocks: int) -> list[list[int]]:
    """Unit positions of each synthetic book: consecutive runs of the cycled real sequence."""
    n_books = -(-blocks // book_blocks)
    plan = []
    for b in range(n_books):
        size = min(book_blocks, blocks - b * book_blocks)
        plan.append([(b * book_blocks + i) % n_units for i in range(size)])
    return plan


def book_id(b: int) -> str:
    return f"syn{b:04d}"


def copy_book(units: list[dict[str, Any]], plan: list[int], b: int) -> tuple[list, list]:
    """Book ``b``'s blocks and children: new ids (relationships mapped inside the book, dropped
    across its edges), ``book_id``, chapters renumbered from 1 in story order."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

    from litrag.chunkers.children import PARENT_KEY

    bid = book_id(b)
    ids: dict[str, str] = {}
    for k, u in enumerate(plan):
        ids[units[u]["block"].node_id] = str(uuid.uuid5(NS, f"{bid}:b{k}"))
        for j, kid in enumerate(units[u]["children"]):
            ids[kid.node_id] = str(uuid.uuid5(NS, f"{bid}:b{k}:c{j}"))
    chapters: dict[tuple[str, int], int] = {}

    def remap(node: Any) -> Any:
        new = node.model_copy(deep=True)
        new.id_ = ids[node.node_id]
        real = (node.metadata["book_id"], int(node.metadata["chapter_index"]))
        chapter = chapters.setdefault(real, len(chapters) + 1)
        new.metadata["book_id"] = bid
        new.metadata["title"] = f"{node.metadata.get('title', '')} #{b}"
        new.metadata["chapter_index"] = chapter
        if PARENT_KEY in new.metadata:
            new.metadata[PARENT_KEY] = ids[new.metadata[PARENT_KEY]]
        rels = {}
        for kind, rel in new.relationships.items():
            if kind == NodeRelationship.SOURCE:
                rels[kind] = RelatedNodeInfo(node_id=str(uuid.uuid5(NS, f"{bid}:ch{chapter}")))
            elif isinstance(rel, RelatedNodeInfo) and rel.node_id in ids:
                rels[kind] = RelatedNodeInfo(node_id=ids[rel.node_id])
        new.relationships = rels
        return new

    blocks, children = [], []
    for u in plan:
        blocks.append(remap(units[u]["block"]))
        children += [remap(kid) for kid in units[u]["children"]]
    return blocks, children


def make_stores(home: Path, window_fn: Any = None, memo: bool = False) -> tuple[Any, Any]:
    """The blocks' and the children's collections as ``build_store`` / ``build_children_store``
    make them for a library ingested with children (blocks without windows). ``memo``: the
    BM25 document vectors of a text already seen are reused (the library repeats its texts)."""
    from litrag.stores.factory import CHILD_AVG_LEN, children_collection, make_vector_store

    enc = MemoBM25Encoder if memo else BM25Encoder
    blocks = make_vector_store(
        home, COLLECTION, dense_dim=DIM, encoder=enc(), window_doc_fn=None, new_windowed=False
    )
    children = make_vector_store(
        home,
        children_collection(COLLECTION),
        dense_dim=DIM,
        encoder=enc(avg_len=CHILD_AVG_LEN),
        window_doc_fn=window_fn,
    )
    return blocks, children


class MemoBM25Encoder(BM25Encoder):
    """The same document vectors, each distinct text encoded once."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._seen: dict[str, tuple[list[int], list[float]]] = {}

    def doc_vector(self, text: str) -> tuple[list[int], list[float]]:
        if text not in self._seen:
            self._seen[text] = super().doc_vector(text)
        return self._seen[text]


class MemoWindowEncoder(SentenceWindowEncoder):
    """The product's windows, each distinct text cut once."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._cut: dict[str, list[str]] = {}

    def windows(self, text: str) -> list[str]:
        if text not in self._cut:
            self._cut[text] = super().windows(text)
        return self._cut[text]


def window_encoder(vectors: Vectors, rng: np.random.Generator) -> MemoWindowEncoder:
    """The product's sentence windows over the noisy WordLlama vectors."""
    return MemoWindowEncoder(lambda texts: vectors.noisy(texts, rng))


def build(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.dir) / "home"
    units = real_units(Path(args.books), Path(args.dir) / "units.pkl")
    plan = book_plan(len(units), args.blocks, args.book_blocks)
    rng = np.random.default_rng(1)
    vectors = Vectors()
    t0 = time.perf_counter()
    vectors.learn([u["block"].text for u in units] + [k.text for u in units for k in u["children"]])
    encoder = window_encoder(vectors, rng)
    if hasattr(edge_store, "sentence_terms"):  # the same ids, each distinct text's cut once
        edge_store.sentence_terms = lru_cache(maxsize=None)(edge_store.sentence_terms)
    blocks_store, children_store = make_stores(home, encoder, memo=True)
    n_blocks = n_children = n_windows = 0
    t_write = time.perf_counter()
    for b, positions in enumerate(plan):
        blocks, children = copy_book(units, positions, b)
        for nodes in (blocks, children):
            for node, vec in zip(nodes, vectors.noisy([n.text for n in nodes], rng), strict=True):
                node.embedding = vec.tolist()
        blocks_store.add(blocks)
        children_store.add(children)
        n_blocks += len(blocks)
        n_children += len(children)
        n_windows += sum(len(encoder.windows(c.text)) for c in children)
        if (b + 1) % 20 == 0 or b + 1 == len(plan):
            print(
                f"  {b + 1}/{len(plan)} books, {n_blocks} blocks, {n_children} children, "
                f"{time.perf_counter() - t_write:.0f} s, RSS {rss_mb():.0f} MB",
                file=sys.stderr,
                flush=True,
            )
    write_s = time.perf_counter() - t_write
    opt_blocks = blocks_store.optimize()
    opt_children = children_store.optimize()
    blocks_store.close()
    children_store.close()
    return {
        "books": len(plan),
        "blocks": n_blocks,
        "children": n_children,
        "children_per_block": round(n_children / max(n_blocks, 1), 3),
        "windows": n_windows,
        "write_s": round(write_s, 1),
        "optimize_blocks_s": round(opt_blocks, 1),
        "optimize_children_s": round(opt_children, 1),
        "build_s": round(time.perf_counter() - t0, 1),
        "build_peak_rss_mb": round(peak_rss_mb()),
        "disk_mb": round(du_mb(home / "index"), 1),
        "disk_blocks_mb": round(du_mb(home / "index" / COLLECTION), 1),
        "disk_children_mb": round(du_mb(home / "index" / f"{COLLECTION}-children"), 1),
    }


# ----------------------------------------------------------------------------- the queries
def questions(path: Path, limit: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return rows[:limit]


def question_books(
    units: list[dict[str, Any]], plan: list[list[int]], rows: list[dict[str, Any]]
) -> list[tuple[str, int]]:
    """Per question: a synthetic book made mostly of its real book (taken in turn), and a
    spoiler limit at that book's middle chapter."""
    majority: dict[str, list[int]] = {}
    for b, positions in enumerate(plan):
        real = Counter(units[u]["block"].metadata["book_id"] for u in positions)
        majority.setdefault(real.most_common(1)[0][0], []).append(b)
    out = []
    turn: Counter[str] = Counter()
    for row in rows:
        real = Path(row["book_file"]).name.split("_")[0]
        books = majority.get(real) or [b for bs in majority.values() for b in bs]
        b = books[turn[real] % len(books)]
        turn[real] += 1
        chapters = {
            (units[u]["block"].metadata["book_id"], units[u]["block"].metadata["chapter_index"])
            for u in plan[b]
        }
        out.append((book_id(b), max(1, (len(chapters) + 1) // 2)))
    return out


def precomputed_embedding(table: dict[str, list[float]]) -> Any:
    """A LlamaIndex embedding that returns the question's vector from ``table``."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr

    class Precomputed(BaseEmbedding):
        _table: dict[str, list[float]] = PrivateAttr()

        def __init__(self, table: dict[str, list[float]]) -> None:
            super().__init__(model_name="precomputed")
            self._table = table

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._table[query]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._table[query]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._table[text]

    return Precomputed(table)


def percentile(xs: Sequence[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def query(args: argparse.Namespace) -> dict[str, Any]:
    from litrag.retrieval.retriever import BookRetriever, RetrievalSettings
    from litrag.scoring import window_bm25

    home = Path(args.dir) / "home"
    units = real_units(Path(args.books), Path(args.dir) / "units.pkl")
    plan = book_plan(len(units), args.blocks, args.book_blocks)
    rows = questions(Path(args.questions_file), args.questions)
    texts = [r["question"].strip() for r in rows]
    targets = question_books(units, plan, rows)
    vecs = Vectors().exact(texts)
    embed = precomputed_embedding({t: v.tolist() for t, v in zip(texts, vecs, strict=True)})
    rss_before = rss_mb()
    t0 = time.perf_counter()
    blocks_store, children_store = make_stores(home)
    reopen_s = time.perf_counter() - t0
    for store in (blocks_store, children_store):  # the page-cache warm-up the open started
        store.wait_warm()
    warm_s = time.perf_counter() - t0 - reopen_s
    out: dict[str, Any] = {
        "reopen_s": round(reopen_s, 2),
        "warm_s": round(warm_s, 2),
        "reopen_rss_mb": round(rss_mb() - rss_before),
        "points_blocks": blocks_store.count(),
        "points_children": children_store.count(),
        "questions": len(rows),
        "cache": "warm" if args.warm else "cleared per question",
        "load_before": os.getloadavg()[0],
        "configs": {},
    }
    names = args.configs.split(",") if args.configs else list(CONFIGS)
    for name in names:
        through, mode, spoiler = CONFIGS[name]
        settings = RetrievalSettings.from_preset("embedded", mode=mode, rank_through=through)
        retriever = BookRetriever(
            blocks_store,
            embed,
            targets[0][0],
            settings=settings,
            children_store=children_store,
        )
        assert retriever.through_children == (through == "children")
        times, cpu, found = [], [], 0
        prof = cProfile.Profile() if args.profile == name else None
        for k, (text, (bid, limit)) in enumerate(zip(texts, targets, strict=True)):
            retriever.select(bid, limit if spoiler else None)
            if not args.warm:
                window_bm25.window_terms.cache_clear()
                for store in (blocks_store, children_store):
                    getattr(store, "forget_reads", lambda: None)()
            if prof is not None and k >= args.warmup:
                prof.enable()
            t, c = time.perf_counter(), time.process_time()
            nodes = retriever.retrieve(text)
            dt, dc = time.perf_counter() - t, time.process_time() - c
            if prof is not None:
                prof.disable()
            if k >= args.warmup:
                times.append(dt * 1000)
                cpu.append(dc * 1000)
            found += bool(nodes)
        out["configs"][name] = {
            "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(percentile(times, 95), 2),
            "mean_ms": round(statistics.fmean(times), 2),
            "cpu_p50_ms": round(statistics.median(cpu), 2),
            "answered": f"{found}/{len(texts)}",
        }
        print(f"  {name}: p50 {statistics.median(times):.2f} ms", file=sys.stderr, flush=True)
        if prof is not None:
            stats = pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative")
            stats.print_stats(40)
            stats.sort_stats("tottime").print_stats(25)
    blocks_store.close()
    children_store.close()
    out["query_peak_rss_mb"] = round(peak_rss_mb())
    out["load_after"] = os.getloadavg()[0]
    if not args.no_minilm:
        out["minilm_query_embed"] = minilm_query_times(texts, args.warmup)
    return out


def minilm_query_times(texts: Sequence[str], warmup: int) -> dict[str, float]:
    """The packaged MiniLM's query embedding per question (what ``litrag ask`` adds)."""
    from litrag.builders import build_embed_model
    from litrag.settings import Settings

    model = build_embed_model(Settings())
    times = []
    for k, text in enumerate(texts):
        t = time.perf_counter()
        model.get_query_embedding(text)
        if k >= warmup:
            times.append((time.perf_counter() - t) * 1000)
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(percentile(times, 95), 2),
    }


# ----------------------------------------------------------------------------- driver
def run_phase(phase: str, argv: list[str]) -> dict[str, Any]:
    """One phase in its own process (its RSS is its own); returns its JSON line."""
    cmd = [sys.executable, __file__, "--phase", phase, *argv]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(build_fig: dict[str, Any], query_fig: dict[str, Any]) -> None:
    b, q = build_fig, query_fig
    print(
        f"\nlibrary: {b['books']} books, {b['blocks']:,} blocks, {b['children']:,} children "
        f"({b['children_per_block']} per block), {b['windows']:,} child windows, 384-d"
    )
    print(
        f"build: {b['build_s']} s (write {b['write_s']} s, optimize blocks "
        f"{b['optimize_blocks_s']} s + children {b['optimize_children_s']} s), peak RSS "
        f"{b['build_peak_rss_mb']} MB; disk {b['disk_mb']} MB (blocks {b['disk_blocks_mb']}, "
        f"children {b['disk_children_mb']})"
    )
    print(
        f"reopen: {q['reopen_s']} s (page-cache warm-up {q.get('warm_s', '-')} s more, waited "
        f"for), +{q['reopen_rss_mb']} MB RSS; query process peak RSS "
        f"{q['query_peak_rss_mb']} MB; {q['questions']} questions, window cache {q['cache']}"
    )
    print(f"load average (1 min) {q.get('load_before')} before, {q.get('load_after')} after")
    print("\n| configuration | p50 ms | p95 ms | mean ms | CPU p50 ms |\n|---|---|---|---|---|")
    for name, c in q["configs"].items():
        row = f"{c['p50_ms']} | {c['p95_ms']} | {c['mean_ms']} | {c.get('cpu_p50_ms', '')}"
        print(f"| {name} | {row} |")
    if "minilm_query_embed" in q:
        m = q["minilm_query_embed"]
        print(f"| (MiniLM query embedding) | {m['p50_ms']} | {m['p95_ms']} | | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=100_000)
    ap.add_argument("--book-blocks", type=int, default=250)
    ap.add_argument("--books", default=str(DEFAULT_BOOKS))
    ap.add_argument("--questions-file", default=str(DEFAULT_QUESTIONS))
    ap.add_argument("--questions", type=int, default=200, help="at most this many (180 exist)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--configs", default="", help=f"comma-separated, of: {', '.join(CONFIGS)}")
    ap.add_argument("--warm", action="store_true", help="keep window_bm25's cache")
    ap.add_argument("--profile", default="", help="profile this configuration's queries")
    ap.add_argument("--no-minilm", action="store_true", help="skip MiniLM query embedding")
    ap.add_argument("--keep", action="store_true", help="keep the library in --dir")
    ap.add_argument("--reuse", action="store_true", help="query the library already in --dir")
    ap.add_argument("--phase", choices=["build", "query"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase == "build":
        print(json.dumps(build(args)))
        return
    if args.phase == "query":
        print(json.dumps(query(args)))
        return
    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="litrag-scale-")
        args.dir = tmp.name
    argv = [a for a in sys.argv[1:] if a not in ("--keep", "--reuse")]
    if "--dir" not in argv:
        argv += ["--dir", args.dir]
    saved = Path(args.dir) / "build.json"
    if args.reuse and saved.is_file():
        build_fig = json.loads(saved.read_text(encoding="utf-8"))
    else:
        import shutil

        shutil.rmtree(Path(args.dir) / "home", ignore_errors=True)
        build_fig = run_phase("build", argv)
        saved.write_text(json.dumps(build_fig), encoding="utf-8")
    query_fig = run_phase("query", argv)
    report(build_fig, query_fig)
    print(json.dumps({"build": build_fig, "query": query_fig, "argv": sys.argv[1:]}))
    if tmp is not None and not args.keep:
        tmp.cleanup()
    elif not args.keep and not args.reuse:
        print(f"(library left in {args.dir})", file=sys.stderr)


if __name__ == "__main__":
    main()
