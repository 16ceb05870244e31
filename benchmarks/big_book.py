"""Peak memory of what `litrag ingest` does to one big book before its chapter bar.

Builds a synthetic book of ``--mb`` MB (Emma's paragraphs repeated under distinct BOOK / CHAPTER
headings, Gutenberg markers, CRLF line ends as in the shared file) and runs, in a fresh process,
``load_book``, ``split_chapters`` and the book's fingerprint hash, printing the process's
high-water mark (VmHWM) after each stage, over what the imports took.

    PYTHONPATH=. python benchmarks/big_book.py --mb 40 [--keep /tmp/big40.txt] [--litrag DIR]

``--litrag DIR`` measures the litrag package found in DIR instead (an older checkout).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "data" / "books" / "pg158_emma.txt"

STAGES = """
import sys, time
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
try:
    from litrag.ingestion.registry import text_digest
except ImportError:  # a litrag from before text_digest: the text joined, then encoded whole
    import hashlib
    def text_digest(*parts):
        return hashlib.sha256("".join(parts).encode("utf-8")).hexdigest()
def hwm():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) / 1024 for ln in f if ln.startswith("VmHWM:"))
base, t = hwm(), time.perf_counter()
def say(stage):
    took = time.perf_counter() - t
    print(f"{stage:<16} peak {hwm() - base:6.0f} MB over the imports  {took:5.1f} s")
book = load_book(sys.argv[1], max_bytes=1 << 30); say("load_book")
docs = split_chapters(book); say("split_chapters")
text_digest(book.text, "\\0", "{}"); say("fingerprint")
print(f"{len(book.text) / 1e6:.1f} M characters, {len(docs)} chapters; imports {base:.0f} MB")
"""


def make_book(dest: Path, mb: float) -> Path:
    src = SOURCE.read_text(encoding="utf-8-sig")
    body = src.split("*** START OF", 1)[1].split("\n", 1)[1].split("*** END OF", 1)[0]
    paras = [
        p
        for p in re.split(r"\r?\n\s*\r?\n", body)
        if len(p.split()) > 30 and not re.match(r"\s*(CHAPTER|VOLUME)", p)
    ]
    out = [
        "Title: Big Emma\r\n\r\nAuthor: Jane Austen\r\n\r\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK BIG EMMA ***\r\n\r\n"
    ]
    size, n = 0, 0
    while size < mb * 1e6:
        head = (
            f"\r\n\r\nBOOK {n // 40 + 1}" if n % 40 == 0 else ""
        ) + f"\r\n\r\nCHAPTER {n % 40 + 1}"
        chunk = (
            head + "\r\n\r\n" + "\r\n\r\n".join(paras[(n * 25 + k) % len(paras)] for k in range(25))
        )
        out.append(chunk)
        size, n = size + len(chunk), n + 1
    out.append("\r\n\r\n*** END OF THE PROJECT GUTENBERG EBOOK BIG EMMA ***\r\n")
    dest.write_bytes("".join(out).encode("utf-8"))
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=40.0)
    ap.add_argument("--keep", type=Path, help="write the book here and keep it")
    ap.add_argument("--litrag", type=Path, help="folder holding the litrag package to measure")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = make_book(args.keep or Path(tmp) / "big.txt", args.mb)
        print(f"{path}: {path.stat().st_size / 1e6:.1f} MB", flush=True)
        env = {**os.environ, "PYTHONPATH": str(args.litrag)} if args.litrag else None
        cmd = [sys.executable, "-c", STAGES, str(path)]
        return subprocess.run(cmd, check=False, env=env, cwd=tmp).returncode


if __name__ == "__main__":
    raise SystemExit(main())
