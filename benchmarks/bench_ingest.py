"""Ingestion benchmark: per-stage seconds for the six shared books and a large synthetic library.

    python benchmarks/bench_ingest.py                         # the six books
    python benchmarks/bench_ingest.py --library 100           # and the six under 100 ebook ids
    python benchmarks/bench_ingest.py --library 100 --chapters 2 --skip-six   # shorter books
    python benchmarks/bench_ingest.py --library 100 --words 500 --skip-six    # per-book overheads
    python benchmarks/bench_ingest.py --no-prefetch           # segmentation not run ahead

Each run is a fresh LITRAG_HOME in a temporary folder, in a child process (its peak RSS is the
ingest's), with the default offline settings: offline segmenter, packaged MiniLM, sentence
windows, embedded Qdrant Edge. Stages, summed over books: load (read, decode, strip), chapters,
segment (run one book ahead, beside the embedding of the current one), embed blocks, embed
windows, store (upserts, docstore and cache persistence), and one optimize at the end. Copies
of a book get new ebook numbers, so nothing is served from the ingestion cache.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOOKS = Path(__file__).resolve().parents[1] / "data" / "books"
STAGES = (
    "load",
    "chapters",
    "segment",
    "characters",
    "embed_blocks",
    "embed_windows",
    "embed_children",  # the paragraph children (small-to-big), whole vectors and windows
    "store",
)
HEADER = (
    "Title: {title}\nAuthor: {author}\nRelease Date: 2026 [EBook #{id}]\nLanguage: English\n\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK {id} ***\n\n"
)
FOOTER = "\n\n*** END OF THE PROJECT GUTENBERG EBOOK {id} ***\n"


def folder_bytes(path: Path) -> int:
    """Bytes allocated on disk (as ``du``): the store's mmap files are sparse, so their
    apparent size (hundreds of MB for a small library) says nothing."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def lib_backend(lib: object) -> str:
    """What ran the embedding model (WindowedEmbedding.resolved_backend), for the record."""
    for owner in (lib, getattr(lib, "store", None)):
        model = getattr(owner, "embed_model", None)
        if hasattr(model, "resolved_backend"):
            return f"{model.resolved_backend()} {getattr(model, 'precision', '')}".strip()
    return "?"


