"""Shared fixtures: the real books and question set in ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["llm_server"]

DATA = Path(os.environ.get("LITRAG_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
BOOKS = DATA / "books"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not BOOKS.is_dir():
        pytest.fail(f"shared data not found at {DATA} (set LITRAG_DATA)")
    return DATA


@pytest.fixture(scope="session")
def books_dir(data_dir: Path) -> Path:
    return data_dir / "books"
