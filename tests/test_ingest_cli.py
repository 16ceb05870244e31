"""``litrag ingest`` on bad arguments (issue 34): one ``error:`` line, exit 2, and nothing made
under ``LITRAG_HOME`` (a refused ingest left an empty store that then read as a damaged
library: "books.json is missing but the store holds data")."""

from __future__ import annotations

from pathlib import Path

import pytest

from litrag.cli import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["/nonexistent/book.txt"], "/nonexistent/book.txt: no such file or folder"),
        (["WILD", "/nonexistent/a.txt", "/nonexistent/b.txt"],
         "/nonexistent/a.txt: no such file or folder (and 1 more)"),
        (["WILD", "--segmenter", "litseg-lite"],  # was the parser's "needs an llm"
         "--segmenter litseg-lite needs an LLM server: set LITRAG_SEGMENT_URL or LITRAG_LLM_URL"),
    ],
)  # fmt: skip
def test_ingest_refuses_bad_arguments_and_makes_nothing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    books_dir: Path,
    flags: list[str],
    message: str,
) -> None:
    for var in ("LITRAG_LLM_URL", "LITRAG_SEGMENT_URL", "LITRAG_LLM_BACKEND", "QDRANT_URL"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("LITRAG_HOME", str(home))
    wild = str(books_dir / "pg215_call_of_the_wild.txt")
    code = main(["ingest", *[wild if f == "WILD" else f for f in flags], "-q"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {message}"), err
    assert not home.exists()  # no store, no cache, no registry
