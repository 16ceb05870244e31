"""Free disk space, checked before writing what a full disk would turn into a crash.

Why: the embedded store maps files it has sized ahead (its write-ahead log segments) and writes
into them through memory. On a filesystem that allocates lazily (tmpfs, and any sparse file) a
full disk then surfaces as SIGBUS, "Bus error" and exit 135 with no message, and the store's
collection half made by such a crash kept doing so after some space was freed. Checking the free
space against what will be written, first, gives one line that names the disk and the amount.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

MB = 1024 * 1024


class DiskSpaceError(OSError):
    """Too little free space on the disk of ``path`` for what is about to be written."""

    def __init__(self, path: Path, free: int, need: int, what: str) -> None:
        self.path, self.free, self.need = path, free, need
        super().__init__(
            errno.ENOSPC,
            f"the disk of {path} has {_mb(free)} free, but {what} needs about {_mb(need)}: "
            "free some space (or set LITRAG_HOME to a folder on a larger disk) and rerun",
        )

    def __str__(self) -> str:
        return str(self.strerror)


def _mb(n: int) -> str:
    return f"{n / MB:,.1f} MB" if n < 10 * MB else f"{n / MB:,.0f} MB"


def existing_parent(path: Path) -> Path:
    """``path`` or its nearest parent that exists (the disk a new folder will be made on)."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the disk of ``path``."""
    return shutil.disk_usage(existing_parent(path)).free


# Filesystems that give a memory-mapped file its pages when it is sized (measured on tmpfs:
# each 32 MiB chunk of a new Edge segment is allocated whole, 192 MB for a library of two
# chapters that takes 2 MB on ext4, where the same files stay sparse).
_EAGER = ("tmpfs", "ramfs", "shm", "hugetlbfs")


def filesystem_type(path: Path) -> str:
    """The type of the filesystem ``path`` lies on (``tmpfs``, ``ext4``), from the mount table;
    "" where it cannot be read."""
    real = os.path.realpath(existing_parent(path))
    best, kind = "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                fields = line.split()
                if " - " not in line or len(fields) < 5:
                    continue
                point = fields[4].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, line.split(" - ", 1)[1].split()[0]
    except OSError:
        return ""
    return kind


def allocates_eagerly(path: Path) -> bool:
    """Whether the disk of ``path`` allocates a memory-mapped store file whole (tmpfs)."""
    return filesystem_type(path) in _EAGER


def need_space(path: Path, need: int, what: str) -> None:
    """``DiskSpaceError`` when the disk of ``path`` has less than ``need`` bytes free."""
    free = free_bytes(path)
    if free < need:
        raise DiskSpaceError(existing_parent(path), free, need, what)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (an ``OSError``, or a C++ library's message) says the disk is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    return "no space left" in text or "disk quota" in text
