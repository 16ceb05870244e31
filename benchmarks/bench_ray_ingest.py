"""The distributed ingest against the one-process one: the six shared books, wall and per stage.

    python benchmarks/bench_ray_ingest.py                    # a local Ray cluster of 2 CPUs
    python benchmarks/bench_ray_ingest.py --cpus 8 --actors 3
    python benchmarks/bench_ray_ingest.py --out docs/ray-ingest.json

Both runs are ``litrag ingest -q BOOKS`` in a child process, each with a fresh LITRAG_HOME and
the default settings (offline segmenter, packaged MiniLM, paragraph children, character index,
embedded Qdrant Edge); the Ray run adds ``--ray ADDRESS`` for a cluster started here with
``ray.init(num_cpus=CPUS)``. Per stage, summed over the books (from the registry's seconds):
the one-process run's load, chapters, segment, characters, embed_* and store; the Ray run's
worker stages (load, chapters, segment, characters_index as tasks, embed_ahead in the actors)
and the driver's (store: its writes; characters: the index saved; embed_*: what it had to embed
itself, 0 when every vector came from the actors). The two libraries must hold the same node ids
and registry records (checked here; tests/test_ray_ingest.py checks everything on three short
books).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BOOKS = Path(__file__).resolve().parents[1] / "data" / "books"


def ingest(home: Path, books: Path, *extra: str) -> dict[str, Any]:
    """One ``litrag ingest`` run: its wall seconds and per-stage sums."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ingest", "-q", str(books), *extra],
        env={**os.environ, "LITRAG_HOME": str(home)},
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"ingest failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rows = json.loads((home / "books.json").read_text(encoding="utf-8"))
    stages: dict[str, float] = {}
    for row in rows.values():
        for stage, secs in row["seconds"].items():
            stages[stage] = round(stages.get(stage, 0.0) + secs, 1)
    optimize = [line for line in done.stdout.splitlines() if line.startswith("optimize ")]
    return {
        "wall_s": round(wall, 1),
        "stages_s": stages,
        "optimize": optimize[0] if optimize else None,
        "nodes": sum(r["nodes"] for r in rows.values()),
        "children": sum(r["children"] for r in rows.values()),
        "books": len(rows),
    }


def records(home: Path) -> dict[str, Any]:
    rows = json.loads((home / "books.json").read_text(encoding="utf-8"))
    for row in rows.values():
        row.pop("seconds")
        row.pop("ingested_at")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--books", type=Path, default=BOOKS, help="a folder of books (the six)")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    ap.add_argument("--actors", type=int, default=1, help="embedding actors")
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    import ray

    books = Path(tempfile.mkdtemp(prefix="bench-ray-books-"))
    for src in sorted(args.books.glob("pg*.txt")):  # the books only, not their variants
        (books / src.name).write_bytes(src.read_bytes())
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    single = ingest(tmp / "single", books)
    print("one process:", json.dumps(single), flush=True)
    ray.init(num_cpus=args.cpus, include_dashboard=False, configure_logging=False)
    try:
        address = str(ray.get_runtime_context().gcs_address)
        on_ray = ingest(tmp / "ray", books, "--ray", address, "--ray-actors", str(args.actors))
    finally:
        ray.shutdown()
    print("ray:", json.dumps(on_ray), flush=True)
    same = records(tmp / "single") == records(tmp / "ray")
    result = {
        "books": sorted(p.name for p in books.glob("*.txt")),
        "cpus": args.cpus,
        "actors": args.actors,
        "machine_cpus": os.cpu_count(),
        "one_process": single,
        "ray": on_ray,
        "same_registry_records": same,
        "speedup": round(single["wall_s"] / on_ray["wall_s"], 2),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if not same:
        raise SystemExit("the two libraries' registry records differ")


if __name__ == "__main__":
    main()
