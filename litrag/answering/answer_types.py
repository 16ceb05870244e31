"""What an answer is: its text, the blocks it used (``Source``), what produced it, and the run an
engine fills while it streams. ``BookQueryEngine`` and the routed ``NarrativeQueryEngine`` both
fill an ``AnswerRun`` and hand it back in the response's metadata (``RUN_KEY``); ``AnswerStream``
reads either the same way, so the CLI, the UI and the eval never know which engine answered.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from llama_index.core.base.response.schema import RESPONSE_TYPE, StreamingResponse
from llama_index.core.bridge.pydantic import BaseModel, ConfigDict, Field
from llama_index.core.schema import NodeWithScore

from litrag.retrieval.evidence import evidence_text
from litrag.segment.parser import CONTEXT_JOIN


def passage(nws: NodeWithScore) -> str:
    """The block as the reader (and the LLM) should see it: context sentences around the text."""
    node = nws.node
    m = node.metadata
    body = node.get_content()
    before, after = m.get("context_before") or "", m.get("context_after") or ""
    return f"{before + CONTEXT_JOIN if before else ''}{body}{CONTEXT_JOIN + after if after else ''}"


class Source(BaseModel):
    """One block an answer used, as cited."""

    rank: int = Field(
        description="1-based position in the prompt: retrieval order, or reading order when the "
        "engine's passage_order is 'story'."
    )
    score: float | None = Field(default=None, description="Retrieval (or reranker) score.")
    node_id: str = Field(description="The block's node id in the vector store.")
    book_id: str = Field(description="Book id, as `litrag books` lists it.")
    book_title: str = Field(description="Book title.")
    chapter_index: int = Field(description="1-based chapter in reading order (0: front matter).")
    chapter_title: str = Field(description="Chapter heading.")
    subtitle: str = Field(description="The block's subtitle.")
    sentence_from: int = Field(description="First sentence of the block (1-based, in chapter).")
    sentence_to: int = Field(description="Last sentence of the block (inclusive).")
    text: str = Field(description="The passage, with its context sentences.")
    excerpt: str | None = Field(
        default=None,
        description="What the LLM read of the passage when the engine cut it (a routed "
        "engine's excerpts; '[...]' marks left-out sentences); None: it read the whole passage.",
    )
    evidence: str | None = Field(
        default=None,
        description="The paragraph of the block that ranked it (retrieval through paragraph "
        "children), the part a reader is shown first; None: the block was ranked whole.",
    )

    @classmethod
    def from_node(cls, rank: int, nws: NodeWithScore, excerpt: str | None = None) -> Source:
        m = nws.node.metadata
        return cls(
            rank=rank,
            score=nws.score,
            node_id=nws.node.node_id,
            book_id=str(m.get("book_id", "")),
            book_title=str(m.get("title", "")),
            chapter_index=int(m.get("chapter_index", 0)),
            chapter_title=str(m.get("chapter_title", "")),
            subtitle=str(m.get("subtitle", "")),
            sentence_from=int(m.get("sentence_from", 0)),
            sentence_to=int(m.get("sentence_to", 0)),
            text=passage(nws),
            excerpt=excerpt,
            evidence=evidence_text(nws.node),
        )

    def citation(self) -> str:
        """One line: ``[1] Title, Chapter heading (ch. 1), sentences 48-57: subtitle``."""
        return (
            f"[{self.rank}] {self.book_title}, {self.chapter_title} (ch. {self.chapter_index}), "
            f"sentences {self.sentence_from}-{self.sentence_to}: {self.subtitle}"
        )


AnswerMode = Literal["llm", "extractive", "none"]


class CheckVerdict(BaseModel):
    """What one check (``litrag.answering.checks``) decided, as the answer records it."""

    model_config = ConfigDict(frozen=True)

    check: str = Field(description="The check's name.")
    decision: Literal["keep", "hold", "withdraw"] = Field(
        description="keep: the text stands; withdraw: the reply replaces it; hold (while a "
        "draft streams): nothing from hold_at on is sent until the draft is finished."
    )
    names: list[str] = Field(
        default_factory=list, description="What the check found (names, numbers, words)."
    )
    hidden: list[str] = Field(
        default_factory=list,
        description="Of those, names the reader has not met (named nowhere, not even here, in "
        "what is shown: the answer's draft has them replaced).",
        exclude=True,
    )
    reply: str | None = Field(default=None, description="The reply given instead, on withdraw.")
    hold_at: int | None = Field(
        default=None, description="On hold: the offset in the draft where sending stops."
    )


class Answer(BaseModel):
    """A finished answer: text, the blocks it used, and what produced it. Immutable: a change
    is a new answer (``model_copy(update=...)``)."""

    model_config = ConfigDict(frozen=True)

    question: str = Field(description="The question as asked.")
    standalone_question: str | None = Field(
        default=None, description="In a chat: the follow-up rewritten with the history."
    )
    text: str = Field(description="The answer (partial when `error` is set).")
    sources: list[Source] = Field(description="Every block the answer was given, in order.")
    mode: AnswerMode = Field(
        description="llm; extractive (no LLM); none (nothing retrieved, no LLM call)."
    )
    answered_by: str = Field(description="The LLM (or 'extractive') that produced the text.")
    retrieval: str = Field(description="How the sources were retrieved.")
    book_ids: list[str] = Field(description="The books searched.")
    upto_chapter: int | dict[str, int] | None = Field(
        default=None, description="The spoiler limit the retrieval obeyed."
    )
    evidence: list[str] = Field(
        default_factory=list, description="The sentences an extractive answer rests on."
    )
    error: str | None = Field(default=None, description="One line, when the LLM failed.")
    withheld: list[str] = Field(
        default_factory=list,
        description="Names the check withheld (litrag.answering.name_check): the question's "
        "that the book never mentions within the limit (the LLM was not called), or the draft "
        "answer's that no source names (the draft was replaced; one the book does not write up "
        "to a spoiler limit is given as '[a name not met yet]'); empty: nothing was withheld.",
    )
    draft: str | None = Field(
        default=None,
        description="The LLM's draft when the name check replaced it (streamed, then withdrawn; "
        "under a spoiler limit streamed only up to a name it might withdraw, and a name not met "
        "yet replaced).",
    )
    route: dict[str, Any] | None = Field(
        default=None,
        description="How a routed engine (litrag.narrative.engine) chose what to read: tool, "
        "kwargs, reason, by (rules or agent); None: plain passage retrieval, no router.",
    )
    checks: list[CheckVerdict] = Field(
        default_factory=list,
        description="The checks that ran, in order, and what each decided (the first to "
        "withdraw ends the run): on the question before the LLM, then on its draft.",
    )


@dataclass
class AnswerRun:
    """What one question produced, shared by the stream and the final ``Answer``: an engine
    creates it, fills ``sources`` before the LLM is called and ``text`` as it streams."""

    question: str
    sources: list[Source]
    mode: AnswerMode
    answered_by: str
    retrieval: str
    book_ids: list[str]
    upto_chapter: Any
    text: str = ""
    evidence: list[str] = field(default_factory=list)
    error: str | None = None
    standalone_question: str | None = None
    deltas: int = 0
    route: dict[str, Any] | None = None
    withheld: list[str] = field(default_factory=list)
    draft: str | None = None  # set when a check withdrew the draft
    checks: list[CheckVerdict] = field(default_factory=list)
    # Set from any thread when the reader left: the engine stops at the LLM's next token and
    # closes its connection, even while a worker thread is inside the stream (issue 50, bug 10).
    left: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def answer(self, text: str | None = None) -> Answer:
        return Answer(
            question=self.question,
            standalone_question=self.standalone_question,
            text=(self.text if text is None else text).strip(),
            sources=self.sources,
            mode=self.mode,
            answered_by=self.answered_by,
            retrieval=self.retrieval,
            book_ids=self.book_ids,
            upto_chapter=self.upto_chapter,
            evidence=self.evidence,
            error=self.error,
            withheld=self.withheld,
            draft=self.draft,
            route=self.route,
            checks=self.checks,
        )


RUN_KEY = "litrag_run"


class AnswerStream:
    """An answer on its way: iterate for text pieces; ``sources`` are known before the first.

    >>> stream = engine.ask("Who is Buck's last master?")   # doctest: +SKIP
    >>> for piece in stream: print(piece, end="")            # doctest: +SKIP
    >>> stream.answer().sources                              # doctest: +SKIP
    """

    def __init__(self, pieces: Iterator[str] | None, run: AnswerRun) -> None:
        self._pieces = pieces
        self._run = run
        self._text = "" if pieces is not None else run.text
        self._done = pieces is None

    @classmethod
    def from_response(cls, response: RESPONSE_TYPE) -> AnswerStream:
        run = (response.metadata or {}).get(RUN_KEY)
        if not isinstance(run, AnswerRun):
            raise TypeError("not a response of BookQueryEngine")
        if isinstance(response, StreamingResponse):
            return cls(iter(response.response_gen), run)
        return cls(None, run)

    @property
    def sources(self) -> list[Source]:
        return self._run.sources

    @property
    def mode(self) -> AnswerMode:
        return self._run.mode

    @property
    def answered_by(self) -> str:
        return self._run.answered_by

    @property
    def error(self) -> str | None:
        """Set once the stream ended on an LLM failure."""
        return self._run.error

    @property
    def standalone_question(self) -> str | None:
        return self._run.standalone_question

    @property
    def route(self) -> dict[str, Any] | None:
        """The routed engine's choice (tool, kwargs, reason), known before the first piece."""
        return self._run.route

    def __iter__(self) -> Iterator[str]:
        if self._done:
            if self._pieces is None and self._text:
                self._pieces = iter(())  # a finished answer is yielded once
                yield self._text
            return
        assert self._pieces is not None
        for piece in self._pieces:
            if piece:
                self._text += piece
                yield piece
        self._done = True

    def leave(self) -> None:
        """Say the reader left; safe from any thread, even while another one iterates this
        stream. The engine stops at the LLM's next token and closes its connection, so a
        server stops generating although no text was sent that could have shown the client
        gone (a check may hold the draft back for long)."""
        self._run.left.set()

    @property
    def left(self) -> bool:
        return self._run.left.is_set()

    def close(self) -> None:
        """Stop where it is (the reader left): the LLM's stream is closed, and with it its
        connection to the server, which then stops generating (``answer.close_replies``)."""
        if self._done:
            return
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()
        self._done = True

    def answer(self) -> Answer:
        """The finished answer (consumes whatever is left of the stream)."""
        for _ in self:
            pass
        if self._run.draft is not None:  # the streamed draft was withdrawn: the revised text
            return self._run.answer()
        return self._run.answer(self._text)
