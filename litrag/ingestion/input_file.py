"""Reading a file the user named: ``--questions``, ``--catalog``, ``--config``, ``--report``...

Why: such a path may name anything. ``eval retrieval --questions /dev/zero`` read 5.1 GB in 4 s
and ``ingest --dry-run --catalog /dev/zero`` 4.4 GB in 6 s before memory ran out; a FIFO hung
the command for good. As the mirror scan does for a book (``litrag.ingestion.mirror``), what the
path is gets looked at before a byte is read: it is opened without blocking (a FIFO with no
writer opens at once), the open file's ``fstat`` must say a regular file no larger than the
limit, and the read is capped besides (a file that grows meanwhile, or a ``/proc`` file that
claims 0 bytes). Each refusal is one ``InputFileError`` line naming the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from litrag.ingestion.book_bytes import special_kind

# A question set is ~100 KB, GutenQA's whole set a few MB; Gutenberg's pg_catalog.csv ~15 MB.
MAX_INPUT_BYTES = 64 * 1024 * 1024


class InputFileError(ValueError):
    """A named file that cannot be read as one: missing, a folder, a device or FIFO, or larger
    than its limit; the message is one line that names it (``reason`` is the part after it)."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason
        super().__init__(f"{name}: {reason}")


def read_input_bytes(
    path: str | os.PathLike[str], what: str = "file", max_bytes: int = MAX_INPUT_BYTES
) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``; ``InputFileError`` (one
    line starting with ``what`` and the path) for anything else."""
    p = Path(path)
    name = f"{what} {p}" if what else str(p)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise InputFileError(name, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(name, "is a folder, not a file") from None
    except OSError as exc:
        raise InputFileError(name, f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputFileError(name, "is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            kind = special_kind(st.st_mode)
            raise InputFileError(name, f"is not a regular file ({kind}); give a file")
        if st.st_size > max_bytes:
            size = f"is {st.st_size:,} bytes, over the limit of {max_bytes:,} bytes"
            raise InputFileError(name, size)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputFileError(name, f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise InputFileError(name, f"grew past the limit of {max_bytes:,} bytes while read")
    return data


def read_input_text(
    path: str | os.PathLike[str],
    what: str = "file",
    max_bytes: int = MAX_INPUT_BYTES,
    encoding: str = "utf-8",
) -> str:
    """``read_input_bytes`` decoded; ``UnicodeDecodeError`` is left to the caller, which says
    what kind of file it wanted."""
    return read_input_bytes(path, what, max_bytes).decode(encoding)
