"""The packaged MiniLM with windowed pooling: nothing silently truncated."""

from __future__ import annotations

import numpy as np
import pytest

from litrag.models.embedders import WindowedEmbedding, embedding_tokenizer, minilm_path


@pytest.fixture(scope="module")
def embedder() -> WindowedEmbedding:
    return WindowedEmbedding(embed_batch_size=8, backend="torch")


@pytest.fixture(scope="module")
def long_passage(books_dir) -> str:
    raw = (books_dir / "pg215_call_of_the_wild.txt").read_text(encoding="utf-8-sig")
    start = raw.index("Buck did not read the newspapers")
    return raw[start : start + 3000]


def test_tokenizer_matches_the_model(embedder, long_passage):
    tok = embedding_tokenizer(minilm_path())
    ids = tok(long_passage)
    assert len(ids) > 500
    assert ids == embedder._model.tokenizer(long_passage, add_special_tokens=False)["input_ids"]


def test_short_text_is_one_plain_embedding(embedder):
    text = "Buck was stolen from Judge Miller's place by Manuel, the gardener's helper."
    assert embedder.windows(text) == [text]
    ours = np.array(embedder.get_text_embedding(text))
    plain = embedder._model.encode([text], normalize_embeddings=True)[0]
    assert np.allclose(ours, plain, atol=1e-5)


def test_long_text_is_pooled_over_windows(embedder, long_passage):
    windows = embedder.windows(long_passage)
    assert len(windows) > 2
    tok = embedding_tokenizer(minilm_path())
    assert all(len(tok(w)) <= embedder.window_tokens for w in windows)
    # the last words of the passage are inside some window (no truncation)
    assert long_passage.split()[-1] in windows[-1]
    pooled = np.array(embedder.get_text_embedding(long_passage))
    parts = embedder._model.encode(windows, normalize_embeddings=True)
    expected = parts.sum(0) / np.linalg.norm(parts.sum(0))
    assert np.allclose(pooled, expected, atol=1e-5)
    # and it differs from the truncated embedding the plain model would give
    truncated = embedder._model.encode([long_passage], normalize_embeddings=True)[0]
    assert not np.allclose(pooled, truncated, atol=1e-3)


def test_query_instruction_is_prefixed():
    e = WindowedEmbedding(query_instruction="Instruct: find\nQuery: ", backend="torch")
    q = np.array(e.get_query_embedding("Who stole Buck?"))
    direct = e._model.encode(["Instruct: find\nQuery: Who stole Buck?"], normalize_embeddings=True)
    assert np.allclose(q, direct[0], atol=1e-5)


def test_batch_grouping_does_not_change_vectors(embedder, long_passage):
    """Large calls are sorted by length and padded differently: the vectors stay the same."""
    words = long_passage.split()
    texts = [" ".join(words[i : i + n]) for i, n in enumerate([3, 40, 7, 300, 12, 90, 1, 55] * 3)]
    small = np.array(embedder.get_text_embedding_batch(texts))  # calls of 8 texts
    big = WindowedEmbedding(embed_batch_size=256, encode_batch_size=5, backend="torch")
    np.testing.assert_allclose(np.array(big.get_text_embedding_batch(texts)), small, atol=1e-5)
