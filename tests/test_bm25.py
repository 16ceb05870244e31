"""BM25: tokens, sparse vectors, and the in-memory index against a brute-force reference."""

from __future__ import annotations

import json
import math
import zlib
from collections import Counter
from pathlib import Path

import pytest

from litrag.chunkers.baselines import ParagraphNodeParser
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.scoring.bm25 import (
    DEFAULT_AVG_LEN,
    BM25Encoder,
    BM25Index,
    doc_fn,
    query_fn,
    term_id,
    tokenize,
)

K1, B = 1.2, 0.75


def test_tokenize_stems_and_drops_stop_words() -> None:
    assert tokenize("The Quick-running foxes’ _jumps_!") == ["quick", "run", "fox", "jump"]
    assert tokenize("Emma’s") == tokenize("Emma's") == tokenize("EMMA'S") == ["emma"]
    assert tokenize("“Don’t,” said he--and she") == ["said"]
    assert tokenize("well—said") == tokenize("well--said") == ["well", "said"]
    assert tokenize("") == [] and tokenize("the of and") == []


def test_term_ids_are_stable_31_bit() -> None:
    # pinned: changing the scheme silently breaks every stored sparse index
    assert term_id("emma") == zlib.crc32(b"emma") & 0x7FFFFFFF == 123_061_370
    ids = {term_id(t) for t in tokenize("Emma Woodhouse, handsome, clever, and rich")}
    assert all(0 <= i < 2**31 for i in ids) and len(ids) == 5


def test_doc_vector_values() -> None:
    enc = BM25Encoder(avg_len=3.0)
    ids, values = enc.doc_vector("whale whale ship")
    weights = dict(zip(ids, values, strict=True))
    # |d| = avglen = 3: tf * 2.2 / (tf + 1.2)
    assert weights[term_id("whale")] == pytest.approx(2 * 2.2 / 3.2)
    assert weights[term_id("ship")] == pytest.approx(1.0)
    assert ids == sorted(ids)
    # longer than average: lower weight for the same tf
    long_ids, long_vals = BM25Encoder(avg_len=1.0).doc_vector("whale whale ship")
    assert dict(zip(long_ids, long_vals, strict=True))[term_id("ship")] < 1.0


def test_doc_fn_and_query_fn_shapes() -> None:
    texts = ["The whale, the whale!", "", "A ship at sea."]
    indices, values = doc_fn(texts)
    assert len(indices) == len(values) == 3
    assert indices[1] == [] and values[1] == []
    assert len(indices[0]) == 1 and values[0][0] == pytest.approx(
        2 * 2.2 / (2 + K1 * (1 - B + B * 2 / DEFAULT_AVG_LEN))
    )
    q_idx, q_val = query_fn(["whale whale ship?", "the"])
    assert sorted(q_idx[0]) == sorted({term_id("whale"), term_id("ship")})
    assert q_val[0] == [1.0, 1.0] and q_idx[1] == [] and q_val[1] == []


def test_bm25_encoder_rejects_bad_avg_len() -> None:
    with pytest.raises(ValueError):
        BM25Encoder(avg_len=0)


def _reference(docs: list[list[str]], query: list[str]) -> list[float]:
    """Textbook Lucene BM25 over string terms, written independently of the index."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in set(query):
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * len(d) / avgdl))
        out.append(s)
    return out


@pytest.fixture(scope="module")
def pride(data_dir: Path) -> tuple[list[str], list[str]]:
    """Pride and Prejudice's paragraphs and its GutenQA questions."""
    book = "pg1342_pride_and_prejudice.txt"
    docs = split_chapters(load_book(data_dir / "books" / book))
    paragraphs = [n.get_content() for n in ParagraphNodeParser().get_nodes_from_documents(docs)]
    with (data_dir / "gutenqa" / "questions.jsonl").open(encoding="utf-8") as f:
        qs = [json.loads(line) for line in f]
    return paragraphs, [q["question"] for q in qs if q["book_file"].endswith(book)]


