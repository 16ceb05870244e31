"""The serving edges of issue 50, on the real two-book shelf: the rate limit against forged
X-Forwarded-For (``litrag serve-api`` itself), malformed model names, the Host allowlist (API and
chat), JSON-only bodies, the port and rate-limit flags, keys that can never match, ``chat``
beyond loopback, a follow-up's history bound (with SmolLM2 on llama.cpp behind a recording
proxy), and streams a client abandons (the LLM's connection must close at once)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from gradio_client import Client
from llm_server import RecordingProxy
from test_answer import FATHER, free_port
from test_api import client, extra, serving
from test_app import answering_with
from test_retriever import WILD, ingested_shelf

from litrag.app.api import RateLimiter, create_app
from litrag.app.chat import build_app, launch
from litrag.app.handoff import RunningUI, ask_via_ui
from litrag.app.hosts import allowed_hosts, host_allowed
from litrag.app.serve import check_exposure, run_api
from litrag.app.service import HISTORY_QUESTION_CHARS, ChatService
from litrag.cli import main
from litrag.models.llama_server import openai_like
from litrag.settings import Settings, SettingsError

LONG_KEY = "k" * 24
HUGE = 220_000  # characters of an earlier turn: the body stays under the API's 256 KB


def shelf_copy(books_dir: Path, tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    home = tmp_path_factory.mktemp(name) / "home"
    shutil.copytree(ingested_shelf(books_dir, tmp_path_factory), home)
    return home


@pytest.fixture(scope="module")
def api(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    home = shelf_copy(books_dir, tmp_path_factory, "edges")
    service = ChatService(Settings(home=home, read_words=0))
    try:
        with serving(create_app(service)) as url:
            yield SimpleNamespace(url=url, service=service, home=home)
    finally:
        service.close()


@contextmanager
def api_command(s: Settings, **kw) -> Iterator[str]:
    """``run_api`` (what ``litrag serve-api`` runs) in a thread; yields its ``/v1`` URL."""
    urls: list[str] = []
    stop = threading.Event()
    code: list[int] = []
    thread = threading.Thread(
        target=lambda: code.append(
            run_api(s, port=0, no_llm=True, ready=urls.append, stop=stop, **kw)
        ),
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 300
    while not urls and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert urls, f"run_api did not become ready (exit {code})"
        yield urls[0]
    finally:
        stop.set()
        thread.join(timeout=30)
    assert code == [0]


# ------------------------------------------------------------------------- the rate limit
def test_a_forged_forwarded_for_does_not_escape_the_rate_limit(books_dir, tmp_path_factory):
    """Bug 3: each request with a new X-Forwarded-For and a wrong key got 401 forever; the
    socket's peer is the client, so the fourth is a 429. With the proxy named as trusted, the
    header names the client (each forwarded address has its own count)."""
    home = shelf_copy(books_dir, tmp_path_factory, "rate")
    with api_command(Settings(home=home, api_key=LONG_KEY), rate_per_minute=3) as url:
        codes = [
            httpx.get(
                f"{url}/models",
                headers={"Authorization": "Bearer guess", "X-Forwarded-For": f"10.0.0.{i}"},
            ).status_code
            for i in range(6)
        ]
    assert codes == [401, 401, 401, 429, 429, 429]
    trusting = Settings(home=home, api_key=LONG_KEY, trusted_proxies="127.0.0.1")
    with api_command(trusting, rate_per_minute=3) as url:
        auth = {"Authorization": f"Bearer {LONG_KEY}"}
        fresh = [
            httpx.get(f"{url}/models", headers={**auth, "X-Forwarded-For": f"10.0.0.{i}"})
            for i in range(5)
        ]
        same = [
            httpx.get(f"{url}/models", headers={**auth, "X-Forwarded-For": "10.9.9.9"})
            for _ in range(4)
        ]
    assert [r.status_code for r in fresh] == [200] * 5
    assert [r.status_code for r in same] == [200, 200, 200, 429]
    assert "from 10.9.9.9" in same[-1].json()["error"]["message"]


def test_rate_limit_flag_zero_is_no_limit_and_negative_is_refused(tmp_path, monkeypatch, capsys):
    assert all(RateLimiter(0).allow("127.0.0.1") for _ in range(500))  # was: every one a 429
    limited = RateLimiter(2)
    assert [limited.allow("a") for _ in range(3)] == [True, True, False]
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    assert main(["serve-api", "--rate-limit", "-1", "--no-llm"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --rate-limit must be 0 (no limit) or more, got -1"
    ]
    assert not (tmp_path / "home").exists()  # refused before the library was opened


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_one_line_before_the_library_opens(
    port, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    assert main(["serve-api", "--port", port, "--no-llm"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        f"error: --port must be a TCP port from 1 to 65535 (0: any free one), got {port}"
    ]
    assert not (tmp_path / "home").exists()


# ------------------------------------------------------------------------- model names
@pytest.mark.parametrize(
    "suffix", ["²", "", "1@2", "-1", " 1", "٣", "1.5", "9" * 5000, "1\x00", "０"]
)
def test_every_malformed_model_name_is_a_400_in_openais_shape(api, suffix):
    """Bug 4: `litrag/pg215@²` was a plain-text 500 (int('²'))."""
    body = {"model": f"litrag/{WILD}@{suffix}", "messages": [{"role": "user", "content": FATHER}]}
    r = httpx.post(f"{api.url}/chat/completions", json=body)
    assert r.status_code == 400, r.text[:300]
    error = r.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["type"] == "invalid_request_error"
    assert "spoiler limit must be a chapter number" in error["message"]
    assert len(error["message"]) < 300  # a 5,000-digit suffix is not echoed whole


def test_a_well_formed_limit_in_the_name_still_answers(api):
    body = {"model": f"litrag/{WILD}@1", "messages": [{"role": "user", "content": FATHER}]}
    r = httpx.post(f"{api.url}/chat/completions", json=body)
    assert r.status_code == 200 and r.json()["litrag"]["upto_chapter"] == 1


# ------------------------------------------------------------------------- browsers
def test_the_api_answers_only_the_hosts_it_serves(api):
    """DNS rebinding: a page whose name points at 127.0.0.1 sends its own name as Host."""
    port = api.url.split(":")[2].split("/")[0]
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example"):
        r = httpx.get(f"{api.url}/models", headers={"Host": host})
        assert r.status_code == 400, host
        error = r.json()["error"]
        assert error["code"] == "host_not_allowed" and "--allowed-hosts" in error["message"]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert httpx.get(f"{api.url}/models", headers={"Host": host}).status_code == 200, host
    with serving(create_app(api.service, allowed_hosts={"books.example"})) as url:
        assert httpx.get(f"{url}/models", headers={"Host": "books.example"}).status_code == 200
        assert httpx.get(f"{url}/models").status_code == 400  # 127.0.0.1 is not listed now
    assert allowed_hosts("0.0.0.0", None) == {"*"} and host_allowed("any.example", {"*"})
    assert allowed_hosts("127.0.0.1", "a.example, b.example:80") == {"a.example", "b.example"}
    assert not host_allowed(None, allowed_hosts("127.0.0.1", None))


def test_a_body_not_sent_as_json_is_a_415(api):
    """A web page may post text/plain anywhere without asking (no CORS preflight)."""
    body = json.dumps(
        {"model": f"litrag/{WILD}", "messages": [{"role": "user", "content": FATHER}]}
    )
    url = f"{api.url}/chat/completions"
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        headers = {"content-type": kind} if kind else {}
        r = httpx.post(url, content=body.encode(), headers=headers)
        assert "content-type" in r.request.headers or kind is None
        assert r.status_code == 415, kind
        assert r.json()["error"]["code"] == "unsupported_media_type"
    ok = httpx.post(url, content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert ok.status_code == 200 and "St. Bernard" in ok.json()["choices"][0]["message"]["content"]


# ------------------------------------------------------------------------- keys
@pytest.mark.parametrize("key", ["   ", "clé-secrète-très-longue", "tab\tinside-a-long-key", ""])
def test_a_key_that_can_never_match_is_refused_without_echoing_it(key, monkeypatch):
    with pytest.raises(SettingsError) as caught:
        Settings(api_key=key)
    line = str(caught.value)
    assert line.startswith("api_key must be printable ASCII without spaces")
    assert not key or key not in line
    if key:
        monkeypatch.setenv("LITRAG_API_KEY", key)
        with pytest.raises(SettingsError, match=r"^LITRAG_API_KEY must be printable ASCII"):
            Settings()


def test_a_short_key_is_warned_of(tmp_path):
    said: list[str] = []
    check_exposure(Settings(home=tmp_path, api_key="short-key"), "127.0.0.1", False, said.append)
    assert len(said) == 1 and said[0].startswith("warning: the API key has 9 characters")
    said.clear()
    check_exposure(Settings(home=tmp_path, api_key=LONG_KEY), "0.0.0.0", False, said.append)
    assert said == []
    with pytest.raises(SettingsError, match="serving on a public link needs an API key"):
        check_exposure(Settings(home=tmp_path), "127.0.0.1", True, said.append)


def test_chat_beyond_loopback_needs_a_key_as_serve_api_does(tmp_path):
    """`chat --host 0.0.0.0` served the library to the network with no key at all."""
    home = tmp_path / "home"
    env = {"LITRAG_HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    cmd = [sys.executable, "-m", "litrag.cli", "chat", "--host", "0.0.0.0", "--no-llm"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "error: serving on 0.0.0.0 needs an API key (--api-key or LITRAG_API_KEY): it answers "
        "from the whole library"
    ]
    assert not (home / "books.json").exists()  # nothing ingested


def test_the_chat_asks_for_the_key_and_answers_only_its_hosts(api):
    demo = build_app(api.service)
    url = launch(demo, port=free_port(), password=LONG_KEY)
    try:
        port = url.split(":")[2].strip("/")
        refused = httpx.get(url, headers={"Host": "evil.example"})
        assert refused.status_code == 400 and "--allowed-hosts" in refused.text
        assert httpx.get(url, headers={"Host": f"localhost:{port}"}).status_code == 200
        with pytest.raises(Exception):  # noqa: B017 - gradio_client's own error types vary
            Client(url, verbose=False).predict(
                FATHER, [WILD], None, False, "", 0, api_name="/answer"
            )
        ui = RunningUI(url=url, pid=0, host="", since="", login=True)
        stream = ask_via_ui(ui, FATHER, [WILD], use_llm=False, api_key=LONG_KEY)
        assert "St. Bernard" in stream.answer().text
    finally:
        demo.close()


# ------------------------------------------------------------------------- history
def test_a_huge_earlier_turn_adds_a_bounded_part_to_the_search(api, books_dir):
    """Bug 11, without an LLM: a follow-up is searched with the previous question, capped."""
    wild = (books_dir / "pg215_call_of_the_wild.txt").read_text(encoding="utf-8")
    messages = [
        {"role": "user", "content": "Tell me about this: " + wild[:HUGE]},
        {"role": "assistant", "content": "It is a story about a dog."},
        {"role": "user", "content": "What did he do then?"},
    ]
    completion = client(api.url).chat.completions.create(model=f"litrag/{WILD}", messages=messages)
    standalone = extra(completion)["standalone_question"]
    assert standalone.endswith("What did he do then?")
    assert len(standalone) <= HISTORY_QUESTION_CHARS + 30


@pytest.mark.llm
def test_a_huge_earlier_turn_adds_a_bounded_part_to_the_rewrite_prompt(
    api, books_dir, llama_server
):
    """Bug 11: a 230 KB earlier user turn made a ~195,000-character rewrite prompt; what the
    history adds is bounded as the question is (SmolLM2 on llama.cpp, its requests recorded)."""
    wild = (books_dir / "pg215_call_of_the_wild.txt").read_text(encoding="utf-8")
    messages = [
        {"role": "user", "content": "Tell me about this: " + wild[:HUGE]},
        {"role": "assistant", "content": "It is a story about a dog called Buck."},
        {"role": "user", "content": "What kind of dog was his father?"},
    ]
    proxy = RecordingProxy(llama_server.api_base)
    try:
        llm = openai_like(proxy.api_base, llama_server.model, max_tokens=32, timeout=600)
        with answering_with(api.service, llm, "SmolLM2 (recorded)"):
            completion = client(api.url).chat.completions.create(
                model=f"litrag/{WILD}", messages=messages
            )
    finally:
        proxy.close()
    rewrite = proxy.chats()[0]["body"]["messages"]
    prompt = "".join(str(m.get("content") or "") for m in rewrite)
    assert "What kind of dog was his father?" in prompt and "Tell me about this:" in prompt
    assert len(prompt) < 8_000, len(prompt)
    assert extra(completion)["mode"] == "llm" and extra(completion)["error"] is None


# ------------------------------------------------------------------------- abandoned streams
def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_an_abandoned_stream_closes_the_llms_connection_at_once(api, llama_server):
    """Bug 10: a client that leaves mid-stream left llama.cpp generating (a core at 98 % for
    ~18 s) and, against an OpenAI-compatible server, sometimes an upstream socket open for good.
    SmolLM2 is kept from ending (its end tokens banned) and asked for 1,500 tokens; each of
    several clients leaves after the first words: the LLM's connection must close within
    seconds and llama.cpp must go idle."""
    proxy = RecordingProxy(llama_server.api_base)
    banned = {"0": -100, "2": -100}  # SmolLM2's <|endoftext|> and <|im_end|>
    llm = openai_like(
        proxy.api_base,
        llama_server.model,
        max_tokens=1500,
        timeout=600,
        additional_kwargs={"logit_bias": banned},
    )
    body = {
        "model": f"litrag/{WILD}",
        "messages": [{"role": "user", "content": FATHER}],
        "stream": True,
    }
    left: list[float] = []
    try:
        with answering_with(api.service, llm, "SmolLM2 (recorded)"):
            for _ in range(4):
                with httpx.stream(
                    "POST", f"{api.url}/chat/completions", json=body, timeout=600
                ) as r:
                    for line in r.iter_lines():
                        if '"content": "' in line and '"content": ""' not in line:
                            break  # the first words: the reader leaves
                left.append(time.monotonic())
                deadline = time.monotonic() + 60
                while "end" not in proxy.chats()[-1] and time.monotonic() < deadline:
                    time.sleep(0.1)
            pid = llama_server._proc.pid
            before = _cpu_seconds(pid)
            time.sleep(3)
            busy = _cpu_seconds(pid) - before
    finally:
        proxy.close()
    chats = proxy.chats()
    assert len(chats) == 4
    for chat, gone in zip(chats, left, strict=True):
        assert "end" in chat, "the LLM's connection stayed open after the client left"
        # ~1-2 s on quiet cores; past 10 s seen once with the cores shared by an LLM benchmark.
        # Unfixed, the connection stayed open for the life of the process; with a check holding
        # the draft back and the worker not told, it closed when generation ended (~30 s).
        assert chat["end"] - gone < 15
    assert busy < 1.0, f"llama.cpp kept computing after every client left ({busy:.1f} s of CPU)"
