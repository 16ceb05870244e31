"""``litrag serve-api``: the library as an OpenAI-compatible HTTP API (issue 37).

Any OpenAI client (the ``openai`` package, LlamaIndex's ``OpenAILike``, Open WebUI) asks a book:
``GET /v1/models`` lists each ingested book as ``litrag/<book_id>`` and the whole library as
``litrag/all``; ``POST /v1/chat/completions`` answers, streamed (SSE) or whole, through the same
``ChatService`` as ``litrag chat`` (one engine per book, spoiler limit and settings; the same
locks and LLM), so an answer here is the chat's answer.

- **The question** is the last user message; the turns before it are the history, and a
  follow-up is rewritten with it as the chat does (``ChatService.condense``). System messages are
  ignored (the engine's own prompt is the one that cites), as are sampling fields.
- **The spoiler limit** is ``"litrag": {"upto_chapter": 7}`` in the body, or the model
  ``litrag/pg215@7``; given both, the smaller holds. It is the store query's hard filter, and a
  stream never sends what a check might withdraw (``litrag.answering.checks``).
- **The reply** ends with numbered citations (chapter, block subtitle); the structured sources,
  withheld names, route and any LLM error are in ``"litrag"`` of the response (streamed: of the
  last chunk before ``[DONE]``). A failed LLM is reported as the chat reports it: the answer so
  far, the error noted under it, the sources kept (HTTP 200, ``litrag.error`` set).
- **A model** is also read alone (``GET /v1/models/{id}``, the client's ``models.retrieve``).
- **Errors** have OpenAI's shape ``{"error": {"message", "type", "code"}}``: 400 bad body, model
  name or limit (checked by ``AskRequest``, as for ``litrag ask``) or a Host it does not serve
  (``litrag.app.hosts``), 401 bad key, 404 unknown model, 413 body too large, 415 a body not
  sent as ``application/json`` (a web page can post ``text/plain`` anywhere without asking),
  429 rate limited, 500 (the same shape) for anything unforeseen.
- **A client that leaves mid-stream** ends the answer: the LLM's stream is closed, so its
  connection to the server goes and llama.cpp stops generating (``Reply.body``).

Why FastAPI on uvicorn: gradio already installs both (no new dependency), pydantic models are
its request and response schema, and starlette's ``StreamingResponse`` iterates a blocking
answer stream in its thread pool, so the engine needs no async twin.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, Literal

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from litrag.answering.answer_types import Answer, AnswerStream, Source
from litrag.answering.ask_request import AskRequest, AskRequestError
from litrag.answering.name_check import UNNAMED_NOTE, dropped_note
from litrag.app.display import shown_subtitle
from litrag.app.hosts import LOOPBACK_NAMES, HostCheck
from litrag.app.service import ChatService, Turn

PREFIX = "litrag/"
ALL = "all"
MAX_BODY_BYTES = 256 * 1024  # a chat of questions, not documents (a question is <= 2,000 chars)
MAX_MESSAGES = 200
RATE_PER_MINUTE = 60  # requests per client address; 0: no limit
SOURCES_HEAD = "\n\nSources:\n"
MAX_LIMIT_DIGITS = 6  # '@<chapter>': no book has a million chapters (int() of 5,000 digits fails)

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An OpenAI-style error: HTTP status, one-line message, type and code."""

    def __init__(self, status: int, message: str, kind: str, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.kind, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


def bad_request(message: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, "invalid_request_error", code)


# ------------------------------------------------------------------------------ the schema
class ContentPart(BaseModel):
    """One part of a message's content (OpenAI's list form); only text parts are read."""

    model_config = ConfigDict(extra="ignore")
    type: str = Field(description="'text' (other parts, such as images, are ignored).")
    text: str | None = Field(default=None, description="The text of a text part.")


class Message(BaseModel):
    """One turn of the chat as the client sends it."""

    model_config = ConfigDict(extra="ignore")
    role: str = Field(description="'user', 'assistant' or 'system' (system is ignored).")
    content: str | list[ContentPart] | None = Field(
        default=None, description="The text, or a list of content parts."
    )

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""


class LitragOptions(BaseModel):
    """litrag's own request fields, under ``"litrag"`` in the body."""

    model_config = ConfigDict(extra="forbid", strict=True)
    upto_chapter: int | None = Field(
        default=None,
        description="Spoiler limit: nothing past this chapter is searched or cited (0: front "
        "matter only); checked as `litrag ask --upto-chapter` is.",
    )


class ChatRequest(BaseModel):
    """``POST /v1/chat/completions``: OpenAI's fields that matter here, others ignored."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field(description="'litrag/<book_id>', 'litrag/all', optionally '@<chapter>'.")
    messages: list[Message] = Field(
        min_length=1, max_length=MAX_MESSAGES, description="The chat; the last user turn asks."
    )
    stream: bool = Field(default=False, description="Server-sent events, ending with [DONE].")
    litrag: LitragOptions | None = Field(default=None, description="The spoiler limit.")


class LitragResult(BaseModel):
    """What litrag adds to a completion (``"litrag"``): the answer's evidence and provenance."""

    sources: list[Source] = Field(description="The blocks the answer was given, as cited.")
    withheld: list[str] = Field(
        description="Names the name check withheld: the question's that the book never mentions "
        "within the limit, or (without a limit) a withdrawn draft's; empty: none."
    )
    draft_withdrawn: bool = Field(
        description="The LLM's draft named someone no source names and was replaced."
    )
    route: dict[str, Any] | None = Field(description="The narrative router's choice, if any.")
    upto_chapter: int | None = Field(description="The spoiler limit the retrieval obeyed.")
    mode: str = Field(description="llm, extractive or none (see litrag.answering.answer_types).")
    answered_by: str = Field(description="The LLM (or 'extractive') that wrote the text.")
    standalone_question: str | None = Field(description="The follow-up as it was searched.")
    error: str | None = Field(description="One line when the LLM failed (the text is partial).")


class ModelCard(BaseModel):
    """One entry of ``GET /v1/models``: a book, or the whole library."""

    id: str = Field(description="'litrag/<book_id>' or 'litrag/all'.")
    object: Literal["model"] = Field(default="model", description="OpenAI's object type.")
    created: int = Field(description="Unix time the server started (books carry no such time).")
    owned_by: str = Field(default="litrag", description="Always 'litrag'.")
    name: str = Field(description="The book's title (or 'The whole library').")
    chapters: int = Field(description="Chapters of the book (the most of any, for 'all').")


# ------------------------------------------------------------------------------ the pieces
class RateLimiter:
    """At most ``per_minute`` requests per client address in any 60 s (a sliding window); 0:
    no limit. The address is the socket's peer: ``litrag serve-api`` believes X-Forwarded-For
    only from the proxies the operator names (``trusted_proxies``), so a forged header cannot
    make a client new."""

    def __init__(self, per_minute: int) -> None:
        if per_minute < 0:
            raise ValueError(f"a rate limit is 0 (none) or more a minute, not {per_minute}")
        self.per_minute = per_minute
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, client: str) -> bool:
        if not self.per_minute:
            return True
        now = time.monotonic()
        with self._lock:
            seen = self._seen.setdefault(client, deque())
            while seen and now - seen[0] >= 60:
                seen.popleft()
            if len(seen) >= self.per_minute:
                return False
            seen.append(now)
            return True


