"""Disk faults a user's machine has: a full tmpfs, a read-only home, a full disk during the first
OpenVINO conversion (issue 50, bugs 6 and 8).

Each runs real ``litrag`` commands in a private mount namespace (``unshare -rm``: a user
namespace, so no root is needed) where a small tmpfs, or a read-only bind mount of a real
library, stands for the user's disk; skipped where the kernel allows no such namespace."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_integrity import first_chapter

ROOT = Path(__file__).resolve().parents[1]


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces(), reason="needs `unshare -rm` and tmpfs mounts")


@pytest.fixture(scope="module")
def book(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first chapter of The Call of the Wild."""
    return first_chapter(books_dir, tmp_path_factory.mktemp("books") / "wild.txt")


def in_namespace(script: str, tmp_path: Path) -> list[tuple[int, str]]:
    """Run ``script`` (sh) in a mount namespace of its own; each ``litrag ...`` line in it runs
    the CLI of this checkout. Returns (exit code, stderr's last line) per ``litrag`` line."""
    lines = []
    for line in script.strip().splitlines():
        line = line.strip()
        if line.startswith("litrag "):
            n = len(lines)
            err = tmp_path / f"err{n}"
            cli = f"{shlex.quote(sys.executable)} -m litrag.cli {line[len('litrag ') :]}"
            line = f"rc=0; {cli} >/dev/null 2>{err} || rc=$?; echo $rc > {tmp_path / f'rc{n}'}"
            lines.append(line)
        else:
            lines.append(line)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITRAG_EMBED_BACKEND": "torch"}
    env.pop("LITRAG_HOME", None)
    subprocess.run(["unshare", "-rm", "sh", "-ec", "\n".join(lines)], env=env, check=True)
    out = []
    for n in range(len(lines)):
        rc = tmp_path / f"rc{n}"
        if rc.is_file():
            err = (tmp_path / f"err{n}").read_text(encoding="utf-8").strip().splitlines()
            out.append((int(rc.read_text()), err[-1] if err else ""))
    return out


def test_a_full_tmpfs_is_one_line_and_ingest_works_once_space_is_freed(book, tmp_path):
    """Bug 6: ingesting onto a nearly full tmpfs ended in "Bus error" (exit 135, nothing said):
    the store writes files it sized ahead through memory maps. Now it is refused before
    anything is written, in one line naming the disk, its free space and what is needed; once
    space is freed the same commands work."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    home = mnt / "home"
    results = in_namespace(
        f"""
        mount -t tmpfs -o size=250m tmpfs {mnt}
        head -c 150M /dev/zero > {mnt}/ballast
        export LITRAG_HOME={home}
        litrag ingest -q {book}
        litrag verify
        rm {mnt}/ballast
        litrag ingest -q {book}
        litrag verify
        litrag ask 'Who stole Buck?' --no-llm
        """,
        tmp_path,
    )
    (code, line), *after = results
    assert code == 2, results
    assert line.startswith(f"error: the disk of {mnt} has ")  # home: not made yet
    assert " MB free, but ingesting 1 book " in line
    assert "needs about " in line and "free some space" in line
    assert [c for c, _ in after] == [0, 0, 0, 0], after


def test_a_read_only_home_is_said_to_be_read_only_not_damaged(book, tmp_path):
    """Bug 8: on a read-only filesystem every command said the store was damaged and advised a
    repair that could only fail. ``books`` lists the library; what opens the store says the
    folder is read-only (the engine opens its files for writing even to search), nothing else."""
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITRAG_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ingest", "-q", str(book)], env=env, text=True
    )
    assert done.returncode == 0
    results = in_namespace(
        f"""
        mount --bind {home} {home}
        mount -o remount,bind,ro {home}
        export LITRAG_HOME={home}
        litrag books
        litrag ask 'Who stole Buck?' --no-llm
        litrag verify
        litrag verify --repair
        """,
        tmp_path,
    )
    assert results[0][0] == 0, results
    for code, line in results[1:]:
        assert code in (1, 2), results
        assert line.startswith(f"error: the library's store {home}/index/litrag is on a read-only")
        assert "damaged" not in line.replace("nothing is damaged", ""), line


def test_a_full_disk_during_the_first_openvino_conversion_names_the_disk(tmp_path):
    """Issue 50: the first OpenVINO conversion of the embedder on a full disk said
    ``basic_ios::clear: iostream error``; it names the disk, what it has and what it needs."""
    from litrag.models.embedders import minilm_path

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    code = (
        "import sys; from litrag.cli import _known_error; "
        "from litrag.models.openvino import converted_model\n"
        "try:\n"
        f"    converted_model({str(minilm_path())!r}, {str(mnt / 'cache')!r})\n"
        "except Exception as exc:\n"
        "    print(_known_error(exc) or repr(exc), file=sys.stderr); sys.exit(2)\n"
    )
    script = tmp_path / "convert.py"
    script.write_text(code, encoding="utf-8")
    err = tmp_path / "err"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f"mount -t tmpfs -o size=20m tmpfs {mnt} && {sys.executable} {script} 2>{err}",
        ],
        env=env,
    )
    line = err.read_text(encoding="utf-8").strip().splitlines()[-1]
    assert line.startswith(f"the disk of {mnt}") and "MB free, but the OpenVINO conversion" in line
    assert "free some space" in line
