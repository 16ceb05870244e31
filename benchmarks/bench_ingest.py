"""Ingestion benchmark: the six-book library with the default offline settings.

    python benchmarks/bench_ingest.py                 # six books: per-book seconds, peak memory
    python benchmarks/bench_ingest.py --scale         # 1, 3, 6 books and 6 x 5 copies (~30)
    python benchmarks/bench_ingest.py --scale --copies 2   # a shorter curve

Each run uses a fresh LITRAG_HOME in a temporary folder and reports wall time, per-book load /
segment / embed / store seconds and the peak RSS of the ingesting process.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOOKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "books"


def ingest(folder: Path) -> dict:
    from litrag.builders import build_library
    from litrag.settings import Settings

    home = Path(tempfile.mkdtemp(prefix="litrag-bench-"))
    t0 = time.perf_counter()
    lib = build_library(Settings(home=home))
    t_open = time.perf_counter() - t0
    report = lib.ingest([folder])
    wall = time.perf_counter() - t0
    nodes = sum(b.nodes for b in lib.books())
    return {
        "books": len(report.ingested),
        "failed": report.failed,
        "nodes": nodes,
        "open_s": round(t_open, 1),
        "wall_s": round(wall, 1),
        "per_book": report.seconds,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def copies(dest: Path, n_books: int, times: int) -> Path:
    """``n_books`` of the six, each ``times`` times under a different ebook id."""
    dest.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in BOOKS.glob("pg*.txt"))[:n_books]
    for k in range(times):
        for f in files:
            raw = f.read_bytes().decode("utf-8-sig", errors="replace")
            if k:
                raw = re.sub(
                    r"(E-?(?:Book|text)\s*#\s*)(\d+)", rf"\g<1>\g<2>0{k}", raw, count=1, flags=re.I
                )
            (dest / f"{f.stem}_{k}.txt").write_text(raw, encoding="utf-8")
    return dest


def run_child(folder: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "_child", str(folder)], capture_output=True, text=True
    )
    if out.returncode:
        sys.stderr.write(out.stderr[-3000:])
        raise SystemExit(out.returncode)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_child":
        print(json.dumps(ingest(Path(sys.argv[2]))))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", action="store_true", help="also 1, 3 and 6 x COPIES books")
    p.add_argument("--copies", type=int, default=5, help="copies of the six in --scale (5: ~30)")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="litrag-books-"))
    r = run_child(copies(tmp / "six", 6, 1))
    print(
        f"six books: {r['books']} books, {r['nodes']} nodes, wall {r['wall_s']} s "
        f"(model load {r['open_s']} s), peak RSS {r['peak_rss_mb']} MiB, failed {r['failed']}"
    )
    print("| book | load s | segment s | embed s | store s |\n|---|---|---|---|---|")
    for book, s in r["per_book"].items():
        print(
            f"| {book} | {s.get('load', 0)} | {s.get('segment', 0)} | {s.get('embed', 0)} | "
            f"{s.get('store', 0)} |"
        )
    if args.scale:
        print("\n| books | nodes | wall s | s per 1k nodes | peak RSS MiB |\n|---|---|---|---|---|")
        for n, times in ((1, 1), (3, 1), (6, 1), (6, args.copies)):
            r = run_child(copies(tmp / f"scale{n}x{times}", n, times))
            per_k = r["wall_s"] / max(r["nodes"], 1) * 1000
            print(
                f"| {r['books']} | {r['nodes']} | {r['wall_s']} | {per_k:.1f} | "
                f"{r['peak_rss_mb']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
