"""A scripted LlamaIndex LLM for driving rare paths (garbage, timeouts) — never the only test;
``ScriptedServer``, the same behind an OpenAI-compatible HTTP endpoint, for the real CLI."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.custom import CustomLLM


class Sleep:
    """A scripted step that stalls the call (to trigger the caller's timeout)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Step = str | BaseException | Sleep | Callable[[list[ChatMessage]], str]


class ScriptedLLM(CustomLLM):
    """Replies with the next scripted step each call; records every request it saw."""

    model: str = "scripted"
    _steps: list[Step] = PrivateAttr(default_factory=list)
    _requests: list[list[ChatMessage]] = PrivateAttr(default_factory=list)

    def __init__(self, steps: Sequence[Step], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steps = list(steps)

    @property
    def requests(self) -> list[list[ChatMessage]]:
        return self._requests

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model, is_chat_model=True)

    def _next(self, messages: list[ChatMessage]) -> Step:
        self._requests.append(list(messages))
        if not self._steps:
            raise AssertionError("scripted LLM ran out of replies")
        step = self._steps.pop(0)
        return step(messages) if callable(step) and not isinstance(step, BaseException) else step

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        step = self._next(list(messages))
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            step = "{}"
        if isinstance(step, BaseException):
            raise step
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=step))

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return asyncio.run(self.achat(messages, **kwargs))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


# --------------------------------------------------------------- the same, over HTTP
class ScriptedServer(ThreadingHTTPServer):
    """An OpenAI-compatible chat endpoint whose replies come from ``reply(messages)``, for
    driving the real CLI (``--llm-url``); records every request body it answered."""

    daemon_threads = True

    def __init__(self, reply: Callable[[list[dict[str, Any]]], str]) -> None:
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _ScriptedHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # /v1/models, as a readiness probe would ask
        self._send({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

    def do_POST(self) -> None:
        server: ScriptedServer = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        server.requests.append(body)
        text = server.reply(body["messages"])
        words = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        self._send(
            {
                "id": f"chat-{len(server.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": words,
                    "completion_tokens": len(text.split()),
                    "total_tokens": words + len(text.split()),
                },
            }
        )

    def _send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass
