"""The ``vllm`` LLM backend (llama-index-llms-vllm's VllmServer through litrag's VllmChatServer)
against a real llama.cpp server speaking vLLM's OpenAI API, behind a proxy that records each
request: what is sent (messages, model, max tokens, key, sampling), streaming, overlapping async
calls, a LitSeg-Lite segmentation of a chapter, ``litrag ask`` answering from the 1.5B model as
well as through ``openai-like``, and each failure mode of the package as one clear error. Every
repair is paired with the package's own behaviour, so the test shows what it repairs."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.llms.vllm import VllmServer
from llm_server import API_KEY, NO_PINGS, RecordingProxy, recorded
from test_answer import FATHER, free_port
from test_retriever import WILD, ingested_shelf

from litrag.answering.answer import QA_SYSTEM_PROMPT, describe_llm_error
from litrag.builders import build_answer_llm
from litrag.cli.common import BUNDLED_BOOK
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.models.llama_server import LlamaServer, qwen_1_5b_path
from litrag.models.served import BackendError, in_process_vllm, server_llm
from litrag.models.vllm_server import LLMEndpointError, LLMServerHTTPError, VllmChatServer
from litrag.segment import LitSegNodeParser
from litrag.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = ChatMessage(role=MessageRole.SYSTEM, content="You answer in a few words.")
USER = ChatMessage(role=MessageRole.USER, content="Name one animal.")


def vllm_llm(proxy: RecordingProxy, **kwargs) -> VllmChatServer:
    kwargs.setdefault("api_key", API_KEY)
    return server_llm("vllm", proxy.api_base, "local", context_window=2048, **kwargs)


def package_client(api_url: str, **kwargs) -> VllmServer:
    """The package's own ``VllmServer(openai_like=True)``, keyed, as a user would build it: the
    behaviour each repair of ``VllmChatServer`` is held against."""
    return VllmServer(
        api_url=api_url,
        model="local",
        openai_like=True,
        api_headers={"Authorization": f"Bearer {API_KEY}"},
        **kwargs,
    )


# --------------------------------------------------------------------------- what is sent
@pytest.mark.llm
def test_the_chat_is_sent_as_a_chat_with_model_limit_and_key(keyed_server):
    llm = vllm_llm(keyed_server, max_tokens=24, temperature=0.0)
    assert llm.metadata.context_window == 2048 and llm.metadata.is_chat_model
    assert llm.metadata.num_output == 24
    before = len(keyed_server.chats())
    reply = llm.chat([SYSTEM, USER])
    assert reply.message.content.strip()
    assert reply.additional_kwargs["completion_tokens"] > 0
    sent = keyed_server.chats()[before]
    assert sent["headers"]["authorization"] == f"Bearer {API_KEY}"
    body = sent["body"]
    assert body["model"] == "local" and body["max_tokens"] == 24 and body["temperature"] == 0.0
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM.content},
        {"role": "user", "content": USER.content},
    ]
    # a per-call limit under its OpenAI name is honoured
    llm.chat([USER], max_tokens=5)
    assert keyed_server.chats()[-1]["body"]["max_tokens"] == 5

    # the package as shipped: one flattened user message, max_tokens= ignored, 3,900 tokens
    raw = package_client(keyed_server.api_base + "/chat/completions", max_new_tokens=24)
    assert raw.metadata.context_window == 3900 and not raw.metadata.is_chat_model
    raw.chat([SYSTEM, USER], max_tokens=5)
    body = keyed_server.chats()[-1]["body"]
    assert [m["role"] for m in body["messages"]] == ["user"] and body["max_tokens"] == 24
    assert body["messages"][0]["content"].startswith("system: You answer")


@pytest.mark.llm
def test_streaming_sends_pieces_and_the_same_request(keyed_server):
    llm = vllm_llm(keyed_server, max_tokens=24, temperature=0.0)
    pieces = list(llm.stream_chat([SYSTEM, USER]))
    assert len(pieces) > 1 and pieces[-1].message.content == "".join(p.delta for p in pieces)
    body = keyed_server.chats()[-1]["body"]
    assert body["stream"] is True and len(body["messages"]) == 2 and body["max_tokens"] == 24
    assert llm.complete("Say hello.").text.strip()  # a completion is a one-message chat


@pytest.mark.llm
def test_async_calls_overlap_where_the_package_queues_them(keyed_server):
    """Concurrent segmentation calls: both requests are in flight at once, the event loop keeps
    running; the package's ``achat`` blocks the loop, so its second request starts after the
    first ended."""

    async def two_calls(llm) -> int:
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        await asyncio.gather(llm.achat([USER]), llm.achat([USER]))
        done = True
        await tick
        return ticks

    ours = vllm_llm(keyed_server, max_tokens=16)
    n = len(keyed_server.chats())
    assert asyncio.run(two_calls(ours)) > 5
    first, second = keyed_server.chats()[n : n + 2]
    assert second["start"] < first["end"]  # in flight together

    package = package_client(keyed_server.api_base + "/chat/completions", max_new_tokens=16)
    n = len(keyed_server.chats())
    asyncio.run(two_calls(package))
    first, second = keyed_server.chats()[n : n + 2]
    assert second["start"] >= first["end"]  # one after the other


@pytest.mark.llm
def test_litseg_lite_segments_a_chapter_through_the_vllm_backend(keyed_server):
    """Plumbing (SmolLM2 writes poor segmentations): the paper's sampling settings and JSON mode
    reach the server, the chapter's two units are segmented concurrently, the blocks cover it."""
    first = split_chapters(load_book(BUNDLED_BOOK))[0]
    assert first.metadata["chapter_index"] == 1
    # the chapter's opening paragraphs: prompts of ~1,000 tokens keep it fast on a CPU
    paragraphs = first.text.split("\n\n")
    n = next(i for i in range(1, len(paragraphs)) if len(" ".join(paragraphs[:i]).split()) > 300)
    chapter = Document(text="\n\n".join(paragraphs[:n]), metadata=dict(first.metadata))
    assert len(chapter.text.split()) < 600
    llm = vllm_llm(keyed_server, timeout=600)
    parser = LitSegNodeParser.from_defaults(
        llm=llm,
        segmenter="litseg-lite",
        max_unit_words=len(chapter.text.split()) * 2 // 3,  # two units, so two calls
        max_retries=0,
        max_output_tokens=60,
        num_workers=2,
    )
    n = len(keyed_server.chats())
    nodes = parser.get_nodes_from_documents([chapter])
    sent = keyed_server.chats()[n:]
    assert len(sent) == parser.summary.llm_calls == parser.summary.parts >= 2
    for r in sent:
        body = r["body"]
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert body["response_format"] == {"type": "json_object"}
        assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.8, 20)
        assert body["max_tokens"] == 60 and body["model"] == "local"
    assert sent[1]["start"] < sent[0]["end"]  # the two units were in flight together
    assert nodes and nodes[0].start_char_idx == 0
    assert all(n.metadata["segmenter"] == "litseg-lite" for n in nodes)
    words = sum(len(n.get_content().split()) for n in nodes)
    assert words >= 0.95 * len(chapter.text.split())


