"""Check a question file: every gold span is in its book exactly once, normalised the way the
retrieval harness matches spans.

    python benchmarks/questions/check_spans.py data/questions/dev_frozen.jsonl
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from litrag.eval.spans import normalize

DATA = Path(os.environ.get("LITRAG_DATA") or Path(__file__).resolve().parents[2] / "data")


def main(path: str) -> int:
    bad = 0
    rows = [
        json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line
    ]
    for row in rows:
        raw = (DATA / row["book_file"]).read_bytes()
        text = raw.decode("utf-8-sig", errors="replace") if b"\xef\xbb\xbf" in raw[:3] else None
        if text is None:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("latin-1")
        book = normalize(text)
        spans = row["chunk_must_contain"] or []
        for span in [spans] if isinstance(spans, str) else spans:
            n = book.count(normalize(span))
            if n != 1:
                bad += 1
                print(f"{row['id']}: span found {n} times: {span[:80]!r}")
    print(f"{len(rows)} questions, {bad} bad spans")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
