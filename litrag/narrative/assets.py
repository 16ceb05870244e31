"""Per-block LLM assets: one call per plot block returning entities, relations, events and facts.

The machinery is segmentation's: ``LLMCaller`` (sampling per request, timeouts, the persisted
reply cache, so a killed run replays every finished call from disk), ``await_all`` (calls in
flight, a progress bar), tolerant JSON extraction. Each reply is checked item by item
(``schema.check_extraction``); one with problems is retried with the problems stated, and what
the best reply held is kept when the retries run out. Every block ends in one outcome, never an
exception: ``valid``, ``repaired`` (some items dropped), ``failed`` (nothing ever parsed or every
call failed), ``empty`` (no text). Only an LLM that cannot be reached at all stops the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import BaseModel, Field
from llama_index.core.llms import LLM

from litrag.narrative.grounding import ground_extraction
from litrag.narrative.jsonfile import read_model, write_model
from litrag.narrative.schema import (
    MAX_ENTITIES,
    MAX_EVENTS,
    MAX_FACTS,
    MAX_RELATIONS,
    BlockExtraction,
    CheckedExtraction,
    check_extraction,
    response_schema,
)
from litrag.segment.cache import ResponseCache
from litrag.segment.llm_calls import LLMCaller, LLMUnavailableError, Sampling, await_all
from litrag.segment.quoting import DATA_RULE, quoted, quoted_line, quoted_title
from litrag.segment.validation import OutputParseError, extract_json

ASSETS_PROMPT_VERSION = "assets-v2"  # v2: book text as quoted data (segment.quoting)
VALID, REPAIRED, FAILED, EMPTY = "valid", "repaired", "failed", "empty"
# How a reply is constrained: "json_object" (any JSON), "llama_cpp" (llama-cpp-python's server:
# the schema as a grammar), "json_schema" (OpenAI / vLLM structured outputs).
SchemaMode = Literal["none", "json_object", "llama_cpp", "json_schema"]

SYSTEM = f"""You read one passage of a novel and list what a reader's guide needs from it.
Reply with one JSON object and nothing else:
{{"entities": [{{"name": "...", "type": "person|animal|group|place|object", "description": "..."}}],
 "relations": [{{"source": "NAME", "relation": "short verb phrase", "target": "NAME"}}],
 "events": [{{"summary": "...", "kind": "event|interaction|scene", "participants": ["NAME"],
             "time": "..."}}],
 "facts": [{{"entity": "NAME", "fact": "..."}}]}}
Rules:
- Only what this passage states. Use the fullest name the passage gives; for a known character
  use its name from the list given.
- Every NAME in relations, participants and facts must be the name of one of your entities.
- "time" is a time cue from the text ("that night", "in the autumn") or "".
- Each description, summary and fact is one short sentence.
- At most {MAX_ENTITIES} entities, {MAX_RELATIONS} relations, {MAX_EVENTS} events and
  {MAX_FACTS} facts.
- {DATA_RULE}"""

USER = """Book: {title}
Chapter {chapter}{chapter_title}
Known characters named here: {characters}

{text}"""

RETRY = """Your reply had these problems: {problems}.
Reply again with the whole JSON object, corrected, and nothing else."""

_MAX_FEEDBACK = 4000


@dataclass(frozen=True)
class AssetBlock:
    """One stored plot block, as the asset call sees it."""

    block_id: str
    chapter: int
    text: str
    start: int = 0  # char offset in its chapter: reading order
    chapter_title: str = ""
    characters: tuple[str, ...] = ()  # names of the indexed characters it names


class BlockRecord(BaseModel):
    """How one block's assets came out: its outcome and what was kept."""

    block_id: str
    chapter: int
    start: int = 0
    outcome: str = Field(description="valid, repaired, failed or empty.")
    attempts: int = 0
    problems: list[str] = Field(default_factory=list, description="Of the last failed attempt.")
    extraction: BlockExtraction = Field(default_factory=BlockExtraction)
    dropped: list[str] = Field(
        default_factory=list,
        description="Items the block's own text does not support (litrag.narrative.grounding), "
        "with the reason: left out of the extraction.",
    )


