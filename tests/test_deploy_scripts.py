"""The GPU scripts on a machine without a GPU: ``scripts/deploy_vllm.sh --dry-run`` prints the
``vllm serve`` commands and writes a settings file that litrag reads as the vllm backend (with
``--all``, the served embedder and reranker too);
``scripts/gpu_check.sh`` says there is no GPU and exits 0."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_deploy_dry_run_writes_settings_litrag_reads(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_")}
    env["LITRAG_HOME"] = str(tmp_path)
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "deploy_vllm.sh"), "--dry-run", "--generator", "G/Gen"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    serve = [ln for ln in r.stdout.splitlines() if " vllm serve " in ln]
    assert len(serve) == 2  # generator and segmenter; embedder and reranker only when asked
    assert "serve G/Gen --host 127.0.0.1 --port 8000" in serve[0]
    assert "Qwen/Qwen3-4B-Instruct-2507" in serve[1] and "--port 8001" in serve[1]
    settings = tmp_path / "vllm.env"
    assert oct(settings.stat().st_mode & 0o777) == "0o600"  # it holds the API key
    show = (
        "from litrag.settings import Settings, llm_backend; s = Settings(); "
        "print(llm_backend(s), s.llm_url, s.llm_model, s.segment_url, s.llm_context, "
        "bool(s.llm_api_key))"
    )
    assert settings_read_back(settings, show, env) == [
        "vllm",
        "http://127.0.0.1:8000/v1",
        "G/Gen",
        "http://127.0.0.1:8001/v1",
        "32768",
        "True",
    ]


def test_deploy_all_four_writes_one_settings_file_with_every_url(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITRAG_")}
    env["LITRAG_HOME"] = str(tmp_path)
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "deploy_vllm.sh"), "--dry-run", "--all"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    serve = [ln for ln in r.stdout.splitlines() if " vllm serve " in ln]
    assert [ln.split(":")[0] for ln in serve] == ["generator", "segmenter", "embedder", "reranker"]
    assert "serve Qwen/Qwen3-Embedding-0.6B --host 127.0.0.1 --port 8002" in serve[2]
    assert "serve Qwen/Qwen3-Reranker-0.6B --host 127.0.0.1 --port 8003" in serve[3]
    assert '"is_original_qwen3_reranker": true' in serve[3] and "--runner pooling" in serve[3]
    settings = tmp_path / "vllm.env"
    assert "not read by litrag" not in settings.read_text()
    show = (
        "from litrag.settings import Settings; s = Settings(); "
        "print(s.llm_url, s.segment_url, s.embed_url, s.rerank_url, "
        "s.llm_api_key == s.embed_api_key == s.rerank_api_key != None)"
    )
    assert settings_read_back(settings, show, env) == [
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8001/v1",
        "http://127.0.0.1:8002/v1",
        "http://127.0.0.1:8003/v1",
        "True",
    ]


def test_gpu_check_without_a_gpu_says_so_and_exits_0():
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine: run scripts/gpu_check.sh itself (minutes)")
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0
    assert r.stdout.strip() == (
        "gpu_check: no NVIDIA GPU on this machine (nvidia-smi finds none): nothing to check"
    )


def settings_read_back(settings: Path, show: str, env: dict[str, str]) -> list[str]:
    """What litrag's Settings print (``show``) once the written settings file is sourced."""
    r = subprocess.run(
        ["bash", "-c", f"source {settings} && {sys.executable} -c '{show}'"],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.split()
