"""The builders' pure parts: what a configured server's answering LLM is, without starting one."""

from __future__ import annotations

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
