"""Draw the sentence positions behind ``blind_frozen.jsonl``, blind to any chunker.

Question sets written by reading retrieved passages, or by looking at a chunker's blocks, lean
toward evidence that already sits well inside one block; a set meant to compare chunkers must
not. So the evidence positions are drawn from the text alone: for each book this script strips
the Project Gutenberg header and footer, skips the table of contents, splits the body into
sentences with a plain regex and samples 24 of them uniformly at random with a fixed seed
(``random.Random(20261203 + book number)``). No chunker, index or retrieval output is read: the
script uses the standard library only and imports nothing from ``litrag``.

For each draw it prints the book, the sample index, the character offset of the sentence in the
raw file (an index into the text as ``check_spans.py`` decodes it: BOM dropped, CRLF kept), the
chapter it falls in, and the sentence with two sentences of context either side.

    python3 benchmarks/questions/blind_positions.py [books dir]   # default: $LITRAG_DATA/books
"""

from __future__ import annotations

import os
import random
import re
import sys
from pathlib import Path

BOOKS = (
    "pg11_alice_in_wonderland.txt",
    "pg84_frankenstein.txt",
    "pg158_emma.txt",
    "pg215_call_of_the_wild.txt",
    "pg1342_pride_and_prejudice.txt",
    "pg1661_adventures_of_sherlock_holmes.txt",
)
SEED = 20261203
PER_BOOK = 24
CONTEXT = 2

# A chapter-level heading line: "CHAPTER IV", "Chapter 12", "Letter 3", "ADVENTURE I. ...",
# "VII. THE ADVENTURE OF ..." (the Holmes stories after the sixth).
HEADING = re.compile(
    r"^[ \t]*(?:(?:CHAPTER|Chapter|LETTER|Letter|ADVENTURE)[ \t]+[IVXLC\d]+\b|"
    r"[IVXLC]+\.[ \t]+THE ADVENTURE\b)[^\r\n]*",
    re.M,
)
# Lines that are structure, not prose: headings, "VOLUME II", a part number such as "II.".
STRUCTURE = re.compile(r"^(?:VOLUME [IVX]+|[IVXLC]+\.?)$")
PARAGRAPH_BREAK = re.compile(r"\r?\n[ \t]*\r?\n")
# A sentence ends at . ! or ? (plus closing quotes or brackets) before a capital or a digit.
SENTENCE_END = re.compile(r"[.!?]+[’”\"')\]_]*(?=\s+[‘“\"'(\[_]*[A-Z0-9])")
ABBREVIATIONS = {"mr", "mrs", "dr", "st", "messrs", "mme", "mlle", "capt", "col", "rev", "esq"}


def read_book(path: Path) -> str:
    """The file's text as check_spans.py decodes it (UTF-8 without BOM, else Latin-1)."""
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def body_span(text: str) -> tuple[int, int]:
    """Offsets of the text between the '*** START OF' and '*** END OF' lines.

    The "End of (the) Project Gutenberg EBook of ..." line just above the footer is cut too.
    """
    start = re.search(r"^\*\*\* ?START OF[^\n]*\n", text, re.M)
    end = re.search(r"^\*\*\* ?END OF", text, re.M)
    begin, stop = (start.end() if start else 0), (end.start() if end else len(text))
    trailer = re.search(r"^End of (?:the )?Project Gutenberg", text[begin:stop], re.M)
    return begin, (begin + trailer.start() if trailer else stop)


def story_start(text: str, begin: int, end: int) -> int:
    """Where the story starts (its first heading): after the table of contents, if any.

    The first chapter heading marks the start. If the same heading comes again with only short
    lines in between, the first one was a table of contents entry and the second one starts the
    story. Without any heading, the first 3% of the body is skipped.
    """
    first = HEADING.search(text, begin, end)
    if first is None:
        return begin + (end - begin) * 3 // 100
    key = " ".join(first.group(0).split()).lower()
    for later in HEADING.finditer(text, first.end(), end):
        if " ".join(later.group(0).split()).lower() != key:
            continue
        between = text[first.end() : later.start()].splitlines()
        if all(len(line.strip()) <= 60 for line in between):
            return later.start()
        break
    return first.start()


def sentences(text: str, begin: int, end: int) -> list[tuple[int, str]]:
    """(offset, sentence) for every prose sentence in text[begin:end]."""
    out: list[tuple[int, str]] = []
    pos = begin
    for brk in [*PARAGRAPH_BREAK.finditer(text, begin, end), None]:
        stop = brk.start() if brk else end
        para = text[pos:stop]
        para_at = pos
        pos = brk.end() if brk else end
        flat = " ".join(para.split())
        if not flat or STRUCTURE.match(flat) or HEADING.match(para.strip()):
            continue
        cut = 0
        for m in SENTENCE_END.finditer(para):
            word = re.search(r"(\w+)\W*$", para[cut : m.start() + 1])
            if word and word.group(1).lower() in ABBREVIATIONS and para[m.start()] == ".":
                continue
            out.extend(_piece(para, para_at, cut, m.end()))
            cut = m.end()
        out.extend(_piece(para, para_at, cut, len(para)))
    return out


def _piece(para: str, para_at: int, a: int, b: int) -> list[tuple[int, str]]:
    chunk = para[a:b]
    lead = len(chunk) - len(chunk.lstrip())
    flat = " ".join(chunk.split())
    return [(para_at + a + lead, flat)] if flat else []


def chapter_at(text: str, begin: int, offset: int) -> str:
    """The last chapter heading before offset, with its running number among such headings."""
    label, number, letters = "(none)", 0, 0
    for m in HEADING.finditer(text, begin, offset):
        head = " ".join(m.group(0).split())
        if head.lower().startswith("letter"):
            letters += 1
            label = f"{head} (letter {letters})"
        else:
            number += 1
            label = f"{head} (chapter {number})"
    return label


def main(books_dir: str) -> int:
    for name in BOOKS:
        text = read_book(Path(books_dir) / name)
        number = int(re.match(r"pg(\d+)_", name).group(1))
        begin, end = body_span(text)
        start = story_start(text, begin, end)
        sents = sentences(text, start, end)
        rng = random.Random(SEED + number)
        picks = sorted(rng.sample(range(len(sents)), PER_BOOK))
        print(f"#### {name}: {len(sents)} sentences from offset {start}, seed {SEED + number}")
        for k, i in enumerate(picks, 1):
            offset = sents[i][0]
            print(f"\n== {name} sample {k:02d} sentence {i} offset {offset}")
            print(f"   chapter: {chapter_at(text, start, offset)}")
            for j in range(max(0, i - CONTEXT), min(len(sents), i + CONTEXT + 1)):
                mark = ">>" if j == i else f"{j - i:+d}"
                print(f"   [{mark}] {sents[j][1]}")
        print()
    return 0


if __name__ == "__main__":
    data = os.environ.get("LITRAG_DATA") or Path(__file__).resolve().parents[2] / "data"
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else str(Path(data) / "books")))