def test_index_matches_brute_force_reference(pride: tuple[list[str], list[str]]) -> None:
    paragraphs, questions = pride
    assert len(paragraphs) > 2000 and len(questions) == 30
    index = BM25Index(paragraphs)
    tokens = [tokenize(p) for p in paragraphs]
    for q in questions:
        ours = index.scores(q)
        ref = _reference(tokens, tokenize(q))
        assert ours == pytest.approx(ref, rel=1e-9, abs=1e-12)
        ranked = [i for i, _ in index.search(q, top_k=20)]
        assert ranked == sorted(range(len(ref)), key=lambda i: (-ref[i], i))[:20]


def test_index_equals_qdrant_style_dot_product(pride: tuple[list[str], list[str]]) -> None:
    """doc_fn vectors . (query_fn weights x IDF modifier) is what Qdrant computes."""
    paragraphs, questions = pride
    docs = paragraphs[:400]
    index = BM25Index(docs)
    enc = BM25Encoder(avg_len=index.encoder.avg_len)
    d_idx, d_val = enc.doc_fn(docs)
    df = Counter(i for row in d_idx for i in row)
    q_idx, q_val = enc.query_fn(questions)
    for q, qi, qv in zip(questions, q_idx, q_val, strict=True):
        idf = {t: math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5)) for t in qi if df[t]}
        qw = {t: w * idf[t] for t, w in zip(qi, qv, strict=True) if t in idf}
        dot = [
            sum(v * qw.get(t, 0.0) for t, v in zip(di, dv, strict=True))
            for di, dv in zip(d_idx, d_val, strict=True)
        ]
        assert index.scores(q) == pytest.approx(dot, rel=1e-9, abs=1e-12)


def test_index_fits_avg_len_and_handles_edges() -> None:
    index = BM25Index(["whale ship", "whale whale whale ship", "the"])
    assert index.encoder.avg_len == pytest.approx(2.0)  # (2 + 4 + 0) / 3
    assert len(index) == 3
    assert index.scores("nothing matches") == [0.0, 0.0, 0.0]
    assert [i for i, _ in index.search("nothing matches")] == [0, 1, 2]  # ties: input order
    assert index.search("whale", top_k=1)[0][0] == 1
    assert BM25Index([]).scores("whale") == []
    assert BM25Index(["the a"], avg_len=None).encoder.avg_len == 1.0
    assert BM25Index(["whale"], avg_len=10.0).encoder.avg_len == 10.0


def test_against_bm25s(pride: tuple[list[str], list[str]]) -> None:
    """bm25s's Lucene variant (0.3) leaves out the constant (k1 + 1) of the tf part, as Lucene
    itself has since 8.0; ours keeps the classic form. Scores differ by exactly that factor, so
    every ranking is the same. (The dev extra installs bm25s: this test runs in CI.)"""
    import bm25s

    paragraphs, questions = pride
    tokens = [tokenize(p) for p in paragraphs]
    retriever = bm25s.BM25(method="lucene", k1=K1, b=B)
    retriever.index(tokens, show_progress=False)
    index = BM25Index(paragraphs)
    for q in questions:
        theirs = [(K1 + 1) * float(s) for s in retriever.get_scores(sorted(set(tokenize(q))))]
        assert index.scores(q) == pytest.approx(theirs, rel=1e-4, abs=1e-6)


def test_against_rank_bm25_if_installed(pride: tuple[list[str], list[str]]) -> None:
    """rank_bm25's Okapi idf (log((N - df + .5) / (df + .5)), floored) differs: top-1 agrees."""
    rank_bm25 = pytest.importorskip("rank_bm25")
    paragraphs, questions = pride
    okapi = rank_bm25.BM25Okapi([tokenize(p) or [""] for p in paragraphs], k1=K1, b=B)
    index = BM25Index(paragraphs)
    agree = 0
    for q in questions:
        theirs = list(okapi.get_scores(sorted(set(tokenize(q)))))
        agree += index.search(q, top_k=1)[0][0] == max(range(len(theirs)), key=theirs.__getitem__)
    assert agree >= 0.9 * len(questions)
