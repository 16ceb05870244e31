"""Served embeddings for real: nomic-embed-text-v1.5 behind llama.cpp's OpenAI-compatible server
(``--embedding``, the same ``/v1/embeddings`` as ``vllm serve``), read through
``ServedEmbedding``, ranks chapter I's passages exactly as the same model in process does; the
server's errors (dead, several models, a wrong dimension) are one line naming it.

Skipped where ``litrag[quality]`` is not installed (the model comes from its slices).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from scripted_llm import send_json
from test_nomic import _installed, chapter_one_passages, embed, models_dir  # noqa: F401

pytest.importorskip("llama_index.embeddings.openai_like", reason="needs litrag[openai]")

from litrag.builders import build_embed_model, build_window_encoder
from litrag.models.served_embeddings import (
    QWEN3_QUERY,
    ServedEmbedding,
    ServedEmbeddingError,
    choose_model,
    prefixes_for,
)
from litrag.settings import Settings, SettingsError

QUESTIONS = [
    "Who stole Buck from Judge Miller's place?",
    "Where did Buck live before he was taken away?",
    "What did the man in the red sweater beat Buck with?",
    "How much money did the saloon-keeper say the dog had cost?",
    "Why did Manuel need money?",
    "What did Buck weigh?",
]


@pytest.fixture(scope="module")
def server(models_dir: Path) -> Iterator:  # noqa: F811
    """llama.cpp's server on the Q8_0 file the in-process embedder reads, embeddings on."""
    if not _installed():
        pytest.skip("needs litrag[quality]")
    from litrag.models.llama_server import LlamaServer
    from litrag.models.nomic import DEFAULT_QUANT
    from litrag.models.nomic_files import quantized_path

    path = quantized_path(DEFAULT_QUANT, models_dir)
    with LlamaServer(
        path,
        n_ctx=2048,
        n_threads=2,
        model_alias="nomic-embed-text-v1.5",
        log_path=models_dir / "embed-server.log",
        extra_args=["--embedding", "true"],
    ) as running:
        yield running


def test_the_served_model_ranks_as_the_same_model_in_process(server, embed) -> None:  # noqa: F811
    served = ServedEmbedding.from_server(server.api_base, batch_size=8)
    assert served.model_name == "nomic-embed-text-v1.5"  # the server's only model
    assert (served.query_prefix, served.document_prefix) == ("search_query: ", "search_document: ")
    passages = chapter_one_passages()
    local = np.asarray(embed.get_text_embedding_batch(passages))
    remote = np.asarray(served.get_text_embedding_batch(passages))
    assert remote.shape == local.shape == (len(passages), 768)
    assert np.allclose(np.linalg.norm(remote, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(local * remote, axis=1))) > 0.999  # the same vectors
    for question in QUESTIONS:
        top_local = np.argsort(-(local @ np.asarray(embed.get_query_embedding(question))))[:5]
        top_remote = np.argsort(-(remote @ np.asarray(served.get_query_embedding(question))))[:5]
        assert list(top_local) == list(top_remote), question


def test_the_settings_build_it_with_no_sentence_windows(server, monkeypatch) -> None:
    monkeypatch.setenv("LITRAG_EMBED_URL", server.api_base)
    built = build_embed_model(Settings())
    assert isinstance(built, ServedEmbedding) and build_window_encoder(built) is None
    served = ServedEmbedding.from_server(server.api_base)
    with pytest.raises(ServedEmbeddingError, match="gives 768-d vectors, the library holds 384-d"):
        served.check_dimension(384)
    served.check_dimension(768)


def test_the_family_prefixes() -> None:
    assert prefixes_for("Qwen/Qwen3-Embedding-8B") == (QWEN3_QUERY, "")
    assert prefixes_for("intfloat/multilingual-e5-small") == ("query: ", "passage: ")
    assert prefixes_for("some-unknown-model") == ("", "")


def test_prefix_settings_keep_their_trailing_space(monkeypatch) -> None:
    monkeypatch.setenv("LITRAG_EMBED_QUERY_PREFIX", "query: ")
    assert Settings().embed_query_prefix == "query: "


def test_a_dead_server_is_one_line_naming_it(monkeypatch) -> None:
    monkeypatch.setenv("LITRAG_EMBED_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(SettingsError) as info:
        build_embed_model(Settings())
    line = str(info.value)
    assert "\n" not in line and line.startswith("LITRAG_EMBED_URL: cannot reach")
    assert "127.0.0.1:9" in line


class _Listing(BaseHTTPRequestHandler):
    """A server that lists models (or refuses): the rare paths of choosing one."""

    reply: tuple[int, dict] = (200, {"data": []})

    def do_GET(self) -> None:
        send_json(self, *self.reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ((200, {"data": [{"id": "a"}, {"id": "b"}]}), "serves 2 models (a, b); name the one"),
        ((401, {"error": "no key"}), "answered HTTP 401"),
        ((200, {"data": [{"name": "x"}]}), "did not answer with an OpenAI-style model list"),
    ],
)
def test_choosing_the_model_says_what_is_wrong(reply, expected) -> None:
    handler = type("Handler", (_Listing,), {"reply": reply})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        with pytest.raises(ServedEmbeddingError, match=re.escape(expected)):
            choose_model(url, None, None, 5.0)
        assert choose_model(url, "named", None, 5.0) == "named"  # a named model is not looked up
    finally:
        httpd.shutdown()


def test_litrag_ingest_then_ask_through_the_served_embedder(
    server, books_dir, tmp_path, monkeypatch, capsys
) -> None:
    """As a user runs it: ``LITRAG_EMBED_URL=... litrag ingest``, then ``litrag ask``; the
    library names the served model, and asking it with the in-process MiniLM is refused."""
    from mirror_tree import excerpt
    from test_integrity import error_line, run

    book = tmp_path / "wild.txt"  # the header and chapter I up to Manuel's bargain
    book.write_text(excerpt(books_dir / "pg215_call_of_the_wild.txt", 150), encoding="utf-8")
    home = tmp_path / "home"
    monkeypatch.setenv("LITRAG_EMBED_URL", server.api_base)
    code, _, err = run(home, "ingest", "-q", str(book), capsys=capsys)
    assert code == 0, err
    record = json.loads((home / "books.json").read_text())["pg215"]
    assert record["status"] == "complete" and "nomic-embed-text-v1.5" in record["embedder"]
    question = "Why did Manuel need money?"
    code, out, err = run(home, "ask", question, "--no-llm", "--json", capsys=capsys)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["sources"] and {s["book_id"] for s in answer["sources"]} == {"pg215"}
    assert "lottery" in answer["sources"][0]["text"]  # Manuel's besetting sin
    monkeypatch.delenv("LITRAG_EMBED_URL")
    code, _, err = run(home, "ask", question, "--no-llm", capsys=capsys)
    assert code != 0 and "reembed" in error_line(err)
