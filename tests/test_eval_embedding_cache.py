"""The harness's embedding cache with a counting stand-in model: what is on disk is never embedded
again, the model loads only on a miss, and queries are kept apart from texts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litrag.eval.embedding_cache import CachedEmbedder, CachedEmbedding, EmbeddingCache


class CountingModel:
    """Vectors from text lengths; counts what it was asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.queries: list[str] = []

    def get_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [[float(len(t)), 1.0] for t in texts]

    def get_query_embedding(self, query: str) -> list[float]:
        self.queries.append(query)
        return [1.0, float(len(query))]


def test_second_embedder_reads_everything_from_disk(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    model = CountingModel()
    first = CachedEmbedder(cache, "counting", lambda: model)
    vecs = first.embed(["a dog", "a cat", "a dog"])
    assert vecs.shape == (3, 2) and np.array_equal(vecs[0], vecs[2])
    assert model.texts == ["a dog", "a cat"]  # a repeated text is embedded once
    assert (first.computed, first.cached) == (3, 0)

    loads: list[int] = []
    second = CachedEmbedder(cache, "counting", lambda: loads.append(1) or model)
    assert np.array_equal(second.embed(["a cat", "a dog"]), vecs[[1, 0]])
    assert (second.computed, second.cached, loads) == (0, 2, [])  # the model never loaded
    assert second.embed([]).shape == (0, 0)
    cache.close()


def test_queries_and_other_models_are_cached_apart(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    model = CountingModel()
    embedder = CachedEmbedder(cache, "counting", lambda: model)
    embedder.embed(["who?"])
    assert embedder.embed(["who?"], kind="query").tolist() == [[1.0, 4.0]]
    assert model.queries == ["who?"]
    other = CachedEmbedder(cache, "another model", lambda: model)
    other.embed(["who?"])
    assert model.texts == ["who?", "who?"]
    # the LlamaIndex face of the same cache: nothing new is embedded
    wrapped = CachedEmbedding(embedder)
    assert wrapped.get_text_embedding("who?") == [4.0, 1.0]
    assert wrapped.get_query_embedding("who?") == [1.0, 4.0]
    assert len(model.texts) == 2 and len(model.queries) == 1
    cache.close()