def unknown_model(model: str, known: list[str]) -> ApiError:
    shown = repr(model if len(model) <= 100 else model[:100] + "…")
    message = f"the model {shown} does not exist; known: {', '.join(known)}"
    return ApiError(404, message, "invalid_request_error", "model_not_found")


def resolve_model(model: str, service: ChatService) -> tuple[list[str], int | None, int]:
    """``(book ids, limit from an '@N' suffix, chapters)``; 404 for an unknown model."""
    name, at, suffix = model.partition("@")
    books = {r.book_id: r for r in service.books()}
    wanted = name.removeprefix(PREFIX) if name.startswith(PREFIX) else None
    if wanted == ALL and books:
        ids = list(books)
    elif wanted in books:
        ids = [wanted]
    else:
        raise unknown_model(model, [PREFIX + ALL, *(PREFIX + b for b in books)])
    limit = None
    if at:  # ASCII digits only: '²'.isdigit() holds and int('²') fails
        if not (suffix.isascii() and suffix.isdigit() and len(suffix) <= MAX_LIMIT_DIGITS):
            shown = suffix if len(suffix) <= 20 else suffix[:20] + "…"
            raise bad_request(
                f"the model's spoiler limit must be a chapter number, as in "
                f"'{name}@7', got {shown!r}",
                "invalid_model",
            )
        limit = int(suffix)
    return ids, limit, max(books[b].chapters for b in ids)


