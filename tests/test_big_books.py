"""Big books (issue 34: a 200 MB book held 2.5 GB and said nothing for minutes): loading and
chapter splitting hold the text about twice at their peak, not four times; the fingerprint
hashes it without copying it; the line index of chapter detection is an array, not a list of
strings. The peak is measured in a fresh process on a synthetic 16 MB book."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from litrag.ingestion.chapters import _Lines
from litrag.ingestion.registry import text_digest

PEAK = """
import json, sys
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
def peak():  # this process image's own high-water mark (ru_maxrss keeps the parent's over exec)
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM:"))
base = peak()
book = load_book(sys.argv[1], max_bytes=64 * 2**20)
loaded = peak()
docs = split_chapters(book)
print(json.dumps({"base": base, "loaded": loaded, "split": peak(), "chapters": len(docs),
                  "copy": sys.getsizeof(book.text), "chars": len(book.text)}))
"""


def big_book(src: Path, dest: Path, mb: float) -> Path:
    """``src``'s paragraphs repeated to ``mb`` MB under distinct BOOK / CHAPTER headings, with
    a Gutenberg header, credits and footer."""
    body = src.read_text(encoding="utf-8-sig").split("*** START OF", 1)[1].split("\n", 1)[1]
    body = body.split("*** END OF", 1)[0]
    paras = [p for p in body.split("\n\n") if len(p.split()) > 30]
    out = [
        "Title: Big Alice\n\nAuthor: Lewis Carroll\n\n*** START OF THE PROJECT GUTENBERG "
        "EBOOK BIG ALICE ***\n\nProduced by a test\n\n\n"
    ]
    size, n = 0, 0
    while size < mb * 1e6:
        chunk = f"\n\nCHAPTER {n % 40 + 1}\n\n" + "\n\n".join(paras[n % 5 :: 5][:20])
        if n % 40 == 0:
            chunk = f"\n\nBOOK {n // 40 + 1}\n\n" + chunk
        out.append(chunk)
        size, n = size + len(chunk), n + 1
    out.append("\n\n*** END OF THE PROJECT GUTENBERG EBOOK BIG ALICE ***\n")
    dest.write_text("".join(out), encoding="utf-8")
    return dest


def test_text_digest_is_the_joined_text_hashed() -> None:
    text = "Buck’s 🐕 run\n" * 1000 + "é"
    expected = hashlib.sha256((text + "\0" + '{"a": 1}').encode("utf-8")).hexdigest()
    assert text_digest(text, "\0", '{"a": 1}') == expected
    assert text_digest(text, "\0", '{"a": 1}', piece=7) == expected  # pieces split anywhere
    assert text_digest("", "") == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize("text", ["", "\n", "a", "a\nb", "a\n\nb\n", "\n\nCHAPTER I\n\nx"])
def test_lines_are_the_split_lines(text: str) -> None:
    lines = _Lines(text)
    assert [lines[i] for i in range(len(lines))] == text.split("\n")
    with pytest.raises(IndexError):
        lines[len(lines)]


def test_a_big_book_is_loaded_and_split_holding_its_text_about_twice(
    books_dir: Path, tmp_path: Path
) -> None:
    path = big_book(books_dir / "pg11_alice_in_wonderland.txt", tmp_path / "big.txt", 16)
    run = subprocess.run(
        [sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    m = json.loads(run.stdout)
    assert m["chapters"] > 400 and m["chars"] > 15_000_000
    # raw text and stripped body (the bytes freed first); then the text and its chapters
    copies = (m["split"] - m["base"]) / m["copy"]
    assert copies < 2.6, m
