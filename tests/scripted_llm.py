"""Scripted LlamaIndex LLMs for driving rare paths (garbage, timeouts, a function-calling model's
tool calls) — never the only test; ``ScriptedServer``, a scripted OpenAI-compatible HTTP endpoint,
for the real CLI."""

from __future__ import annotations

import asyncio
import json
import re
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
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection


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

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any):
        """The next reply, streamed a word at a time (``delta`` per piece)."""
        reply = self.chat(messages, **kwargs).message.content or ""

        def pieces():
            text = ""
            for piece in re.findall(r"\S+\s*", reply):
                text += piece
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=piece
                )

        return pieces()

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


def send_json(handler: BaseHTTPRequestHandler, code: int, payload: Any) -> None:
    """One JSON reply with its status, from any scripted endpoint's handler."""
    data = json.dumps(payload).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


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
        send_json(self, 200, payload)

    def log_message(self, *args: object) -> None:
        pass


class ToolCall:
    """A scripted step that asks for one tool call (as a function-calling model replies)."""

    def __init__(self, tool: str, /, **kwargs: Any) -> None:
        self.name = tool
        self.kwargs = kwargs


class ScriptedToolLLM(FunctionCallingLLM):
    """A function-calling LLM that replies with the next scripted step: a ``ToolCall`` (the
    reply asks for that tool) or a string (the final answer). Records every request, tools
    included, so a test reads what the agent sent back after a call."""

    model: str = "scripted-tools"
    _steps: list[ToolCall | str] = PrivateAttr(default_factory=list)
    _requests: list[list[ChatMessage]] = PrivateAttr(default_factory=list)
    _tools: list[list[str]] = PrivateAttr(default_factory=list)

    def __init__(self, steps: Sequence[ToolCall | str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steps = list(steps)

    @property
    def requests(self) -> list[list[ChatMessage]]:
        return self._requests

    @property
    def tools_offered(self) -> list[list[str]]:
        return self._tools

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name=self.model, is_chat_model=True, is_function_calling_model=True
        )

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            msg = user_msg if isinstance(user_msg, ChatMessage) else ChatMessage(content=user_msg)
            messages.append(msg)
        self._tools.append([t.metadata.name for t in tools])
        return {"messages": messages}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        calls = response.message.additional_kwargs.get("tool_calls", [])
        if not calls and error_on_no_tool_call:
            raise ValueError("no tool call in the reply")
        return [ToolSelection(**c) for c in calls]

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self._requests.append(list(messages))
        if not self._steps:
            raise AssertionError("scripted LLM ran out of replies")
        step = self._steps.pop(0)
        if isinstance(step, ToolCall):
            call = {"tool_id": f"call-{len(self._requests)}", "tool_name": step.name}
            call["tool_kwargs"] = step.kwargs  # type: ignore[assignment]
            msg = ChatMessage(
                role=MessageRole.ASSISTANT, content="", additional_kwargs={"tool_calls": [call]}
            )
            return ChatResponse(message=msg)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=step))

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any):
        raise NotImplementedError

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any):
        raise NotImplementedError

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError
