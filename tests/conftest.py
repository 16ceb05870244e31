"""Shared fixtures: the real books and question sets in the repository's ``data/`` folder."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["llm_server"]

# Folders in the base temp folder that outlive a module: caches shared across modules.
SHARED_TEMP = {"answer-shelf"}

DATA = Path(os.environ.get("LITRAG_DATA") or Path(__file__).resolve().parents[1] / "data")
BOOKS = DATA / "books"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not BOOKS.is_dir():
        pytest.fail(f"data not found at {DATA} (set LITRAG_DATA)")
    return DATA


@pytest.fixture(scope="session")
def books_dir(data_dir: Path) -> Path:
    return data_dir / "books"


@pytest.fixture(scope="module", autouse=True)
def _free_module_temp(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Remove the temp folders a module made once it ends, unless one of its tests failed.

    A library home holds ~0.5 GB of the store's preallocated files; kept to the end of the run
    (pytest's default) they add up to ~16 GB, more than a CI machine's disk may have free.
    Passing tests' own ``tmp_path`` folders go at once (``tmp_path_retention_policy``).
    """
    base = tmp_path_factory.getbasetemp()
    before = set(os.listdir(base))
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed != failed:
        return
    for name in set(os.listdir(base)) - before - SHARED_TEMP:
        shutil.rmtree(base / name, ignore_errors=True)
