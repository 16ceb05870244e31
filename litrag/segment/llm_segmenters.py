"""LitSeg-Lite (one LLM call per unit) and LitSeg (three calls), with validation, retry, repair.

LLM garbage never escapes: every reply is checked, retried with the problems stated, repaired
when retries run out, or replaced by one whole-unit block when nothing ever parsed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from litrag.segment import prompts
from litrag.segment.llm_calls import LLMCaller, LLMUnavailableError, Reply, _is_timeout
from litrag.segment.sentences import Sentence
from litrag.segment.validation import (
    Block,
    Checked,
    OutputParseError,
    check_segments,
    extract_json,
    repair,
)

# Outcomes recorded on every node and counted in the parser's summary.
VALID, REPAIRED, FALLBACK, OFFLINE = "valid", "repaired", "fallback", "offline"

_MAX_FEEDBACK_CHARS = 6000


@dataclass
class UnitResult:
    """How one unit was segmented."""

    blocks: list[Block]
    outcome: str
    attempts: int = 0  # attempts of the segmentation call (1 = first try succeeded)
    calls: int = 0  # LLM calls made or replayed from cache, all stages
    cached_calls: int = 0
    problems: list[str] = field(default_factory=list)  # of the last failed attempt
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    # what the stages returned: "step1" / "step2" (LitSeg's free-text stages, with
    # "s1_parsed" / "s2_parsed": did their JSON parse), and "final", the valid reply's JSON
    stages: dict[str, Any] = field(default_factory=dict)

    def add(self, reply: Reply) -> None:
        self.calls += 1
        self.cached_calls += reply.cached
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens


def _msg(role: MessageRole, text: str) -> ChatMessage:
    return ChatMessage(role=role, content=text)


class LitSegLite:
    """One call per unit returning events, threads, turning points and segments (Appendix D.2)."""

    name = "litseg-lite"

    def __init__(
        self,
        caller: LLMCaller,
        max_retries: int = 20,
        retry_feedback: bool = True,
        prompt_variant: str = "full",
    ):
        self.caller = caller
        self.max_retries = max_retries
        self.retry_feedback = retry_feedback
        self.system = prompts.lite_system(prompt_variant)  # an ablation variant (Appendix D.4)

    async def asegment(self, sentences: Sequence[Sentence], title: str = "") -> UnitResult:
        n = len(sentences)
        user = prompts.LITE_USER.format(
            title=prompts.chapter_title(title),
            last_index=n,
            numbered=prompts.number_sentences(sentences),
        )
        base = [_msg(MessageRole.SYSTEM, self.system), _msg(MessageRole.USER, user)]
        result = UnitResult(blocks=[], outcome=FALLBACK)
        return await _segment_with_retries(self, base, n, result, stage="lite")


class LitSeg:
    """The three-stage teacher: events, then threads, then turning points and segments (D.1)."""

    name = "litseg"

    def __init__(self, caller: LLMCaller, max_retries: int = 20, retry_feedback: bool = True):
        self.caller = caller
        self.max_retries = max_retries
        self.retry_feedback = retry_feedback

    async def _stage(self, result: UnitResult, user: str, key: str, stage: str) -> str:
        """A free-text stage: retried until its JSON field parses, else its raw text is used
        (``result.stages[f"{stage}_parsed"]`` says which)."""
        messages = [_msg(MessageRole.SYSTEM, prompts.STAGED_SYSTEM), _msg(MessageRole.USER, user)]
        last = ""
        for attempt in range(1, self.max_retries + 2):
            try:
                reply = await self.caller.acall(messages, attempt=f"{stage}:{attempt}")
            except LLMUnavailableError:
                raise
            except Exception as exc:  # timeouts and server errors: try again
                result.problems = [f"{stage}: call failed: {type(exc).__name__}: {exc}"]
                continue
            result.add(reply)
            last = reply.text
            try:
                value = extract_json(reply.text).get(key)
            except OutputParseError:
                continue
            if isinstance(value, str) and value.strip():
                result.stages[f"{stage}_parsed"] = True
                return value.strip()
            if value:
                result.stages[f"{stage}_parsed"] = True
                return str(value)
        result.stages[f"{stage}_parsed"] = False
        return last.strip()[:_MAX_FEEDBACK_CHARS]

    async def asegment(self, sentences: Sequence[Sentence], title: str = "") -> UnitResult:
        n = len(sentences)
        numbered = prompts.number_sentences(sentences)
        title = prompts.chapter_title(title)
        result = UnitResult(blocks=[], outcome=FALLBACK)
        t0 = time.perf_counter()
        step1 = await self._stage(
            result,
            prompts.STAGE1_USER.format(title=title, numbered=numbered),
            "step_1_events",
            "s1",
        )
        step2 = await self._stage(
            result,
            prompts.STAGE2_USER.format(title=title, numbered=numbered, step1=step1),
            "step_2_threads",
            "s2",
        )
        result.stages.update(step1=step1, step2=step2)
        user = prompts.STAGE3_USER.format(
            title=title, last_index=n, numbered=numbered, step1=step1, step2=step2
        )
        base = [_msg(MessageRole.SYSTEM, prompts.STAGED_SYSTEM), _msg(MessageRole.USER, user)]
        out = await _segment_with_retries(self, base, n, result, stage="s3")
        out.seconds = time.perf_counter() - t0
        return out


async def _segment_with_retries(
    seg: LitSegLite | LitSeg,
    base: list[ChatMessage],
    n: int,
    result: UnitResult,
    stage: str,
) -> UnitResult:
    """Ask for segments until a reply is valid; repair the best one or fall back."""
    t0 = time.perf_counter()
    best: Checked | None = None
    messages = base
    for attempt in range(1, seg.max_retries + 2):
        result.attempts = attempt
        try:
            reply = await seg.caller.acall(messages, attempt=f"{stage}:{attempt}")
        except LLMUnavailableError:
            raise
        except Exception as exc:
            kind = "timed out" if _is_timeout(exc) else f"failed: {type(exc).__name__}: {exc}"
            result.problems = [f"call {kind}"]
            continue
        result.add(reply)
        obj: dict[str, Any] = {}
        try:
            obj = extract_json(reply.text)
            checked = check_segments(obj, n)
        except OutputParseError as exc:
            checked = Checked(problems=[f"invalid JSON: {exc}"])
        if checked.valid:
            result.blocks, result.outcome, result.problems = checked.blocks, VALID, []
            result.stages["final"] = obj
            break
        result.problems = checked.problems
        if checked.blocks and (best is None or len(checked.problems) <= len(best.problems)):
            best = checked
        if seg.retry_feedback:
            messages = [
                *base,
                _msg(MessageRole.ASSISTANT, reply.text[:_MAX_FEEDBACK_CHARS]),
                _msg(
                    MessageRole.USER,
                    prompts.RETRY_USER.format(problems="; ".join(checked.problems), last_index=n),
                ),
            ]
    else:
        if best is not None:
            result.blocks, result.outcome = repair(best.blocks, n), REPAIRED
        else:
            result.blocks, result.outcome = [Block(1, n)], FALLBACK
    result.seconds += time.perf_counter() - t0
    return result