# --------------------------------------------------------------------------- failure modes
@pytest.mark.llm
def test_each_failure_of_the_package_is_one_clear_error(keyed_server):
    base = keyed_server.api_base
    # a /v1/completions URL: refused when configured ...
    with pytest.raises(BackendError, match=r"text-completions endpoint.*the /v1 base"):
        server_llm("vllm", base + "/completions", "local")
    with pytest.raises(BackendError, match="demo /generate server"):
        server_llm("vllm", "http://127.0.0.1:8000/generate", "local")
    # ... and never read as "" (or as an obscure error) when reached anyway
    at_completions = VllmChatServer(api_url=base + "/completions", model="local", api_key=API_KEY)
    with pytest.raises(LLMEndpointError, match=r"streamed nothing.*not /v1/completions"):
        list(at_completions.stream_chat([USER]))
    with pytest.raises(LLMServerHTTPError, match="not /v1/completions") as err:
        at_completions.chat([USER])
    assert err.value.status_code == 500  # llama.cpp; vLLM answers 400
    package = package_client(base + "/completions")
    # the package: llama.cpp streams nothing, which LlamaIndex's instrumentation turns into a
    # pydantic ValidationError about an event, naming neither the URL nor the cause
    with pytest.raises(Exception) as raw_err:
        list(package.stream_complete("Name one animal."))
    said = str(raw_err.value)
    assert "LLMCompletionEndEvent" in said and "/completions" not in said
    # a missing key: the server's own words and the status
    with pytest.raises(LLMServerHTTPError, match="Invalid API key") as err:
        vllm_llm(keyed_server, api_key=None).chat([USER])
    assert err.value.status_code == 401
    line = describe_llm_error(err.value, midstream=False, api_base=base)
    assert line.startswith(f"the LLM server at {base} answered HTTP 401: Invalid API key")
    # nothing listening: a connection error, described as such
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ConnectionError) as err:
        server_llm("vllm", dead, "local").chat([USER])
    line = describe_llm_error(err.value, midstream=False, api_base=dead)
    assert line.startswith(f"cannot reach the LLM server at {dead}")


