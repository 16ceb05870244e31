"""``litrag doctor`` and the portable llama.cpp build: the installed build's features against the
CPU's (the real build, real and doctored /proc/cpuinfo files), the checks one by one, and the
command as a user runs it (a real short generation with the packaged SmolLM2)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from litrag.cli.doctor import format_check, run_checks
from litrag.ingestion.checks import check_store
from litrag.models.checks import (
    build_features,
    build_record,
    check_cpu,
    check_llama_build,
    check_llm,
    check_models,
    cpu_info,
    unsupported_features,
)
from litrag.settings import Settings

REAL_INFO = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 0 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)


def cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n")
    return path


def test_build_features_are_the_ones_switched_on() -> None:
    assert build_features(REAL_INFO) == [
        "SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "LLAMAFILE", "OPENMP", "REPACK",
    ]  # fmt: skip


def test_features_the_cpu_lacks_are_named() -> None:
    features = build_features(REAL_INFO + "AVX512 = 1 | AMX_INT8 = 1 |")
    flags = "pni ssse3 avx avx2 f16c fma bmi2 avx512f".split()
    assert unsupported_features(features, flags) == ["AMX_INT8"]
    assert unsupported_features(features, []) == []  # flags unknown: no guess


def test_cpu_info_reads_model_and_flags(tmp_path: Path) -> None:
    info = cpu_info(cpuinfo(tmp_path, "fpu avx2 avx512f amx_tile"))
    assert info["model"] == "Test CPU" and info["flags"] == ["amx_tile", "avx2", "avx512f", "fpu"]
    assert check_cpu(info).detail.endswith("avx2 avx512f amx_tile")


@pytest.mark.llm
def test_installed_llama_cpp_is_the_portable_build() -> None:
    """What scripts/setup.sh installed: built by our script, and on x86-64 with nothing past AVX2,
    so it runs on every AVX2 CPU, whatever the build machine advertised."""
    record = build_record()
    assert record is not None, "llama-cpp-python was not installed by scripts/install_llama_cpp.sh"
    assert "GGML_NATIVE=OFF" in record["cmake_args"]
    check = check_llama_build(cpu_info())
    assert check.status == "ok", check.detail
    features = set(check.data["features"])
    if platform.machine() in ("x86_64", "AMD64"):
        assert {"AVX", "AVX2", "FMA", "F16C"} <= features
        assert not {f for f in features if f.startswith(("AVX512", "AMX", "AVX_VNNI"))}


@pytest.mark.llm
def test_a_build_the_cpu_cannot_run_fails_the_check(tmp_path: Path) -> None:
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the doctored flags are x86-64's")
    # a Sandy Bridge: AVX, but no AVX2, FMA, F16C or BMI2
    old_cpu = cpu_info(cpuinfo(tmp_path, "fpu pni ssse3 sse4_2 avx"))
    check = check_llama_build(old_cpu)
    assert check.status == "fail"
    assert "this CPU does not advertise AVX2 F16C FMA BMI2" in check.detail
    assert "illegal instruction" in check.detail and "install_llama_cpp.sh" in check.detail


def test_models_and_store_checks(tmp_path: Path) -> None:
    s = Settings(home=tmp_path / "home")
    models = check_models(tmp_path / "models")
    assert models.name == "models" and "qwen2.5-coder-1.5b" in models.detail
    store = check_store(s)
    assert store.status == "ok" and "embedded Qdrant Edge (not created yet)" in store.detail
    assert "0 books" in store.detail
    (s.home).mkdir(parents=True)
    (s.home / "books.json").write_text("{not json")
    broken = check_store(s)
    assert broken.status == "fail" and "books.json" in broken.detail


def test_unreachable_servers_are_named(tmp_path: Path) -> None:
    s = Settings(home=tmp_path, llm_url="http://127.0.0.1:9/v1", qdrant_url="http://127.0.0.1:9")
    llm = check_llm(s)
    assert llm.status == "fail" and llm.detail.startswith(
        "cannot reach the LLM server at http://127.0.0.1:9/v1"
    )
    store = check_store(s)
    assert store.status == "fail" and "http://127.0.0.1:9 is unreachable" in store.detail


def test_the_store_line_names_who_holds_it(tmp_path: Path) -> None:
    ui = "the litrag chat UI (pid 4242, http://127.0.0.1:7860)"
    store = check_store(Settings(home=tmp_path / "home"), held_by=ui)
    assert store.status == "ok" and store.detail.endswith(f"0 books · held by {ui}")


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A real TCP server on localhost that accepts every connection and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # read nothing, write nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


def test_a_server_that_never_answers_skips_the_generation(
    tmp_path: Path, silent_server: str
) -> None:
    """The reported hang: the LLM server accepts connections and never replies. The listing
    times out in seconds and the generation is not tried against it (it waited ~6 minutes: the
    client's 120 s timeout, three tries)."""
    s = Settings(
        home=tmp_path / "home", llm_url=silent_server, llm_backend="openai-like", qdrant_url=None
    )
    t0 = time.monotonic()
    checks = run_checks(s, generate=True)
    took = time.monotonic() - t0
    assert took < 20, f"run_checks took {took:.0f} s"
    by_name = {c.name: c for c in checks}
    assert [c.name for c in checks][-2:] == ["llm", "generation"]
    assert by_name["llm"].status == "fail"
    assert by_name["llm"].detail.startswith(f"cannot reach the LLM server at {silent_server}")
    generation = by_name["generation"]
    assert generation.status == "fail"
    assert generation.detail == (
        f"skipped: the LLM server at {silent_server} did not answer the models listing"
    )
    assert format_check(generation).startswith("FAIL generation  skipped: ")


def doctor_cli(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LITRAG_", "QDRANT_"))}
    clean["LITRAG_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "litrag.cli", "doctor", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.llm
def test_doctor_command_generates_with_the_local_model(tmp_path: Path) -> None:
    r = doctor_cli(tmp_path / "home", "--local-llm", "smollm2")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    names = [line[5:].split()[0] for line in lines]
    assert names == [
        "litrag", "cpu", "llama.cpp", "models", "embeddings", "store", "llm", "generation",
    ]  # fmt: skip
    generation = lines[-1]
    assert generation.startswith("ok   generation  smollm2 (local llama.cpp): '")
    assert "Traceback" not in r.stderr


def test_doctor_json_without_generation(tmp_path: Path) -> None:
    r = doctor_cli(tmp_path / "home", "--no-generate", "--json")
    checks = json.loads(r.stdout)
    assert [c["name"] for c in checks][-1] == "llm"
    assert r.returncode == (1 if any(c["status"] == "fail" for c in checks) else 0)
    cpu = next(c for c in checks if c["name"] == "cpu")
    assert cpu["data"]["arch"] == platform.machine()


class _HalfServer(BaseHTTPRequestHandler):
    """Lists one model; a generation gets ``self.server.reply``: "stall" (read the request,
    never answer) or "html" (a web server's 404 page, as a URL missing its /v1 meets)."""

    def do_GET(self) -> None:
        if self.server.reply == "html-everywhere":  # type: ignore[attr-defined]
            return self.do_POST()
        self._send(200, "application/json", json.dumps({"data": [{"id": "m"}]}))

    def do_POST(self) -> None:
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.reply == "stall":  # type: ignore[attr-defined]
            self.server.stop.wait(60)  # type: ignore[attr-defined]
            return
        page = (
            "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body>"
            "<h1>Not Found</h1><p>The requested URL was not found on this server.</p>"
            "<hr><address>Apache/2.4.41 Server at x Port 80</address></body></html>\n"
        )
        self._send(404, "text/html", page)

    def _send(self, code: int, kind: str, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def half_server(reply: str) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HalfServer)
    server.reply, server.stop = reply, threading.Event()  # type: ignore[attr-defined]
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.stop.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def test_doctor_command_finishes_on_a_server_that_never_answers(
    tmp_path: Path, silent_server: str
) -> None:
    """The report as a user runs it: LITRAG_LLM_URL accepts connections and never replies.
    ``litrag doctor`` returns within 30 s (it took ~6 minutes) and names the stalled server."""
    t0 = time.monotonic()
    r = doctor_cli(tmp_path / "home", env={"LITRAG_LLM_URL": silent_server}, timeout=60)
    took = time.monotonic() - t0
    assert took < 30, f"doctor took {took:.0f} s"
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert f"FAIL llm         cannot reach the LLM server at {silent_server}: timed out" in lines
    assert lines[-1].startswith(f"FAIL generation  skipped: the LLM server at {silent_server}")


def test_a_server_that_lists_models_but_stalls_on_generation(tmp_path: Path) -> None:
    """The listing answers, the generation never does: one try, ``SERVER_GENERATION_TIMEOUT``
    seconds (the client's 120 s and two retries held the doctor for minutes)."""
    with half_server("stall") as url:
        s = Settings(home=tmp_path / "home", llm_url=url, llm_model="m", llm_backend="openai-like")
        t0 = time.monotonic()
        checks = run_checks(s, generate=True)
        took = time.monotonic() - t0
    assert took < 30, f"run_checks took {took:.0f} s"
    llm, generation = checks[-2:]
    assert llm.status == "ok" and generation.status == "fail"
    assert generation.detail == (
        f"the LLM server at {url} listed its models but did not answer a 16-token generation "
        "in 20 s (stalled)"
    )


def test_an_html_error_page_is_one_short_line(tmp_path: Path) -> None:
    """A web server's 404 page was dumped whole into the generation line."""
    with half_server("html") as url:
        s = Settings(home=tmp_path / "home", llm_url=url, llm_model="m", llm_backend="openai-like")
        generation = run_checks(s, generate=True)[-1]
    assert generation.status == "fail"
    assert generation.detail == (
        "NotFoundError: 404 Not Found (an HTML page, not an OpenAI-compatible API: is the URL "
        "the server's /v1?)"
    )
    assert "<" not in generation.detail


def test_a_web_server_that_is_no_llm_server_is_said_so(tmp_path: Path) -> None:
    """A 404 for the models listing: the server answered, so not "cannot reach"; the line names
    the status, and the skipped generation says the listing failed (not "did not answer")."""
    with half_server("html-everywhere") as url:
        s = Settings(home=tmp_path / "home", llm_url=url, llm_model="m", llm_backend="openai-like")
        llm, generation = run_checks(s, generate=True)[-2:]
    assert (llm.status, generation.status) == ("fail", "fail")
    assert llm.detail == (
        f"the LLM server at {url} answered its models listing with HTTP 404 Not Found "
        "(is the URL the server's /v1?)"
    )
    assert generation.detail == (
        f"skipped: the LLM server at {url} failed the models listing (HTTP 404)"
    )