def split_chat(messages: list[Message]) -> tuple[str, list[Turn]]:
    """The question (the last user turn) and the finished turns before it, as ``Turn``s; an
    assistant turn loses the citations this API appended to it."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise bad_request("the chat has no user message to answer")
    last = users[-1]
    turns: list[Turn] = []
    question: str | None = None
    for m in messages[:last]:
        if m.role == "user":
            question = m.text()
        elif m.role == "assistant" and question is not None:
            turns.append(Turn(question, m.text().split(SOURCES_HEAD, 1)[0]))
            question = None
    return messages[last].text(), turns


def citations(sources: list[Source]) -> str:
    """The numbered citations appended to the answer text (chapter, and the block's subtitle as
    a reader is shown it: ``litrag.app.display``)."""
    if not sources:
        return ""
    shown = [s.model_copy(update={"subtitle": shown_subtitle(s)}) for s in sources]
    return SOURCES_HEAD + "\n".join(s.citation() for s in shown)


def error_note(answer: Answer) -> str:
    """The LLM failure under the answer, as the chat shows it."""
    if not answer.error:
        return ""
    return ("\n\n" if answer.text else "") + f"⚠ {answer.error}."


def shown(answer: Answer, limit: int | None) -> tuple[str, list[str]]:
    """The answer's text and withheld names as this API shows them. A name withdrawn from a
    draft under a spoiler limit is named nowhere: the name check already names none the reader
    has not met (the model may know it from later in the book); here no withdrawn name at all
    is said, and ``draft_withdrawn`` tells that it happened."""
    if answer.draft is None or limit is None:
        return answer.text, answer.withheld
    return answer.text.replace(dropped_note(answer.withheld), UNNAMED_NOTE).strip(), []


def result_of(answer: Answer, limit: int | None) -> dict[str, Any]:
    return LitragResult(
        sources=answer.sources,
        withheld=shown(answer, limit)[1],
        draft_withdrawn=answer.draft is not None,
        route=answer.route,
        upto_chapter=limit,
        mode=answer.mode,
        answered_by=answer.answered_by,
        standalone_question=answer.standalone_question,
        error=answer.error,
    ).model_dump()


# ------------------------------------------------------------------------------ the app
def create_app(
    service: ChatService,
    *,
    api_key: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    rate_per_minute: int = RATE_PER_MINUTE,
    allowed_hosts: Iterable[str] = LOOPBACK_NAMES,
) -> FastAPI:
    """The API over ``service``; with ``api_key`` every request needs ``Bearer <key>``; only
    requests whose Host is one of ``allowed_hosts`` (``*``: any) are served."""
    app = FastAPI(title="litrag", docs_url=None, redoc_url=None, openapi_url=None)
    limiter = RateLimiter(rate_per_minute)
    started = int(time.time())

    def host_refused(line: str) -> JSONResponse:
        return ApiError(400, line, "invalid_request_error", "host_not_allowed").response()

    app.add_middleware(HostCheck, allowed=allowed_hosts, respond=host_refused)

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(Exception)
    async def _unforeseen(_request: Request, exc: Exception) -> JSONResponse:
        logger.error("the API failed: %s", exc, exc_info=exc)
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        message = f"internal error: {type(exc).__name__}: {first}".rstrip(": ")
        return ApiError(500, message, "server_error", "internal_error").response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        return ApiError(exc.status_code, str(exc.detail), kind, str(exc.status_code)).response()

    def guard(request: Request) -> None:
        """The rate limit (counted before the key, so guessing keys is limited too), then the
        key, compared in constant time."""
        client = request.client.host if request.client else "?"
        if not limiter.allow(client):
            raise ApiError(
                429,
                f"more than {rate_per_minute} requests a minute from {client}; wait",
                "rate_limit_error",
                "rate_limit_exceeded",
            )
        given = request.headers.get("authorization", "").encode()
        if api_key is not None and not hmac.compare_digest(given, f"Bearer {api_key}".encode()):
            raise ApiError(
                401,
                "a valid API key is required (Authorization: Bearer KEY)",
                "invalid_request_error",
                "invalid_api_key",
            )

    async def read_body(request: Request) -> bytes:
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            raise ApiError(
                415,
                f"the body must be JSON sent as Content-Type: application/json, got "
                f"{kind[:60] or 'no Content-Type'}",
                "invalid_request_error",
                "unsupported_media_type",
            )
        too_large = ApiError(
            413,
            f"the request is larger than {max_body_bytes:,} bytes",
            "invalid_request_error",
            "request_too_large",
        )
        if int(request.headers.get("content-length") or 0) > max_body_bytes:
            raise too_large
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                raise too_large
        return body

    def cards() -> list[ModelCard]:
        books = service.books()
        most = max((r.chapters for r in books), default=0)
        every = ModelCard(id=PREFIX + ALL, created=started, name="The whole library", chapters=most)
        return [every] + [
            ModelCard(id=PREFIX + r.book_id, created=started, name=r.title, chapters=r.chapters)
            for r in books
        ]

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        guard(request)
        return {"object": "list", "data": [c.model_dump() for c in cards()]}

    @app.get("/v1/models/{model:path}")
    async def model(request: Request, model: str) -> dict[str, Any]:
        guard(request)
        known = cards()
        for card in known:
            if card.id == model:
                return card.model_dump()
        raise unknown_model(model, [c.id for c in known])

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        guard(request)
        body = await read_body(request)
        try:
            chat = ChatRequest.model_validate_json(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err.get("loc", ())) or "body"
            raise bad_request(f"{where}: {err.get('msg', 'invalid')}") from None
        book_ids, suffix, chapters = resolve_model(chat.model, service)
        limits = [
            n for n in (suffix, chat.litrag.upto_chapter if chat.litrag else None) if n is not None
        ]
        question, history = split_chat(chat.messages)
        try:
            ask = AskRequest.parse(
                question=question, books=book_ids, upto_chapter=min(limits, default=None)
            )
            ask.check_chapters(chapters)
        except AskRequestError as exc:
            raise bad_request(str(exc)) from None

        def start() -> tuple[AnswerStream, str]:
            return service.ask(
                ask.question, ask.books, upto_chapter=ask.upto_chapter, history=history
            )

        try:
            stream, standalone = await run_in_threadpool(start)
        except ValueError as exc:  # a book removed meanwhile, an empty question
            raise bad_request(str(exc)) from None
        reply = Reply(chat.model, ask.question, ask.upto_chapter, stream, standalone)
        if chat.stream:
            return ClosingStream(
                reply.body(service, request),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        answer = await run_in_threadpool(service.finished, stream, ask.question, standalone)
        return reply.completion(answer)

    return app


class ClosingStream(StreamingResponse):
    """A ``StreamingResponse`` that closes its body once the response is over, sent whole or
    abandoned. Why: when the client leaves, starlette cancels the task that sends the body,
    which leaves the body's generator suspended; its ``finally`` (``Reply.body``: closing the
    LLM's stream) would wait for the garbage collector, and a cancelled task's reference cycles
    kept it, and the LLM's connection, alive for good."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()


