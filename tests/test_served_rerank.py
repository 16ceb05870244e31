"""Served reranking for real: llama.cpp's own ``llama-server --reranking`` (the Cohere/Jina
``/v1/rerank`` schema vLLM and infinity speak too) serves a tiny cross-encoder saved here, a
randomly initialised ``BertForSequenceClassification`` on MiniLM's vocabulary, converted with
llama.cpp's converter. Its scores mean nothing; the protocol is what is checked: with
``LITRAG_RERANK_URL`` set, the engine ``litrag ask``, the chat UI and ``serve-api`` build ranks the
passages in exactly the order of the scores the server gives the same 20 candidates when asked
directly, and ``litrag ask`` cites the server's top one. A stalled server, a dead port and
malformed or failing replies keep the fused order with one warning line, and the answer.

The server tests skip where ``scripts/install_llama_server.sh`` has not run (scripts/setup.sh
runs it for the ``rerank-server`` extra); the fallback tests need no server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from scripted_llm import send_json
from test_retriever import WILD, ingested_shelf

from litrag.builders import build_query_engine
from litrag.retrieval.rerank import ServedReranker
from litrag.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[1]
LLAMA_SERVER = Path(sys.prefix) / "bin" / "llama-server"
CONVERTER = Path(sys.prefix) / "share" / "llama.cpp" / "convert_hf_to_gguf.py"
QUESTION = "Who stole Buck from Judge Miller's place?"
MODEL = "tiny-reranker"
# one thread, one slot; a batch that holds a whole block beside the question
SERVER_ARGS = ["-t", "1", "-np", "1", "-c", "4096", "-b", "4096", "-ub", "4096", "--host"]
SERVER_ARGS += ["127.0.0.1", "--port"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    """llama-server with --reranking on a tiny random cross-encoder: its ``/v1`` base."""
    if not (LLAMA_SERVER.is_file() and CONVERTER.is_file()):
        pytest.skip("needs llama.cpp's llama-server: bash scripts/install_llama_server.sh")
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from litrag.models.embedders import minilm_path

    folder = tmp_path_factory.mktemp("tiny-reranker")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=4096,  # a LitSeg block runs past BERT's 512
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder / "hf")
    tokenizer.save_pretrained(folder / "hf")
    gguf = folder / "tiny-reranker.gguf"
    convert = [sys.executable, str(CONVERTER), str(folder / "hf"), "--outfile", str(gguf)]
    done = subprocess.run([*convert, "--outtype", "f32"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    port = free_port()
    log = (folder / "server.log").open("w")
    proc = subprocess.Popen(
        [str(LLAMA_SERVER), "-m", str(gguf), "--reranking", "-a", MODEL, *SERVER_ARGS, str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (folder / "server.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "llama-server did not start in 60 s"
            time.sleep(0.2)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def home(books_dir, tmp_path_factory) -> Path:
    return ingested_shelf(books_dir, tmp_path_factory)


def close(engine) -> None:
    for store in (engine.retriever.vector_store, engine.retriever.children_store):
        if hasattr(store, "close"):
            store.close()


@pytest.fixture(scope="module")
def fused(home) -> list[NodeWithScore]:
    """The 20 fused candidates ``litrag ask`` hands a reranker, in the fused order."""
    engine = build_query_engine(Settings(home=home, rerank_url="http://127.0.0.1:9/v1"), WILD)
    try:
        retriever = engine.retriever
        assert isinstance(retriever.reranker, ServedReranker)  # on by default with the URL
        assert retriever.settings.candidates == 20  # LITRAG_RERANK_CANDIDATES' default
        retriever.reranker = None  # and all 20 kept, not cut to the top 5
        retriever.settings = retriever.settings.model_copy(update={"top_k": 20})
        candidates = retriever.retrieve(QUESTION)
    finally:
        close(engine)
    assert len(candidates) == 20
    return candidates


ASK_FLAGS = ["--no-llm", "--json", "--no-route"]


def litrag_ask(home: Path, env: dict[str, str]) -> tuple[dict, list[str]]:
    """``litrag ask --no-llm --json``: the answer, and the lines it wrote to stderr."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_")}
    full.update(LITRAG_HOME=str(home), PYTHONPATH=str(ROOT), **env)
    r = subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ask", QUESTION, "--book", WILD, *ASK_FLAGS],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout), r.stderr.splitlines()


def test_the_client_reads_the_servers_own_scores(server) -> None:
    docs = ["Buck was stolen by Manuel.", "The dog slept.", "Gold was found in the Klondike."]
    reranker = ServedReranker(url=server)
    assert reranker.served_model() == MODEL  # the server's only model
    raw = httpx.post(
        f"{server}/rerank",
        json={"model": MODEL, "query": QUESTION, "documents": docs, "top_n": 3},
        timeout=30,
    ).json()["results"]
    direct = {r["index"]: r["relevance_score"] for r in raw}
    assert reranker.score(QUESTION, docs) == [direct[i] for i in range(3)]
    assert len(set(direct.values())) == 3  # scores that order something
    assert reranker.describe() == f"{MODEL} at {server}"