class BookExtractions(BaseModel):
    """Every block's record for one book: the input of the derived assets, saved as JSON."""

    book_id: str
    title: str = ""
    llm: str = Field(default="", description="Which LLM extracted (identity).")
    prompt_version: str = ASSETS_PROMPT_VERSION
    blocks: dict[str, BlockRecord] = Field(default_factory=dict)

    def ordered(self, upto_chapter: int | None = None) -> list[BlockRecord]:
        recs = [
            r for r in self.blocks.values() if upto_chapter is None or r.chapter <= upto_chapter
        ]
        return sorted(recs, key=lambda r: (r.chapter, r.start, r.block_id))


@dataclass
class AssetSummary:
    """Counts over one run: outcomes, LLM use, items kept."""

    blocks: int = 0
    valid: int = 0
    repaired: int = 0
    failed: int = 0
    empty: int = 0
    retries: int = 0
    llm_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    entities: int = 0
    relations: int = 0
    events: int = 0
    facts: int = 0
    grounded: int = 0  # items (and descriptions) their block supports
    unsupported: int = 0  # items dropped because their block does not support them
    seconds: float = 0.0
    call_seconds: float = 0.0  # summed over calls not answered from the cache

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 2)
        d["call_seconds"] = round(self.call_seconds, 2)
        fresh = self.llm_calls - self.cached_calls
        d["seconds_per_call"] = round(self.call_seconds / fresh, 2) if fresh else None
        return d


def extractions_path(home: Path, book_id: str) -> Path:
    return Path(home) / "assets" / f"{book_id}.extractions.json"


def load_extractions(home: Path, book_id: str) -> BookExtractions | None:
    return read_model(extractions_path(home, book_id), BookExtractions)


def save_extractions(home: Path, book: BookExtractions) -> Path:
    return write_model(extractions_path(home, book.book_id), book)


def response_format(mode: SchemaMode) -> dict[str, Any] | None:
    """The request's ``response_format`` for a schema mode (None: send none)."""
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "llama_cpp":  # llama-cpp-python's server turns "schema" into a grammar
        return {"type": "json_object", "schema": response_schema()}
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "block_assets", "schema": response_schema()},
        }
    return None


