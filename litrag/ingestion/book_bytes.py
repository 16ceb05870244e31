"""A book file's bytes: a plain text, or the ``.txt`` inside a Gutenberg ``.zip``, read in place.

Both the loader (``gutenberg.load_book``) and mirror discovery (``mirror.classify``) read book
files; what they share lives here, with ``BookLoadError``, the one error a file that cannot be
loaded as a book raises.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from pathlib import Path

DEFAULT_MAX_BYTES = 16 * 1024 * 1024  # the largest Gutenberg novels are under 6 MB


class BookLoadError(ValueError):
    """A file that cannot be loaded as a book; the message names the file and the reason."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


def read_book_bytes(p: Path, max_bytes: int) -> bytes:
    """The bytes of the book at ``p`` (a zip's text member for a ``.zip``), at most
    ``max_bytes``; ``BookLoadError`` for a folder, a missing, unreadable, empty or too big file."""
    try:
        st = p.stat()
        size = st.st_size
        if stat.S_ISDIR(st.st_mode):
            raise BookLoadError(p, "is a folder, not a file (use iter_book_files for folders)")
        if not stat.S_ISREG(st.st_mode):  # /dev/zero would never end, a FIFO never start
            kind = special_kind(st.st_mode)
            raise BookLoadError(p, f"is not a regular file ({kind}): not a book")
        if size > max_bytes:
            raise BookLoadError(
                p,
                f"file is {size:,} bytes, over the max_bytes limit of {max_bytes:,} bytes; "
                "raise the limit with `litrag ingest --max-mb` (or load_book(max_bytes=...))",
            )
        # A mirror's 12345-0.zip: its text, read in place.
        zipped = p.suffix.lower() == ".zip"
        data = read_zip_text(p, max_bytes) if zipped else read_capped(p, max_bytes)
    except FileNotFoundError:
        raise BookLoadError(p, "no such file") from None
    except OSError as e:
        raise BookLoadError(p, f"cannot read file ({e.strerror or e})") from None
    if not data:
        raise BookLoadError(p, "empty file")
    return data


def special_kind(mode: int) -> str:
    """What a file that is not a regular file is: a FIFO, a device, a socket."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def read_capped(p: Path, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of ``p``; ``BookLoadError`` when there is more (a file that grew
    after its size was checked is never read without end)."""
    with p.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BookLoadError(
            p, f"file holds over {max_bytes:,} bytes (it grew while being read): not loaded"
        )
    return data


def read_zip_text(path: Path, max_bytes: int) -> bytes:
    """The book text inside a Gutenberg ``.zip``: its .txt member (the largest, if several)."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = [i for i in zf.infolist() if i.filename.lower().endswith(".txt")]
            if not members:
                raise BookLoadError(path, "zip archive holds no .txt file")
            info = max(members, key=lambda i: i.file_size)
            if info.file_size > max_bytes:
                raise BookLoadError(
                    path,
                    f"{info.filename} in the archive is {info.file_size:,} bytes, over the "
                    f"max_bytes limit of {max_bytes:,} bytes; raise it with "
                    "`litrag ingest --max-mb`",
                )
            if info.flag_bits & 0x1:  # zipfile would ask for a password (a RuntimeError)
                raise BookLoadError(
                    path, f"zip archive is encrypted ({info.filename} needs a password): not read"
                )
            return zf.read(info)
    except zipfile.BadZipFile as exc:
        raise BookLoadError(path, f"damaged zip archive ({exc})") from None
    except (zlib.error, EOFError) as exc:  # a deflate stream cut short or corrupted
        raise BookLoadError(
            path, f"damaged zip archive (its text does not inflate: {exc})"
        ) from None
    except NotImplementedError as exc:  # a compression method zipfile has no codec for
        raise BookLoadError(path, f"zip archive uses an unsupported compression ({exc})") from None


def check_zip(path: Path, max_bytes: int) -> None:
    """Read a ``.zip``'s book text once, for nothing but its errors (``BookLoadError``):
    what ``ingest`` does for a zip named on its command line before the library is opened,
    so that a damaged or encrypted archive changes nothing there."""
    read_zip_text(path, max_bytes)


def zip_has_text(path: Path) -> bool:
    """Whether a ``.zip`` holds a .txt member; True for a damaged or unreadable one, so that
    loading names what is wrong with it, in one line."""
    try:
        with zipfile.ZipFile(path) as zf:
            return any(n.lower().endswith(".txt") for n in zf.namelist())
    except (zipfile.BadZipFile, OSError):
        return True