def test_litrag_ask_orders_the_sources_by_the_servers_scores(server, home, fused) -> None:
    docs = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in fused]
    scores = ServedReranker(url=server, model=MODEL).score(QUESTION, docs)
    order = sorted(range(len(fused)), key=lambda i: (-scores[i], i))[:5]
    expected = [fused[i].node.node_id for i in order]
    assert expected[0] != fused[0].node.node_id  # the server changes the ranking

    # the engine every front end builds: the server's top 5, in its order, with its scores
    engine = build_query_engine(Settings(home=home, rerank_url=server), WILD)
    try:
        ranked = engine.retriever.retrieve(QUESTION)
    finally:
        close(engine)
    assert [n.node.node_id for n in ranked] == expected
    assert [n.score for n in ranked] == pytest.approx([scores[i] for i in order])

    # litrag ask end to end (an extractive answer cites the top passage only)
    answer, stderr = litrag_ask(home, {"LITRAG_RERANK_URL": server})
    assert [s["node_id"] for s in answer["sources"]] == expected[:1]
    assert answer["sources"][0]["score"] == pytest.approx(scores[order[0]])
    assert f"20 candidates reranked by {MODEL} at {server}" in answer["retrieval"]
    assert answer["text"] and not [ln for ln in stderr if "warning" in ln]


class _Stalled:
    """A socket that accepts connections (the kernel's backlog) and never answers."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_a_stalled_server_keeps_the_fused_order_with_one_warning(home, fused) -> None:
    with _Stalled() as url:
        env = {"LITRAG_RERANK_URL": url, "LITRAG_RERANK_MODEL": "m", "LITRAG_RERANK_TIMEOUT": "1"}
        env |= {"LITRAG_RETRIEVAL_CANDIDATES": "9", "LITRAG_RERANK_CANDIDATES": "7"}
        answer, stderr = litrag_ask(home, env)
    assert [s["node_id"] for s in answer["sources"]] == [fused[0].node.node_id]
    assert answer["text"]  # the answer is there
    warned = [ln for ln in stderr if "warning" in ln]
    assert len(warned) == 1, stderr
    assert warned[0] == (
        f"warning: the reranker at {url} failed, the passages keep the fused order (no reply "
        f"from {url}/rerank within 1 s)"
    )
    assert "9 candidates reranked by m at" in answer["retrieval"]  # LITRAG_RETRIEVAL_ wins


def test_a_dead_server_keeps_the_fused_order_with_one_warning(home, fused, caplog) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    engine = build_query_engine(Settings(home=home, rerank_url=url, rerank_candidates=7), WILD)
    try:
        with caplog.at_level("WARNING", logger="litrag.retrieval.rerank"):
            answer = engine.ask(QUESTION).answer()
            assert len(caplog.records) == 1  # one line a question
            ranked = engine.retriever.retrieve(QUESTION)
    finally:
        close(engine)
    assert answer.text and not answer.error
    assert [s.node_id for s in answer.sources] == [fused[0].node.node_id]
    assert [n.node.node_id for n in ranked] == [n.node.node_id for n in fused[:5]]
    assert len(caplog.records) == 2
    line = caplog.records[0].getMessage()
    assert f"(cannot reach the rerank server at {url} (ConnectError" in line, line
    assert "7 candidates reranked by the served reranker at" in answer.retrieval


class _Scripted(BaseHTTPRequestHandler):
    """A /rerank endpoint that answers what a test scripts: the rare replies."""

    code: int = 200
    reply: object = None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if isinstance(self.reply, bytes):
            self.send_response(self.code)
            self.send_header("Content-Length", str(len(self.reply)))
            self.end_headers()
            self.wfile.write(self.reply)
        else:
            send_json(self, self.code, self.reply)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def scripted(code: int, reply: object) -> Iterator[str]:
    handler = type("Handler", (_Scripted,), {"code": code, "reply": reply})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()


NODES = [
    NodeWithScore(node=TextNode(id_=f"n{i}", text=f"passage {i}"), score=1.0) for i in range(3)
]


@pytest.mark.parametrize(
    ("code", "reply", "cause"),
    [
        (500, {"error": "out of memory"}, 'answered HTTP 500: {"error": "out of memory"}'),
        (200, b"<html>proxy</html>", "did not answer with results of index and relevance_score"),
        (200, {"data": []}, "did not answer with results of index and relevance_score"),
        (200, {"results": [{"index": 3, "relevance_score": 1.0}]}, "malformed result (index 3"),
        (200, {"results": [{"index": 0, "relevance_score": "high"}]}, "relevance_score 'high'"),
    ],
)
def test_a_failing_or_malformed_reply_keeps_the_order_with_one_warning(
    code, reply, cause, caplog
) -> None:
    with scripted(code, reply) as url:
        reranker = ServedReranker(url=url, model="m", top_n=2)
        with caplog.at_level("WARNING", logger="litrag.retrieval.rerank"):
            kept = reranker.postprocess_nodes(NODES, query_str="q")
        assert [n.node.node_id for n in kept] == ["n0", "n1"]
        assert len(caplog.records) == 1
        line = caplog.records[0].getMessage()
        assert "\n" not in line and url in line and cause in line, line


def test_a_good_reply_ranks_by_score_ties_in_the_fused_order() -> None:
    results = [
        {"index": 2, "relevance_score": 0.5},
        {"index": 0, "relevance_score": 0.1},
        {"index": 1, "relevance_score": 0.5},
    ]
    with scripted(200, {"results": results}) as url:
        kept = ServedReranker(url=url, model="m", top_n=None).postprocess_nodes(
            NODES, query_str="q"
        )
        assert [(n.node.node_id, n.score) for n in kept] == [("n1", 0.5), ("n2", 0.5), ("n0", 0.1)]


@pytest.mark.parametrize(
    ("var", "value", "said"),
    [
        ("LITRAG_RERANK_URL", "localhost:8003", "LITRAG_RERANK_URL must be a URL starting with"),
        ("LITRAG_RERANK_CANDIDATES", "0", "LITRAG_RERANK_CANDIDATES must be at least 1"),
        ("LITRAG_RERANK_TIMEOUT", "-1", "LITRAG_RERANK_TIMEOUT must be greater than 0"),
    ],
)
def test_bad_settings_are_one_line(monkeypatch, var, value, said) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError, match=said):
        Settings()
