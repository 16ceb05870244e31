"""Distributed ingest (``litrag ingest --ray``) against the one-process ingest of the same books.

A local Ray cluster (``ray.init(num_cpus=2)``, started here), three short real books (the first
chapters of three shared novels, written as files here), the packaged MiniLM, the embedded Qdrant
Edge store: the Ray ingest must give the one-process ingest's node ids, points, registry records,
docstore, character indexes and extractive answer; a driver killed (SIGKILL) after its first book
is written, then rerun, must end with the same, nothing lost. The whole six-book comparison, with
the time of each stage, is the benchmark's job (``benchmarks/bench_ray_ingest.py``), not CI's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from mirror_tree import excerpt

ray = pytest.importorskip("ray", reason="the distributed ingest needs litrag[scale]")

# (file, shared book, lines): the opening chapters of each, 31 KB in all
BOOKS = (
    ("a_alice.txt", "pg11_alice_in_wonderland.txt", 252),  # chapter I
    ("b_pride.txt", "pg1342_pride_and_prejudice.txt", 262),  # chapters 1-2
    ("c_frankenstein.txt", "pg84_frankenstein.txt", 241),  # letter 1
)
QUESTION = "What did Alice drink that made her shrink?"


@pytest.fixture(scope="module")
def shelf(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shelf")
    for name, src, lines in BOOKS:
        (folder / name).write_text(excerpt(books_dir / src, lines), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local two-CPU Ray cluster for the module; its address (the CLI joins it). Ray gives its
    raylet 30 s to register, and its agents a minute: on a machine busy with other jobs, more
    tries (the agent's wait stretched)."""
    os.environ.setdefault("RAY_agent_register_timeout_ms", "600000")
    for attempt in (1, 2, 3, 4):
        try:
            ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 4:
                raise
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


def ingest_on_ray(shelf: Path, home: Path, address: str, **popen: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "litrag.cli", "ingest", "-q", str(shelf), "--ray", address],
        env={**os.environ, "LITRAG_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def single(shelf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one-process ingest of the same books (``Library.ingest``, as ``litrag ingest``)."""
    from litrag.builders import build_library
    from litrag.settings import Settings

    home = tmp_path_factory.mktemp("single")
    library = build_library(Settings(home=home))
    try:
        report = library.ingest([shelf])
    finally:
        library.close()
    assert sorted(report.ingested) == ["pg11", "pg1342", "pg84"] and report.ok
    return home


def state(home: Path) -> dict[str, object]:
    """What must be identical: registry records (less their clocks), the docstore, the
    character indexes, and every point (id -> text, metadata) of both collections."""
    from litrag.builders import build_children_store, build_store
    from litrag.settings import Settings

    rows = json.loads((home / "books.json").read_text(encoding="utf-8"))
    for row in rows.values():
        row.pop("seconds")
        row.pop("ingested_at")
    s = Settings(home=home)
    points: dict[str, object] = {}
    vectors: dict[str, np.ndarray] = {}
    for store in (build_store(s), build_children_store(s)):
        try:
            for n in store.get_nodes():
                points[n.node_id] = (n.get_content(), json.dumps(n.metadata, sort_keys=True))
                vectors[n.node_id] = np.asarray(n.embedding, dtype=np.float32)
        finally:
            store.close()
    return {
        "registry": rows,
        "docstore": json.loads((home / "docstore.json").read_text(encoding="utf-8")),
        "characters": {
            p.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((home / "characters").glob("*.json"))
        },
        "points": points,
        "vectors": vectors,
    }


def assert_same(got: dict[str, object], want: dict[str, object]) -> None:
    assert sorted(got["points"]) == sorted(want["points"])  # the same node ids, none lost
    for key in ("registry", "docstore", "characters", "points"):
        assert got[key] == want[key], key
    for node_id, vec in want["vectors"].items():  # embedded elsewhere, in other batches
        assert np.allclose(got["vectors"][node_id], vec, atol=1e-4), node_id


def answer(home: Path) -> object:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "litrag.cli",
            "ask",
            QUESTION,
            "--book",
            "pg11",
            "--no-llm",
            "--json",
        ],
        env={**os.environ, "LITRAG_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return rounded(json.loads(done.stdout))


def rounded(value: object) -> object:
    """Scores to 4 places: the vectors were embedded in other batches (float noise)."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def test_ray_ingest_matches_the_one_process_ingest(cluster, shelf, single, tmp_path):
    home = tmp_path / "ray"
    proc = ingest_on_ray(shelf, home, cluster)
    out, err = proc.communicate(timeout=1200)
    assert proc.returncode == 0, err
    assert "ingested 3, unchanged 0, failed 0" in out
    assert f"ray: {cluster}" in err and "Traceback" not in err
    want = state(single)
    assert len(want["points"]) > 30 and len(want["registry"]) == 3
    assert_same(state(home), want)
    # The driver only wrote: the blocks' and children's vectors came from the actors.
    for secs in json.loads((home / "books.json").read_text(encoding="utf-8")).values():
        seconds = secs["seconds"]
        assert seconds["embed_ahead"] > 0 and seconds["segment"] > 0
        assert seconds.get("embed_blocks", 0) == 0 and seconds.get("embed_children", 0) == 0
    assert answer(home) == answer(single)


def test_a_killed_driver_resumes_with_nothing_lost(cluster, shelf, single, tmp_path):
    home = tmp_path / "killed"
    proc = ingest_on_ray(shelf, home, cluster, start_new_session=True)
    assert proc.stderr is not None
    deadline = time.time() + 1200
    seen = []
    for line in proc.stderr:  # kill at the first book written
        seen.append(line)
        if line.startswith("  pg") and line.rstrip().endswith(" nodes"):
            break
        assert time.time() < deadline, "".join(seen)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    rows = json.loads((home / "books.json").read_text(encoding="utf-8"))
    complete = [k for k, r in rows.items() if r["status"] == "complete"]
    assert 1 <= len(complete) < 3, rows

    again = ingest_on_ray(shelf, home, cluster)
    out, err = again.communicate(timeout=1200)
    assert again.returncode == 0, err
    assert f"unchanged {len(complete)}, failed 0" in out  # what was complete is not redone
    for book in complete:
        assert f"{book} unchanged" in err
    assert_same(state(home), state(single))


def test_no_ray_import_on_the_default_path():
    code = (
        "import sys, litrag.cli, litrag.cli.library, litrag.builders, litrag.ingestion.library; "
        "litrag.cli.build_parser(); print('ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_ray_flag_errors_are_one_line(shelf, tmp_path):
    env = {**os.environ, "LITRAG_HOME": str(tmp_path / "h")}
    bad = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ingest", str(shelf), "--ray", "127.0.0.1:1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert bad.returncode == 2
    last = bad.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --ray 127.0.0.1:1: cannot join the Ray cluster"), last
    none = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ingest", "--ray"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert none.returncode == 2 and none.stderr.startswith("error: ingest needs books")
