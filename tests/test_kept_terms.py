"""The kept sentence term ids (``kept_terms``) and the pool scored from them at once.

What a store keeps beside a point must give back exactly the sentences' term ids, and a pool
scored from it must get the very floats the scalar BM25 formula gives window by window (a
``Counter`` a window, ``sum(w * saturation(...))``), on a real book's blocks and children.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from litrag.chunkers.baselines import paragraph_chunker
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.scoring.bm25 import DEFAULT_B, DEFAULT_K1, saturation, term_id, tokenize
from litrag.scoring.kept_terms import (
    WINDOW_SENTENCES,
    kept_arrays,
    pack_terms,
    packed_arrays,
    unpack_terms,
    window_counts,
    window_spans,
    window_starts,
)
from litrag.scoring.window_bm25 import (
    Pieces,
    best_window_scores,
    sentence_terms,
    window_terms,
    windows_of,
)

WILD_FILE = "pg215_call_of_the_wild.txt"


@pytest.fixture(scope="module")
def texts(books_dir: Path) -> list[str]:
    """The Call of the Wild cut in ~200-word paragraphs: real sentences, real lengths."""
    docs = split_chapters(load_book(books_dir / WILD_FILE))
    return [n.text for n in paragraph_chunker(max_words=200)(docs)]


@pytest.fixture(scope="module")
def questions(data_dir: Path) -> list[str]:
    rows = (data_dir / "gutenqa" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(r)["question"] for r in rows if WILD_FILE in r]


def scalar_scores(per_text: Sequence[Pieces], idf: Mapping[int, float]) -> list[float]:
    """The formula one window at a time, as ``best_window_scores`` computed it before."""
    lengths = [n for windows in per_text for _, n in windows]
    avg = sum(lengths) / len(lengths) if lengths and sum(lengths) else 1.0
    out = []
    for windows in per_text:
        best = 0.0
        for counts, n in windows:
            score = sum(
                w * saturation(counts[t], n, avg, DEFAULT_K1, DEFAULT_B)
                for t, w in idf.items()
                if counts[t]
            )
            best = max(best, score)
        out.append(best)
    return out


def test_packed_ids_come_back_exactly(texts):
    cases = [sentence_terms(t) for t in texts[:200]] + [[], [[]], [[], [1, 2], []], [[2**31 - 1]]]
    for terms in cases:
        packed = pack_terms(terms)
        assert len(packed) % 16 == 0 and "=" not in packed  # pool strings join and decode
        assert unpack_terms(packed) == terms
    joined = kept_arrays([pack_terms(t) for t in cases] + [cases[0]])
    assert [(a.tolist(), b.tolist()) for a, b in joined[:-1]] == [
        ([len(s) for s in t], [i for s in t for i in s]) for t in cases
    ]
    for bad in ([5, 0, 0], [1, 3, 2, 7, 8, 9], [0, 0, 0, 0, 0, 0]):  # header says otherwise
        with pytest.raises(ValueError, match="pack_terms"):
            kept_arrays([base64.b64encode(np.asarray(bad, dtype="<u4").tobytes()).decode()])
    with pytest.raises(ValueError, match="pack_terms"):
        unpack_terms(pack_terms([[1]])[:-4])


def test_a_pool_decodes_at_once_as_text_by_text(texts):
    """``packed_arrays`` (whole-array steps) gives what ``kept_arrays`` gives text by text, and
    refuses what it refuses."""
    cases = [sentence_terms(t) for t in texts[:200]] + [[], [[]], [[], [1, 2], []], [[2**31 - 1]]]
    packed = [pack_terms(t) for t in cases]
    counts, lengths, ids = packed_arrays(packed)
    one_by_one = kept_arrays(packed)
    assert counts.tolist() == [len(a) for a, _ in one_by_one]
    assert lengths.tolist() == [x for a, _ in one_by_one for x in a.tolist()]
    assert ids.tolist() == [x for _, b in one_by_one for x in b.tolist()]
    for bad in ([5, 0, 0], [1, 3, 2, 7, 8, 9], [0, 0, 0, 0, 0, 0], [1, 1, 1]):
        wrong = base64.b64encode(np.asarray(bad, dtype="<u4").tobytes()).decode()
        for decode in (kept_arrays, packed_arrays):
            with pytest.raises(ValueError, match="pack_terms"):
                decode([packed[0], wrong])


def test_window_spans_are_each_texts_window_starts_end_to_end():
    rng = random.Random(3)
    for counts in [[n] for n in range(40)] + [[rng.randrange(30) for _ in range(50)]]:
        begin, end, per = window_spans(np.asarray(counts))
        want_begin, want_end, first = [], [], 0
        for n in counts:
            starts = window_starts(n)
            want_begin += [first + a for a in starts]
            want_end += [first + min(a + WINDOW_SENTENCES, n) for a in starts]
            first += n
        assert begin.tolist() == want_begin and end.tolist() == want_end
        assert per.tolist() == [len(window_starts(n)) for n in counts]


def test_window_counts_are_the_counters_of_the_windows(texts):
    kept = [sentence_terms(t) for t in texts[:60]]
    terms = sorted({t for k in kept[:5] for s in k for t in s})[:12]
    counts, sizes, per_text = window_counts([pack_terms(k) for k in kept], terms)
    at = 0
    for k, n in zip(kept, per_text, strict=True):
        windows = windows_of(k)
        assert n == len(windows)
        for (counter, size), row, got in zip(
            windows, counts[at : at + n].tolist(), sizes[at : at + n].tolist(), strict=True
        ):
            assert got == size and row == [counter[t] for t in terms]
        at += n
    assert at == len(sizes)


def test_the_pool_scores_as_the_scalar_formula_on_a_real_book(texts, questions):
    """Exact equality, for every question: packed, the lists of the version before, cut from
    the text (``None``), and all three mixed in one pool."""
    rng = random.Random(7)
    assert len(questions) >= 20
    for q in questions:
        pool = rng.sample(texts, 100)
        kept = [sentence_terms(t) for t in pool]
        terms = list(dict.fromkeys(term_id(t) for t in tokenize(q)))
        idf = {t: rng.uniform(0.1, 6.0) for t in terms}
        want = scalar_scores([window_terms(t) for t in pool], idf)
        assert want == scalar_scores([windows_of(k) for k in kept], idf)
        assert any(want)
        packed = [pack_terms(k) for k in kept]
        mixed = [[p, k, None][i % 3] for i, (p, k) in enumerate(zip(packed, kept, strict=True))]
        for stored in (packed, kept, mixed, [None] * len(pool)):
            assert best_window_scores(pool, idf, stored=stored) == want


def test_edge_cases_score_as_the_scalar_formula():
    idf = {term_id("buck"): 2.5, term_id("dog"): 0.7}
    texts = ["", "   ", "Buck.", "No full stop here", "Buck ran. The dog ran. Buck. Dog dog."]
    kept = [sentence_terms(t) for t in texts]
    want = scalar_scores([windows_of(k) for k in kept], idf)
    assert want[-1] > 0
    assert best_window_scores(texts, idf, stored=[pack_terms(k) for k in kept]) == want
    assert best_window_scores(texts, {}, stored=[pack_terms(k) for k in kept]) == [0.0] * 5
    assert best_window_scores([], idf, stored=[]) == []
    with pytest.raises(ValueError, match="one kept entry"):
        best_window_scores(texts, idf, stored=kept[:2])