class AssetExtractor:
    """Runs the per-block asset calls of a book with retries, concurrency and the reply cache."""

    def __init__(
        self,
        llm: LLM,
        *,
        cache_dir: str | Path | None = None,
        num_workers: int = 4,
        max_retries: int = 2,
        max_tokens: int | None = 700,
        temperature: float = 0.3,
        timeout: float | None = 600.0,
        schema_mode: SchemaMode = "json_object",
        llm_identity: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.cache = ResponseCache(Path(cache_dir) / "llm_replies.sqlite") if cache_dir else None
        sampling = Sampling(
            temperature=temperature,
            top_p=0.8,
            top_k=20,
            json_mode=schema_mode != "none",
            max_tokens=max_tokens,
            extra_body=tuple(sorted((extra_body or {}).items())),
        )
        self.caller = LLMCaller(
            llm, sampling, timeout, self.cache, response_format=response_format(schema_mode)
        )
        if llm_identity:
            self.caller.identity = llm_identity
        self.schema_mode = schema_mode
        self.num_workers = num_workers
        self.max_retries = max_retries
        self.summary = AssetSummary()

    @property
    def identity(self) -> str:
        return self.caller.identity

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    def messages(self, block: AssetBlock, title: str) -> list[ChatMessage]:
        names = ", ".join(quoted_line(c, 80) for c in block.characters)
        user = USER.format(
            title=quoted_title(title or "untitled"),
            chapter=block.chapter,
            chapter_title=f": {quoted_line(block.chapter_title)}" if block.chapter_title else "",
            characters=f"<names>{names}</names>" if names else "none",
            text=quoted("passage", block.text),
        )
        return [
            ChatMessage(role=MessageRole.SYSTEM, content=SYSTEM),
            ChatMessage(role=MessageRole.USER, content=user),
        ]

    async def aextract_block(self, block: AssetBlock, title: str = "") -> BlockRecord:
        """One block's record; never raises but ``LLMUnavailableError`` (setup, not output)."""
        rec = BlockRecord(
            block_id=block.block_id, chapter=block.chapter, start=block.start, outcome=FAILED
        )
        s = self.summary
        if not block.text.strip():
            rec.outcome = EMPTY
            return rec
        base = self.messages(block, title)
        messages = base
        best: CheckedExtraction | None = None
        for attempt in range(1, self.max_retries + 2):
            rec.attempts = attempt
            try:
                reply = await self.caller.acall(
                    messages, attempt=f"{ASSETS_PROMPT_VERSION}:{self.schema_mode}:{attempt}"
                )
            except LLMUnavailableError:
                raise
            except Exception as exc:  # a timeout, a server error: try again
                rec.problems = [f"call failed: {type(exc).__name__}: {str(exc)[:200]}"]
                continue
            s.llm_calls += 1
            s.cached_calls += reply.cached
            s.prompt_tokens += reply.prompt_tokens
            s.completion_tokens += reply.completion_tokens
            s.call_seconds += reply.seconds
            try:
                checked = check_extraction(extract_json(reply.text))
            except OutputParseError as exc:
                checked = CheckedExtraction(problems=[f"invalid JSON: {exc}"])
            if checked.valid:
                rec.outcome, rec.problems = VALID, []
                self._ground(rec, checked.extraction, block)
                return rec
            rec.problems = checked.problems
            parsed = not checked.problems[0].startswith("invalid JSON")
            if parsed and (best is None or checked.extraction.items() > best.extraction.items()):
                best = checked
            messages = [
                *base,
                ChatMessage(role=MessageRole.ASSISTANT, content=reply.text[:_MAX_FEEDBACK]),
                ChatMessage(
                    role=MessageRole.USER,
                    content=RETRY.format(problems="; ".join(checked.problems[:8])),
                ),
            ]
        if best is not None:
            rec.outcome = REPAIRED
            self._ground(rec, best.extraction, block)
        return rec

    @staticmethod
    def _ground(rec: BlockRecord, extraction: BlockExtraction, block: AssetBlock) -> None:
        """Keep of ``extraction`` what ``block``'s text supports; the rest is listed, not kept."""
        rec.extraction, g = ground_extraction(extraction, block.text)
        rec.dropped = g.dropped

    async def aextract(
        self,
        blocks: Sequence[AssetBlock],
        book: BookExtractions,
        *,
        show_progress: bool = False,
    ) -> BookExtractions:
        """Every block's record into ``book`` (replacing earlier ones of the same blocks)."""
        t0 = time.perf_counter()
        gate = asyncio.Semaphore(self.num_workers)

        async def run(block: AssetBlock) -> None:
            async with gate:
                rec = await self.aextract_block(block, book.title)
            book.blocks[rec.block_id] = rec
            self._count(rec)

        tasks = [asyncio.ensure_future(run(b)) for b in blocks]
        try:
            await await_all(tasks, show_progress=show_progress, desc="Assets")
        finally:
            self.summary.seconds += time.perf_counter() - t0
        book.llm = self.identity
        return book

    def extract(
        self,
        blocks: Sequence[AssetBlock],
        book: BookExtractions,
        *,
        show_progress: bool = False,
    ) -> BookExtractions:
        from litrag.segment.sync import run_sync

        return run_sync(self.aextract(blocks, book, show_progress=show_progress))

    def _count(self, rec: BlockRecord) -> None:
        s = self.summary
        s.blocks += 1
        setattr(s, rec.outcome, getattr(s, rec.outcome) + 1)
        s.retries += max(rec.attempts - 1, 0)
        x = rec.extraction
        s.entities += len(x.entities)
        s.relations += len(x.relations)
        s.events += len(x.events)
        s.facts += len(x.facts)
        s.unsupported += len(rec.dropped)
        s.grounded += len(x.facts) + len(x.events) + len(x.relations)
        s.grounded += sum(1 for e in x.entities if e.description)
