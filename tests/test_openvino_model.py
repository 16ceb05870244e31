"""The packaged MiniLM through OpenVINO: torch's vectors, a graph converted once, clear refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from litrag.models import openvino as openvino_model
from litrag.models.embedders import WindowedEmbedding, minilm_path

pytestmark = pytest.mark.skipif(not openvino_model.available(), reason="openvino not installed")


@pytest.fixture(scope="module")
def texts(books_dir) -> list[str]:
    raw = (books_dir / "pg215_call_of_the_wild.txt").read_text(encoding="utf-8-sig")
    start = raw.index("Buck did not read the newspapers")
    words = raw[start : start + 6000].split()
    # lengths from one word to past the model's 256 pieces, so padding and windows both vary
    return [" ".join(words[i : i + n]) for i, n in enumerate([1, 5, 40, 9, 300, 120, 17, 600])]


@pytest.fixture(scope="module")
def torch_vectors(texts) -> np.ndarray:
    return np.array(WindowedEmbedding(backend="torch").get_text_embedding_batch(texts))


def test_openvino_gives_torchs_vectors(texts, torch_vectors):
    e = WindowedEmbedding(backend="openvino")
    assert e.resolved_backend() == "openvino"
    assert e.window_tokens == 254  # the model's max_seq_length (256) read without torch
    ours = np.array(e.get_text_embedding_batch(texts))
    cosine = (ours * torch_vectors).sum(1)
    assert cosine.min() > 0.99999, cosine
    np.testing.assert_allclose(ours, torch_vectors, atol=2e-3)
    q = np.array(e.get_query_embedding("Who stole Buck?"))
    tq = np.array(WindowedEmbedding(backend="torch").get_query_embedding("Who stole Buck?"))
    assert float(q @ tq) > 0.99999


def test_auto_picks_openvino_for_a_mean_pooled_model_on_cpu():
    assert WindowedEmbedding().resolved_backend() == "openvino"
    assert WindowedEmbedding(backend="torch").resolved_backend() == "torch"


def test_bf16_stays_close(texts, torch_vectors):
    """On CPUs with bfloat16 units the vectors move a little; elsewhere this is f32 again."""
    e = WindowedEmbedding(backend="openvino", precision="bf16")
    cosine = (np.array(e.get_text_embedding_batch(texts)) * torch_vectors).sum(1)
    assert cosine.min() > 0.999, cosine


def test_the_graph_is_converted_once(tmp_path):
    first = openvino_model.converted_model(minilm_path(), tmp_path)
    stamp = first.stat().st_mtime_ns
    again = openvino_model.converted_model(minilm_path(), tmp_path)
    assert again == first and again.stat().st_mtime_ns == stamp
    # one folder per fingerprint, nothing half-written beside it
    assert [p.name for p in tmp_path.iterdir()] == [first.parent.name]
    assert {p.name for p in first.parent.iterdir()} == {"model.xml", "model.bin"}
    model = openvino_model.OpenVINOSentenceModel(minilm_path(), cache_dir=tmp_path)
    vec = model.encode(["Buck"], normalize_embeddings=True)
    assert vec.shape == (1, 384) and abs(float(np.linalg.norm(vec)) - 1) < 1e-5
    assert model.encode([]).shape[0] == 0


def test_converting_sends_no_telemetry(tmp_path, monkeypatch):
    """OpenVINO's converter would report to Google Analytics (no consent file counts as yes):
    the conversion goes through its no-op stub, so nothing is ever sent."""
    ga4 = pytest.importorskip("openvino_telemetry.backend.backend_ga4")
    sent: list[tuple] = []
    monkeypatch.delenv("CI", raising=False)  # CI alone would turn it off: test the default
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no consent file: the sending default
    (tmp_path / "home").mkdir()
    monkeypatch.setattr(ga4.GA4Backend, "send", lambda self, *a, **k: sent.append(a))
    xml = openvino_model.converted_model(minilm_path(), tmp_path / "cache")
    assert xml.is_file() and sent == []


def cls_pooled_copy(tmp_path: Path) -> Path:
    """The packaged model's files with CLS pooling instead of mean pooling."""
    dest = tmp_path / "cls-model"
    shutil.copytree(minilm_path(), dest)
    cfg_path = dest / "1_Pooling" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["pooling_mode_mean_tokens"], cfg["pooling_mode_cls_token"] = False, True
    cfg_path.write_text(json.dumps(cfg))
    return dest


def test_a_model_openvino_cannot_pool_stays_on_torch(tmp_path):
    path = cls_pooled_copy(tmp_path)
    assert openvino_model.supports(minilm_path())
    assert not openvino_model.supports(path)
    assert not openvino_model.supports(tmp_path / "missing")
    assert WindowedEmbedding(path).resolved_backend() == "torch"
    with pytest.raises(ValueError, match="not a mean-pooled sentence-transformers model"):
        WindowedEmbedding(path, backend="openvino")
