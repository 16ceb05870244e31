"""A multi-book ingest interrupted with Ctrl-C and resumed ends with exactly the nodes of a clean
run, nothing done twice; and the next book's segmentation runs beside the current one's
embedding (real MiniLM, embedded Qdrant Edge, offline segmenter, shortened shared books)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.callbacks import CBEventType
from llama_index.core.callbacks.base_handler import BaseCallbackHandler
from mirror_tree import excerpt
from test_integrity import spawn_ingest

from litrag.builders import build_library
from litrag.settings import Settings


@pytest.fixture(scope="module")
def shelf(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shelf")
    for name, src, lines in (
        ("a_alice.txt", "pg11_alice_in_wonderland.txt", 160),
        ("b_wild.txt", "pg215_call_of_the_wild.txt", 170),
        ("c_frankenstein.txt", "pg84_frankenstein.txt", 170),
    ):
        (folder / name).write_text(excerpt(books_dir / src, lines), encoding="utf-8")
    return folder


def points(home: Path) -> dict[str, tuple[str, str, np.ndarray]]:
    """Every stored point: (text, metadata, dense vector), by node id."""
    lib = build_library(Settings(home=home))
    try:
        return {
            n.node_id: (
                n.get_content(),
                json.dumps(n.metadata, sort_keys=True),
                np.asarray(n.embedding, dtype=np.float32),
            )
            for n in lib.store.get_nodes()
        }
    finally:
        lib.close()


class ParsingThreads(BaseCallbackHandler):
    """Which threads ran the node parser."""

    def __init__(self) -> None:
        super().__init__(event_starts_to_ignore=[], event_ends_to_ignore=[])
        self.threads: list[str] = []

    def on_event_start(self, event_type: CBEventType, payload: Any = None, event_id: str = "",
                       parent_id: str = "", **kwargs: Any) -> str:  # fmt: skip
        if event_type == CBEventType.NODE_PARSING:
            self.threads.append(threading.current_thread().name)
        return event_id

    def on_event_end(self, *args: Any, **kwargs: Any) -> None:
        return None

    def start_trace(self, trace_id: str | None = None) -> None:
        return None

    def end_trace(self, trace_id: str | None = None, trace_map: Any = None) -> None:
        return None


@pytest.fixture(scope="module")
def clean(shelf: Path, tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("clean")
    lib = build_library(Settings(home=home))
    seen = ParsingThreads()
    lib.parser.callback_manager.add_handler(seen)
    report = lib.ingest([shelf])
    lib.parser.callback_manager.remove_handler(seen)
    lib.close()
    assert sorted(report.ingested) == ["pg11", "pg215", "pg84"] and report.ok
    return home, report, seen.threads


def test_segmentation_runs_ahead_of_embedding(clean):
    _, report, threads = clean
    # Every book was segmented by the prefetch thread; the pipeline found its blocks in the
    # cache (a key mismatch would show up as parsing on the main thread).
    assert threads and set(threads) == {"litrag-prefetch"}
    for secs in report.seconds.values():
        # With children (the default) the windows are the children's, in embed_children.
        assert secs["segment"] > 0 and secs["embed_blocks"] > 0 and secs["embed_children"] > 0
    assert report.optimize_s > 0


def test_ctrl_c_then_resume_ends_with_the_clean_nodes(clean, shelf, tmp_path):
    clean_home, _, _ = clean
    home = tmp_path / "home"
    proc = spawn_ingest(shelf, home)
    registry = home / "books.json"
    deadline = time.time() + 300
    while time.time() < deadline:  # Ctrl-C while the second book (pg84) is ingested
        rows = json.loads(registry.read_text(encoding="utf-8")) if registry.exists() else {}
        if len(rows) == 2 and sorted(r["status"] for r in rows.values()) == [
            "complete",
            "ingesting",
        ]:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted: saved pg11 complete; ") and "of pg84 stored" in last
    rows = json.loads(registry.read_text(encoding="utf-8"))
    assert rows["pg11"]["status"] == "complete" and rows["pg84"]["status"] == "ingesting"

    done = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ingest", "-q", str(shelf)],
        env={**os.environ, "LITRAG_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "ingested 2, unchanged 1, failed 0" in done.stdout  # pg11 is not done twice
    assert "pg11 unchanged" in done.stderr

    want, got = points(clean_home), points(home)
    assert sorted(got) == sorted(want)  # the same node ids: nothing lost, nothing twice
    for node_id, (text, meta, vec) in want.items():
        assert got[node_id][:2] == (text, meta)
        assert np.allclose(got[node_id][2], vec, atol=1e-5)
    rows = json.loads(registry.read_text(encoding="utf-8"))
    assert all(r["status"] == "complete" for r in rows.values())
    assert sum(r["nodes"] for r in rows.values()) == len(got)
