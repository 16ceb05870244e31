"""``litrag chat`` on bad arguments (issue 34): one ``error:`` line naming the flag or path,
exit 2, checked before the bundled book would be ingested into an empty library."""

from __future__ import annotations

from pathlib import Path

import pytest

from litrag.cli import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "99999"], "--port must be between 1 and 65535, got 99999"),
        (["--port", "0"], "--port must be between 1 and 65535, got 0"),
        (["/nonexistent/book.txt"], "/nonexistent/book.txt: no such file or folder"),
        (["--book-dir", "/nonexistent"], "/nonexistent: no such file or folder"),
        (["--book-dir", "FILE"], "--book-dir FILE is not a folder"),
    ],
)
def test_chat_refuses_bad_arguments_before_any_ingest(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flags: list[str],
    message: str,
) -> None:
    book = tmp_path / "book.txt"
    book.write_text("A book.\n", encoding="utf-8")
    flags = [str(book) if f == "FILE" else f for f in flags]
    message = message.replace("FILE", str(book))
    home = tmp_path / "home"
    monkeypatch.setenv("LITRAG_HOME", str(home))
    code = main(["chat", "--no-llm", *flags])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and err.splitlines() == [f"error: {message}"], err
    assert not (home / "books.json").exists() and not (home / "index").exists()
