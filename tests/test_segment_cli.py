"""``litrag segment`` on bad arguments (issue 34): one ``error:`` line naming the flag, exit 2,
no blocks written, on a real book through the CLI's own entry (the dead LLM is a real closed
port)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_answer import free_port

from litrag.cli import main


@pytest.fixture
def wild(books_dir: Path) -> str:
    return str(books_dir / "pg215_call_of_the_wild.txt")


def test_segment_refuses_bad_arguments_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, wild: str
) -> None:
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    dead = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "blocks.jsonl"
    cases = [
        (["--chapters", "x"], "--chapters wants chapter indices like 1,2, got 'x'"),  # int()'s
        (["--chapters", "1,99"],  # an empty run that exited 0
         f"--chapters 1,99: {wild} has no chapter 99 (its chapters: 1-7)"),
        (["--out", "/proc/nope/x.jsonl"],  # a FileNotFoundError after the whole run
         "--out /proc/nope/x.jsonl: its folder /proc/nope does not exist"),
        (["--out", str(tmp_path)], f"--out {tmp_path} is a folder; give a file path"),
        (["--max-unit-words", "0"], "--max-unit-words must be at least 1, got 0"),  # pydantic's
        (["--workers", "0"], "--workers must be at least 1, got 0"),
        (["--timeout", "0"], "--timeout must be greater than 0, got 0.0"),
        (["--segmenter", "litseg-lite", "--llm-url", dead, "--model", "m", "--chapters", "1"],
         f"--llm-url: the LLM server at {dead} is unreachable (connection refused)"),
    ]  # fmt: skip
    for flags, message in cases:
        code = main(
            ["segment", wild, "-q", *flags, *([] if "--out" in flags else ["--out", str(out)])]
        )
        stdout, err = capsys.readouterr()
        lines = err.splitlines()
        assert (code, stdout, len(lines)) == (2, "", 1), (flags, err)
        assert lines[0].startswith(f"error: {message}"), (flags, err)
        assert not out.exists(), flags
    # the same book and chapter, sound: the blocks are written
    assert main(["segment", wild, "-q", "--chapters", "1", "--out", str(out)]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) > 1