def test_in_process_vllm_and_answering_without_a_server_say_why_and_what_to_use(tmp_path):
    try:
        importlib.metadata.version("vllm")
        pytest.fail("vllm is installed here: this test expects a machine without it")
    except importlib.metadata.PackageNotFoundError:
        pass
    with pytest.raises(BackendError, match=r"vllm is not installed here: start `vllm serve M`"):
        in_process_vllm("M")
    s = Settings(home=tmp_path, llm_backend="vllm", llm_url=None, llm_model="Qwen/Qwen3-4B")
    with pytest.raises(BackendError, match="in-process Vllm cannot stream"):
        build_answer_llm(s)


class PingingServer(BaseHTTPRequestHandler):
    """A chat stream with SSE comment lines between the chunks, as llama.cpp's server sends
    every 15 s (scripted: waiting 15 s for a real ping would slow the suite)."""

    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ("Buck's father", " was a St. Bernard"):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            self.wfile.write(b": ping - 2026-12-02 03:00:00\r\n\r\n")
            self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        self.wfile.write(b"data: [DONE]\r\n\r\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pinging_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), PingingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_sse_ping_comments_are_skipped(pinging_url):
    pieces = [r.delta for r in server_llm("vllm", pinging_url, "m").stream_chat([USER])]
    assert pieces == ["Buck's father", " was a St. Bernard"]
    package = VllmServer(api_url=pinging_url + "/chat/completions", openai_like=True)
    with pytest.raises(json.JSONDecodeError):  # the package's own stream reader
        list(package.stream_complete("Who was Buck's father?"))


# --------------------------------------------------------------------------- the package
def test_the_extra_adds_only_the_client_and_its_exit_hook_is_quiet():
    pyproject = (ROOT / "pyproject.toml").read_text().splitlines()
    assert [ln for ln in pyproject if ln.startswith("vllm = ")] == [
        'vllm = ["llama-index-llms-vllm>=0.8,<0.9"]'
    ]
    needs = importlib.metadata.requires("llama-index-llms-vllm") or []
    assert [r.split("<")[0].split(">")[0] for r in needs] == ["llama-index-core"]
    # where torch is absent, the package's atexit hook prints an ignored ImportError at exit;
    # importing it through litrag leaves the exit quiet
    no_torch = "import sys; sys.modules['torch'] = None; "
    run = [sys.executable, "-c"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    raw = subprocess.run([*run, no_torch + "import llama_index.llms.vllm"], capture_output=True)
    assert raw.returncode == 0 and b"Exception ignored" in raw.stderr
    ours = subprocess.run(
        [*run, no_torch + "import litrag.models.vllm_server"], capture_output=True, env=env
    )
    assert ours.returncode == 0 and ours.stderr == b""


def litrag_ask(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_")}
    full.update(LITRAG_HOME=str(home), LITRAG_LLM_BACKEND="vllm", **env)
    return subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ask", FATHER, "--book", WILD, *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_vllm_backend_failures_are_one_line(books_dir, tmp_path_factory, stalling_url):
    home = ingested_shelf(books_dir, tmp_path_factory)
    url = stalling_url.replace("/v1", "/v1/completions")
    r = litrag_ask(home, {"LITRAG_LLM_URL": url})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"error: {url} is a text-completions endpoint")
    assert r.stderr.count("\n") == 1
    r = litrag_ask(home, {"LITRAG_LLM_MODEL": "Qwen/Qwen3-4B"})  # no URL
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: answering through llama-index-llms-vllm needs a `vllm")
    assert "`vllm serve Qwen/Qwen3-4B`" in r.stderr
    r = litrag_ask(home, {"LITRAG_LLM_URL": stalling_url}, "--timeout", "2")
    assert r.returncode == 1
    assert r.stdout.startswith("Buck's father was\n")  # the partial answer, then the sources
    assert "timed out mid-answer" in r.stderr and "[1] The Call of the Wild" in r.stdout
    assert "Traceback" not in r.stderr


# --------------------------------------------------------------------------- litrag ask, 1.5B
@pytest.fixture(scope="module")
def qwen_proxy(tmp_path_factory) -> Iterator[RecordingProxy]:
    """The packaged 1.5B model (answers that can be right or wrong), pings off, recorded."""
    log = tmp_path_factory.mktemp("qwen-server") / "server.log"
    args = ["--logits_all", "False", "--flash_attn", "True", *NO_PINGS]
    server = LlamaServer(qwen_1_5b_path(), n_ctx=4096, log_path=log, extra_args=args).start()
    with recorded(server) as proxy:
        yield proxy


def ask(home: Path, backend: str, url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_")}
    env.update(
        LITRAG_HOME=str(home),
        LITRAG_LLM_BACKEND=backend,
        LITRAG_LLM_URL=url,
        LITRAG_LLM_TEMPERATURE="0",
    )
    return subprocess.run(
        [sys.executable, "-m", "litrag.cli", "ask", FATHER, "--book", WILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.llm
def test_litrag_ask_answers_through_llama_index_llms_vllm(books_dir, tmp_path_factory, qwen_proxy):
    """`LITRAG_LLM_BACKEND=vllm litrag ask`: a grounded answer (chapter I: "His father, Elmo,
    a huge St. Bernard"), the backend named, the paper's prompt sent as a chat; through
    openai-like the same chat goes out and the answer is right too."""
    home = ingested_shelf(books_dir, tmp_path_factory)
    url = qwen_proxy.api_base
    r = ask(home, "vllm", url)
    assert r.returncode == 0, r.stderr
    answer, sources = r.stdout.split("\nSources (")
    assert "St. Bernard" in answer
    assert f"answered by local at {url} (llama-index-llms-vllm VllmServer)" in sources
    sent = qwen_proxy.chats()[-1]["body"]
    system, user = sent["messages"]
    assert system["role"] == "system" and system["content"].startswith(QA_SYSTEM_PROMPT)
    assert user["role"] == "user" and user["content"].startswith("Book Title: <title>The Call")
    assert f"Question: {FATHER}" in user["content"] and "<passage from=" in user["content"]
    assert (sent["model"], sent["max_tokens"], sent["stream"]) == ("local", 256, True)

    r2 = ask(home, "openai-like", url)
    assert r2.returncode == 0, r2.stderr
    answer2, sources2 = r2.stdout.split("\nSources (")
    assert f"answered by local at {url} (OpenAILike)" in sources2
    assert qwen_proxy.chats()[-1]["body"]["messages"] == sent["messages"]  # the same chat
    # right both ways; the wording may differ: the second request of the same prompt is read
    # from llama.cpp's prompt cache, which changes the logits slightly (seen: "Buck's father
    # was a St. Bernard." then "Elmo was a huge St. Bernard.")
    assert "St. Bernard" in answer2
