"""The repository stands on its own: no file reaches for data outside the checkout.

A clone in an empty folder must run its tests and benchmarks, so every path the code, tests,
benchmarks, scripts and CI use has to resolve inside the repository (or come from a setting).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The old data folder beside the checkout. Its name is held once and every pattern and probe is
# built from it, so this file (which must name the folder to look for it) holds no path to it.
NAME = "shared"
OLD = "/".join(("..", NAME))
WORK = "/".join(("", "work", NAME))
# The folders whose files run; docs are checked for the one literal that misled users before.
RUNNING = ("litrag", "tests", "benchmarks", "scripts", ".ci", "integrations")
SUFFIXES = {".py", ".sh", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".md", ".txt", ""}

# A path that leaves the checkout: a parent folder named in a string, an absolute path under the
# machine's work folder, or a pathlib climb past the repository root.
OUTSIDE = [
    re.compile(re.escape(OLD)),
    re.compile(rf"/work/(?:{NAME}|main)\b"),
    re.compile(rf"""parents\[\d+\]\s*/\s*["']{NAME}["']"""),
    re.compile(rf"""\.parent\s*/\s*["']{NAME}["']"""),
]


def _running_files() -> list[Path]:
    out = []
    for top in RUNNING:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                out.append(path)
    return out


def _climbs_out(path: Path, text: str) -> list[str]:
    """``Path(__file__).resolve().parents[N]`` with N reaching above the repository root."""
    depth = len(path.relative_to(ROOT).parts) - 1  # folders between the file and ROOT
    return [
        m.group(0)
        for m in re.finditer(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]", text)
        if int(m.group(1)) > depth
    ]


def test_no_running_file_refers_outside_the_repository() -> None:
    files = _running_files()
    assert len(files) > 100, "the walk found too few files: is ROOT right?"
    bad = []
    for path in files:
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(errors="replace")
        bad += [
            f"{path.relative_to(ROOT)}: {m.group(0)}" for rx in OUTSIDE for m in rx.finditer(text)
        ]
        bad += [f"{path.relative_to(ROOT)}: {hit}" for hit in _climbs_out(path, text)]
    assert not bad, "paths outside the repository:\n" + "\n".join(bad)


def test_no_document_names_the_old_shared_folder() -> None:
    docs = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "data").glob("**/*.md")]
    bad = [str(p.relative_to(ROOT)) for p in docs if OLD in p.read_text(errors="replace")]
    assert not bad, f"documents that point at {OLD}: {bad}"


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """The patterns are not vacuous: each known way out is caught, a path inside is not."""
    probes = [
        f'DATA = Path("{OLD}/data")',
        f'BOOK = Path("{WORK}/data/books/x.txt")',
        f'D = Path(__file__).resolve().parents[2] / "{NAME}" / "data"',
        f'D = ROOT.parent / "{NAME}" / "data"',
    ]
    for probe in probes:
        assert any(rx.search(probe) for rx in OUTSIDE), probe
    assert not any(rx.search('D = ROOT / "data" / "books"') for rx in OUTSIDE)
    deep = ROOT / "tests" / "x.py"
    assert _climbs_out(deep, "Path(__file__).resolve().parents[2]")
    assert not _climbs_out(deep, "Path(__file__).resolve().parents[1]")


def test_the_data_the_suite_reads_is_in_the_repository() -> None:
    data = ROOT / "data"
    for name in (
        "books/pg215_call_of_the_wild.txt",
        "books/more/pg74_tom_sawyer.txt",
        "books/variants/pg1661_sherlock_ascii.txt",
        "gutenqa/questions.jsonl",
        "gutenqa/emma_lumberchunker_chunks.jsonl",
        "literaryqa/local_books_literaryqa_subset.jsonl",
        "questions/blind_frozen.jsonl",
        "README.md",
    ):
        assert (data / name).is_file(), name
    assert "non-commercial" in (data / "README.md").read_text()