def ingest(folder: Path, prefetch: bool) -> dict:
    from litrag.builders import build_library
    from litrag.settings import Settings

    home = Path(tempfile.mkdtemp(prefix="litrag-bench-"))
    t0 = time.perf_counter()
    lib = build_library(Settings(home=home))
    lib.prefetch = prefetch
    t_open = time.perf_counter() - t0
    t1 = time.perf_counter()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    report = lib.ingest([folder])
    wall = time.perf_counter() - t1
    ru2 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime
    books = {b.book_id: b for b in lib.books()}
    lib.close()
    return {
        "books": len(report.ingested),
        "failed": report.failed,
        "nodes": sum(b.nodes for b in books.values()),
        "open_s": round(t_open, 1),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),  # all threads: on a shared machine, steadier than wall time
        "optimize_s": report.optimize_s,
        "per_book": {
            k: {**report.seconds[k], "nodes": books[k].nodes, "chapter_count": books[k].chapters}
            for k in report.ingested
        },
        "home": str(home),  # kept, for benchmarks/bench_chat.py --home
        "embed_backend": lib_backend(lib),
        "store_mb": round(folder_bytes(home / "index") / 1e6, 1),
        "docstore_mb": round((home / "docstore.json").stat().st_size / 1e6, 1),
        "cache_mb": round(folder_bytes(home / "cache") / 1e6, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def library(dest: Path, n_books: int, chapters: int | None, words: int | None = None) -> Path:
    """``n_books`` books: the six shared ones in turn, each copy under a new ebook number;
    with ``chapters``, each cut to its first ``chapters`` chapters; with ``words``, to the
    paragraphs of about its first ``words`` words (one chapter)."""
    from litrag.ingestion.chapters import detect_units
    from litrag.ingestion.gutenberg import load_book

    dest.mkdir(parents=True, exist_ok=True)
    files = sorted(BOOKS.glob("pg*.txt"))
    for k in range(n_books):
        src = files[k % len(files)]
        copy = k // len(files)
        book = load_book(src)
        new_id = book.ebook_id if copy == 0 else book.ebook_id * 1000 + copy
        if words is not None:
            paras, n = [], 0
            for para in book.text.split("\n\n"):
                paras.append(para)
                n += len(para.split())
                if n >= words:
                    break
            text = (
                HEADER.format(title=book.title, author=book.author, id=new_id)
                + "\n\n".join(paras)
                + FOOTER.format(id=new_id)
            )
        elif chapters is None:
            raw = src.read_bytes().decode(book.encoding)
            if copy:
                raw = re.sub(
                    r"(E-?(?:Book|text)\s*#\s*)(\d+)", rf"\g<1>{new_id}", raw, count=1, flags=re.I
                )
            text = raw
        else:
            units = detect_units(book.text)
            end = units[chapters].start if len(units) > chapters else len(book.text)
            text = (
                HEADER.format(title=book.title, author=book.author, id=new_id)
                + book.text[:end]
                + FOOTER.format(id=new_id)
            )
        (dest / f"pg{new_id}.txt").write_text(text, encoding="utf-8")
    return dest


def run_child(folder: Path, prefetch: bool) -> dict:
    cmd = [sys.executable, __file__, "_child", str(folder), "1" if prefetch else "0"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.stderr.write(out.stderr[-3000:])
        raise SystemExit(out.returncode)
    return json.loads(out.stdout.strip().splitlines()[-1])


def stage_totals(r: dict) -> dict[str, float]:
    tot = {s: round(sum(b.get(s, 0.0) for b in r["per_book"].values()), 1) for s in STAGES}
    tot["optimize"] = r["optimize_s"]
    return tot


def print_run(name: str, r: dict, per_book: bool) -> None:
    tot = stage_totals(r)
    print(
        f"\n{name}: {r['books']} books, {r['nodes']} blocks, wall {r['wall_s']} s, CPU "
        f"{r.get('cpu_s', '?')} s (+ model load {r['open_s']} s), peak RSS {r['peak_rss_mb']} MiB, "
        "store on disk "
        f"{r['store_mb']} MB (docstore {r['docstore_mb']} MB, cache {r['cache_mb']} MB), "
        f"failed {r['failed']}; embedding on {r.get('embed_backend', '?')}; home {r.get('home')}"
    )
    print("| " + " | ".join(("stage", *STAGES, "optimize")) + " |")
    print("|---" * (len(STAGES) + 2) + "|")
    print("| seconds | " + " | ".join(str(tot[s]) for s in (*STAGES, "optimize")) + " |")
    if per_book:
        print("\n| book | chapters | blocks | " + " | ".join(STAGES) + " | s per block |")
        print("|---" * (len(STAGES) + 4) + "|")
        for book, s in r["per_book"].items():
            total = sum(s.get(k, 0.0) for k in STAGES)
            print(
                f"| {book} | {s['chapter_count']} | {s['nodes']} | "
                + " | ".join(str(s.get(k, 0.0)) for k in STAGES)
                + f" | {total / max(s['nodes'], 1):.3f} |"
            )


def flatness(r: dict, groups: int = 5) -> None:
    """Seconds per block in consecutive groups of books: flat means linear total time."""
    books = list(r["per_book"].values())
    size = max(len(books) // groups, 1)
    print("\n| books | blocks | s per block | store s per block |\n|---|---|---|---|")
    for g in range(0, len(books), size):
        chunk = books[g : g + size]
        nodes = sum(b["nodes"] for b in chunk)
        secs = sum(sum(b.get(k, 0.0) for k in STAGES) for b in chunk)
        store = sum(b.get("store", 0.0) for b in chunk)
        print(
            f"| {g + 1}-{g + len(chunk)} | {nodes} | {secs / max(nodes, 1):.3f} | "
            f"{store / max(nodes, 1):.4f} |"
        )
    per = [sum(b.get(k, 0.0) for k in STAGES) / max(b["nodes"], 1) for b in books if b["nodes"]]
    if len(per) > 1:
        print(f"median s per block {statistics.median(per):.3f}")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "_child":
        print(json.dumps(ingest(Path(sys.argv[2]), sys.argv[3] == "1")))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--library", type=int, help="also a library of this many books (e.g. 100)")
    p.add_argument("--chapters", type=int, help="cut each library book to its first N chapters")
    p.add_argument("--words", type=int, help="cut each library book to about its first N words")
    p.add_argument("--skip-six", action="store_true", help="only the --library run")
    p.add_argument(
        "--book",
        action="append",
        default=[],
        help="also each of these shared books alone (an ebook id or file stem, e.g. pg1661: "
        "The Adventures of Sherlock Holmes, 108k words)",
    )
    p.add_argument("--no-prefetch", action="store_true", help="segment each book in turn")
    p.add_argument("--json-out", type=Path, help="write the raw figures here")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="litrag-books-"))
    prefetch = not args.no_prefetch
    results: dict[str, dict] = {}
    for name in args.book:
        found = sorted(BOOKS.glob(f"{name}.txt")) or sorted(BOOKS.glob(f"{name}_*.txt"))
        if not found:
            p.error(f"--book {name}: no {name}.txt or {name}_*.txt in {BOOKS}")
        stem = found[0].stem
        one = tmp / stem
        one.mkdir()
        (one / f"{stem}.txt").write_bytes(found[0].read_bytes())
        r = run_child(one, prefetch)
        results[stem] = r
        print_run(stem, r, per_book=True)
    if not args.skip_six:
        r = run_child(library(tmp / "six", 6, None), prefetch)
        results["six"] = r
        print_run("six books", r, per_book=True)
    if args.library:
        r = run_child(library(tmp / "big", args.library, args.chapters, args.words), prefetch)
        results["library"] = r
        cut = f", each cut to {args.chapters} chapters" if args.chapters else ""
        cut = f", each cut to about {args.words} words" if args.words else cut
        print_run(f"{args.library}-book library (the six under new ebook ids{cut})", r, False)
        flatness(r)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
