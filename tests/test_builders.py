"""The builders' pure parts: what a configured server's answering LLM is, without starting one,
and which client each backend setting builds."""

from __future__ import annotations

import pytest

from litrag.builders import build_answer_llm, thinking_off
from litrag.settings import Settings


def test_thinking_off_only_for_qwen3():
    assert thinking_off("Qwen/Qwen3-8B") == {
        "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}
    }
    assert thinking_off("local") == {}


def test_server_answer_llm_is_described_and_has_no_local_server(tmp_path):
    s = Settings(home=tmp_path, llm_url="http://127.0.0.1:9/v1", llm_model="Qwen/Qwen3-8B")
    with build_answer_llm(s, max_tokens=64) as answer_llm:
        assert answer_llm.description == "Qwen/Qwen3-8B at http://127.0.0.1:9/v1 (OpenAILike)"
        assert answer_llm.server is None and answer_llm.diagnose() is None
        assert answer_llm.llm.max_tokens == 64 and answer_llm.llm.timeout == 120.0
        assert answer_llm.llm.additional_kwargs == thinking_off("Qwen/Qwen3-8B")


def test_the_backend_setting_chooses_the_client_for_every_llm(tmp_path, monkeypatch):
    from llama_index.llms.openai_like import OpenAILike

    from litrag.builders import build_llm
    from litrag.models.vllm_server import VllmChatServer
    from litrag.settings import SettingsError, llm_backend, read_words

    url = "http://127.0.0.1:9/v1"
    assert llm_backend(Settings(home=tmp_path, llm_url=None, llm_backend=None)) == "local"
    assert llm_backend(Settings(home=tmp_path, llm_url=url, llm_backend=None)) == "openai-like"
    s = Settings(home=tmp_path, llm_url=url, llm_backend="vllm", llm_model="M", llm_context=32768)
    with build_answer_llm(s, max_tokens=64) as answer_llm:
        llm = answer_llm.llm
        assert isinstance(llm, VllmChatServer)
        assert answer_llm.description == f"M at {url} (llama-index-llms-vllm VllmServer)"
        assert llm.metadata.context_window == 32768 and llm.max_tokens == 64
        assert llm.api_url == url + "/chat/completions"
    # segmentation: the same client, at the segmenter's own server when one is set
    seg = build_llm(Settings(home=tmp_path, llm_url=url, llm_backend="vllm", segment_url=None))
    assert isinstance(seg, VllmChatServer) and seg.max_tokens is None  # no limit sent
    other = "http://127.0.0.1:10/v1"
    s = Settings(home=tmp_path, llm_url=url, segment_url=other, segment_model="S", llm_backend=None)
    seg = build_llm(s)
    assert isinstance(seg, OpenAILike) and (seg.api_base, seg.model) == (other, "S")
    # local with a URL set: the packaged model answers, reading its best blocks within a budget
    s = Settings(home=tmp_path, llm_url=url, llm_backend="local", read_words=None)
    assert build_llm(s) is None and read_words(s) > 0
    monkeypatch.setenv("LITRAG_LLM_BACKEND", "VLLM")
    assert Settings().llm_backend == "vllm"
    monkeypatch.setenv("LITRAG_LLM_BACKEND", "tgi")
    with pytest.raises(SettingsError, match="LITRAG_LLM_BACKEND must be one of openai-like, vllm"):
        Settings()
