"""Draw the evidence positions behind ``more_frozen.jsonl``, blind to any chunker.

The sibling of ``blind_positions.py`` for the four novels of ``data/books/more`` (Tom Sawyer,
The War of the Worlds, Dorian Gray, A Christmas Carol), which no setting was tuned on. It reads
the text alone (standard library only, nothing from ``litrag``): for each book it strips the
Project Gutenberg header and footer, starts at the book's first heading in the body (past the
table of contents and any preface), and draws 15 character offsets uniformly over the rest with
``random.Random(20261206 + book number)``. Each offset picks the sentence it falls in (or, in a
heading or blank line, the last sentence before it); the script prints the drawn offset (an
index into the text as ``check_spans.py`` decodes it: BOM dropped, CRLF kept), the chapter, and
the sentence with two sentences of context either side.

Character offsets rather than sentence indices: a position weighs as much text as it covers, so
long descriptive sentences are drawn as often as their length and short dialogue lines less.

    python3 benchmarks/questions/more_positions.py [books/more dir]   # default: data/books/more
"""

from __future__ import annotations

import bisect
import os
import random
import re
import sys
from pathlib import Path

from blind_positions import body_span, read_book, sentences

SEED = 20261206
PER_BOOK = 15
CONTEXT = 2

# Per book: where the story starts (its first heading in the body, after the contents and any
# preface) and the pattern of its chapter headings (numbered in order through the book).
BOOKS: dict[str, tuple[str, str]] = {
    "pg74_tom_sawyer.txt": (r"^CHAPTER I\r?$", r"^CHAPTER [IVXL]+\r?$"),
    "pg36_war_of_the_worlds.txt": (r"^BOOK ONE\r?$", r"^[IVXL]+\.\r?$"),
    "pg174_dorian_gray.txt": (r"^CHAPTER 1\r?$", r"^CHAPTER \d+\r?$"),
    "pg46_christmas_carol.txt": (r"^STAVE I:", r"^STAVE [IVX]+:"),
}


def draws(text: str, name: str) -> tuple[int, list[tuple[int, int, int]]]:
    """(story start, [(drawn offset, sentence index, chapter number)]) for one book."""
    start_pat, chapter_pat = BOOKS[name]
    begin, end = body_span(text)
    start = re.compile(start_pat, re.M).search(text, begin, end).start()
    sents = sentences(text, start, end)
    starts = [s[0] for s in sents]
    chapters = [m.start() for m in re.compile(chapter_pat, re.M).finditer(text, start, end)]
    number = int(re.match(r"pg(\d+)_", name).group(1))
    rng = random.Random(SEED + number)
    offsets = sorted(rng.randrange(start, end) for _ in range(PER_BOOK))
    out = []
    for off in offsets:
        i = max(0, bisect.bisect_right(starts, off) - 1)
        out.append((off, i, bisect.bisect_right(chapters, off)))
    return start, out


def main(books_dir: str) -> int:
    for name in BOOKS:
        text = read_book(Path(books_dir) / name)
        start, picked = draws(text, name)
        _, end = body_span(text)
        sents = sentences(text, start, end)
        number = int(re.match(r"pg(\d+)_", name).group(1))
        print(f"#### {name}: offsets {start}..{end}, seed {SEED + number}")
        print("   drawn: " + ", ".join(str(off) for off, _, _ in picked))
        for k, (off, i, chapter) in enumerate(picked, 1):
            print(f"\n== {name} sample {k:02d} offset {off} (sentence at {sents[i][0]})")
            print(f"   chapter: {chapter}")
            for j in range(max(0, i - CONTEXT), min(len(sents), i + CONTEXT + 1)):
                mark = ">>" if j == i else f"{j - i:+d}"
                print(f"   [{mark}] {sents[j][1]}")
        print()
    return 0


if __name__ == "__main__":
    data = os.environ.get("LITRAG_DATA") or Path(__file__).resolve().parents[2] / "data"
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else str(Path(data) / "books" / "more")))
