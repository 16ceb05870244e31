"""Files named on the command line (issue 50, bug 5): ``--questions``, ``--catalog``,
``--config``, ``--report`` get the mirror scan's treatment. ``eval retrieval --questions
/dev/zero`` read 5.1 GB in 4 s and a FIFO hung the command; now what the path is, and its size,
are looked at before a byte is read, and each refusal is one line naming the file."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from litrag.ingestion.input_file import InputFileError, read_input_bytes, read_input_text

BOOK = Path(__file__).resolve().parents[1] / "data" / "books" / "pg215_call_of_the_wild.txt"
# (command, where the file goes); {} is the special file
COMMANDS = [
    (["eval", "retrieval", "--questions", "{}"], "question file {}"),
    (["eval", "answers", "--questions", "{}"], "question file {}"),
    (["ingest", "--dry-run", "--catalog", "{}", str(BOOK)], "{}"),
    (["distill", "config", "--config", "{}"], "config file {} cannot be read"),
    (["eval", "retrieval", "--report", "{}.md"], "--report {}.md"),
]


def _limit_memory() -> None:
    """A run that reads /dev/zero whole fails here, not by filling the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def _special(kind: str, tmp_path: Path, suffix: str) -> str:
    if kind == "device":
        return "/dev/zero" if not suffix else _linked_device(tmp_path, suffix)
    fifo = tmp_path / f"pipe{suffix}"
    os.mkfifo(fifo)
    return str(fifo)


def _linked_device(tmp_path: Path, suffix: str) -> str:
    link = tmp_path / f"zero{suffix}"
    link.symlink_to("/dev/zero")
    return str(link)


@pytest.mark.parametrize("kind", ["device", "fifo"])
@pytest.mark.parametrize(("argv", "named"), COMMANDS, ids=lambda v: "-".join(v[:2]))
def test_a_special_file_is_refused_in_one_line_before_it_is_read(argv, named, kind, tmp_path):
    suffix = ".md" if argv[-1] == "{}.md" else ""
    path = _special(kind, tmp_path, suffix).removesuffix(suffix)
    argv = [a.replace("{}", path) for a in argv]
    env = {
        **os.environ,
        "LITRAG_HOME": str(tmp_path / "home"),
        "PYTHONPATH": ":".join(sys.path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "litrag.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,  # a FIFO held the command for good
        preexec_fn=_limit_memory,
    )
    what = "a device" if kind == "device" else "a FIFO (named pipe)"
    line = f"error: {named.replace('{}', path)}: is not a regular file ({what}); give a file"
    errors = [x for x in done.stderr.splitlines() if x.startswith("error")]
    assert (done.returncode, errors) == (2, [line]), done.stderr[-1500:]


def test_the_reader_looks_at_type_and_size_before_reading(tmp_path):
    sparse = tmp_path / "huge.jsonl"
    with sparse.open("wb") as f:
        f.truncate(200 << 20)  # 200 MB that take no disk: refused by the size alone
    with pytest.raises(InputFileError) as caught:
        read_input_bytes(sparse, "question file", max_bytes=64 << 20)
    assert str(caught.value) == (
        f"question file {sparse}: is 209,715,200 bytes, over the limit of 67,108,864 bytes"
    )
    for path, reason in (
        (tmp_path / "missing.jsonl", "no such file"),
        (tmp_path, "is a folder, not a file"),
    ):
        with pytest.raises(InputFileError) as caught:
            read_input_bytes(path, "question file")
        assert caught.value.reason == reason and str(path) in str(caught.value)
    # a /proc file says 0 bytes and has more: read, capped
    assert read_input_text("/proc/self/status").startswith("Name:")
    with pytest.raises(InputFileError, match="grew past the limit of 10 bytes"):
        read_input_bytes("/proc/self/status", "", max_bytes=10)
    plain = tmp_path / "q.jsonl"
    plain.write_text('{"a": 1}\n', encoding="utf-8")
    assert read_input_bytes(plain) == b'{"a": 1}\n'