class Reply:
    """One answer in OpenAI's shapes: a whole completion, or its stream of chunks."""

    def __init__(
        self, model: str, question: str, limit: int | None, stream: AnswerStream, standalone: str
    ) -> None:
        self.model, self.question, self.limit = model, question, limit
        self.stream, self.standalone = stream, standalone
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def completion(self, answer: Answer) -> dict[str, Any]:
        text = shown(answer, self.limit)[0] + error_note(answer) + citations(answer.sources)
        return {
            **self._head("chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "litrag": result_of(answer, self.limit),
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {**self._head("chat.completion.chunk"), "choices": [choice], **extra}
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    async def body(self, service: ChatService, request: Request) -> AsyncIterator[str]:
        """``events`` for starlette, each chunk computed in a worker thread. When the client
        leaves, the answer stream is told at once (``AnswerStream.leave``: the engine stops at
        the LLM's next token and closes its connection, so llama.cpp stops generating); then
        the events and the stream under them are closed, once the worker is out of them."""
        events = self.events(service)
        busy = threading.Lock()  # a generator cannot be closed while a worker runs it

        def step() -> str | None:
            with busy:
                return next(events, None)

        try:
            while (chunk := await self._next(step, request)) is not None:
                yield chunk
        finally:
            self.stream.leave()  # a no-op on a finished stream
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._close, events, busy)

    async def _next(self, step: Callable[[], str | None], request: Request) -> str | None:
        """The next chunk. Why not ``anyio.to_thread.run_sync``: its cancellation waits for
        the thread, and a check may hold the draft back for long, so no chunk is sent that
        would show the client gone and starlette's cancel would wait with it; here the wait
        ends at once, and while it lasts the client is asked every half second if it left."""
        work = asyncio.get_running_loop().run_in_executor(None, step)
        while True:
            finished, _ = await asyncio.wait({work}, timeout=0.5)
            if finished:
                return work.result()
            if await request.is_disconnected():
                self.stream.leave()

    def _close(self, events: Iterator[str], busy: threading.Lock) -> None:
        with busy:
            close = getattr(events, "close", None)
            if close is not None:
                close()
            self.stream.close()

    def events(self, service: ChatService) -> Iterator[str]:
        """SSE chunks: the text as it comes (an LLM's draft as far as the engine's checks let it
        through), then what the finished answer adds (the rest of a checked draft, or the revised
        reply for a withdrawn one; the error note; the citations), then a last chunk with
        ``litrag``, then ``[DONE]``."""
        yield self._chunk({"role": "assistant", "content": ""})
        sent = ""  # the engine's stream holds back what a check may withdraw (answering.checks)
        for piece in self.stream:
            piece = piece if sent else piece.lstrip()  # no leading blanks
            if piece:
                yield self._chunk({"content": piece})
                sent += piece
        if self.stream.left:  # nobody to send the rest to
            return
        answer = service.finished(self.stream, self.question, self.standalone)
        rest = ""  # the draft stands: the stream sent all of it
        if answer.draft is not None:  # withdrawn: what was sent holds nothing a check found
            rest = ("…\n\n" if sent else "") + shown(answer, self.limit)[0]
        rest += error_note(answer) + citations(answer.sources)
        if rest:
            yield self._chunk({"content": rest})
        yield self._chunk({}, "stop", litrag=result_of(answer, self.limit))
        yield "data: [DONE]\n\n"
