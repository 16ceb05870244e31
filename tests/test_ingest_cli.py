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


ROUNDS = 20
ROUND = """
import sys
from litrag.cli import main
codes = [main(["ingest", "-q", sys.argv[1]]), main(["ask", "Who sold Buck?", "--no-llm"])]
codes.append(main(["verify"]))
sys.exit(max(codes))
"""


def test_ingest_ask_and_verify_exit_0_round_after_round(books_dir: Path, tmp_path: Path) -> None:
    """Issue 50, bug 14: once in four runs an ingest printed its summary and then died with
    SIGSEGV at exit (a thread of the store outliving the interpreter). Each round is a fresh
    process that ingests a short real excerpt into a new home, asks and verifies, and exits;
    any exit code but 0, a signal included, fails. The three commands run through the CLI's
    own entry in one process: a process per command loads the models three times a round
    (about 16 CPU-seconds a round as it is, so 20 rounds take 4-5 minutes on two quiet cores;
    three processes a round would take over ten)."""
    import os
    import subprocess
    import sys

    raw = (books_dir / "pg215_call_of_the_wild.txt").read_text(encoding="utf-8-sig")
    raw = raw.replace("\r\n", "\n")
    start = raw.index("Chapter I.")
    book = tmp_path / "wild.txt"
    end = raw.index("\n\n", start + 4000)  # about 700 words of chapter I
    book.write_text(raw[:end] + FOOTER, encoding="utf-8")
    script = tmp_path / "round.py"
    script.write_text(ROUND, encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    codes = []
    for n in range(ROUNDS):
        env = {**os.environ, "PYTHONPATH": str(root), "LITRAG_HOME": str(tmp_path / f"h{n}")}
        env["LITRAG_CHARACTERS"] = "0"  # the character model's load is not what is tested
        command = [sys.executable, str(script), str(book)]
        done = subprocess.run(command, env=env, capture_output=True)
        codes.append(done.returncode)
        assert done.returncode == 0, (n, done.returncode, done.stderr[-2000:])
    assert codes == [0] * ROUNDS


FOOTER = "\n*** END OF THE PROJECT GUTENBERG EBOOK ***\n"
