"""The narratological reward model: an LLM judge with the LitSeg paper's rubric (Appendix D.3).

The judge scores every predicted segment on three dimensions, 1 (failure) to 5 (excellent):
event validity, event phase and unity of action, cut-point logic and overlap. The rubric's
overlap note is applied by the judge on dimension 3: -0.5 when a segment's overlap (context)
lies inside the segment itself, +0.5 when it supplies the context that makes the segment
readable on its own; dimension-3 scores may therefore run from 0.5 to 5.5.

``narrative_score`` turns a judge reply into the reward, in this order (the paper's: "first
averaged equally across the three dimensions and then over predicted segments"):

1. each score is clamped to its range (dimensions 1-2: 1..5; dimension 3: 0.5..5.5);
2. per segment, the mean of its three scores;
3. the mean over segments;
4. mapped to [0, 1] by ``(mean - 1) / 4`` and clamped, so the overlap bonus can lift a segment
   but never the reward above 1, and the penalty never below 0.

Replies are validated like segmentation replies (tolerant JSON extraction, then a strict check:
three lists of exactly one number per segment) and retried with the problems stated; a
completion whose judge never replies usably gets ``failure_score`` (default 0.0, the bottom of
the range) and is counted in ``JudgeStats.failed``. Calls go through the segmenters'
``LLMCaller``: concurrent, timed out, and cached on disk, so a resumed run never pays twice.

TRL runs async reward functions on one event loop of its own. An ``OpenAILike`` keeps an async
HTTP client bound to the first loop it ran in: give the judge an LLM object that has not been
used under another ``asyncio.run`` (``litrag distill grpo`` builds a fresh one).
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from litrag.segment.llm_calls import LLMCaller
from litrag.segment.quoting import DATA_RULE, quoted
from litrag.segment.validation import Block, OutputParseError, extract_json

JUDGE_PROMPT_VERSION = "narrative-judge-2"  # 2: passage and pipeline as quoted data

JUDGE_SYSTEM = """\
# Role and task
You are a senior narratologist and NLP evaluation expert. Evaluate a segmentation of an original \
passage into plot blocks (chunks). Score every chunk on three dimensions.

# Dimension 1: Event validity
Does the chunk capture a dynamic event (a change of state, physical or mental, or a process \
event: acting, talking, thinking, feeling), faithfully, with a subtitle that names its core \
event? Pain points: static description only; vague subtitles ("The Island"); subtitles about a \
minor detail; subtitle and text disagree.
5: the chunk revolves around one clear, self-contained dynamic event; static material serves the \
plot; the subtitle captures the core event.
4: a clear dynamic event, largely self-contained, though exposition is heavy; subtitle acceptable.
3: at least one minor valid event, but only a fragment of a larger one; static material dilutes \
it; subtitle acceptable.
2: mostly static setting or unrelated chatter; fragmented; the subtitle may distort facts.
1: no narrative event at all.
Score 5 for a chunk that holds the whole of an author's prologue, a background introduction or \
copyright information.

# Dimension 2: Event phase and unity of action
Does the chunk keep to one action phase or one thread, without stitching together actions that \
should stand apart?
5: one pure action phase; cause and effect tightly bound.
4: one clear primary action, with at most a sentence or two of prelude to the next.
3: a main thread, but two or more consecutive events that could have been separate chunks.
2: unrelated parallel threads or narrative levels (reality and a long flashback) forced together.
1: a mishmash of fragments with no temporal or logical connection.

# Dimension 3: Cut-point logic and overlap
Is each cut placed where semantic cohesion is low, and is overlap (context_idx) used so the chunk \
reads on its own? Pain points: a cut inside a tightly bound run with no overlap (the chunk \
starts beheaded); a cut that severs the outcome of the chunk's event.
5: cuts fall at natural low-cohesion transitions; where a tight sequence had to be cut, overlap \
keeps the causal chain intact.
4: logical cuts; minor dependence on context, or slightly redundant overlap.
3: a hard cut between causally linked sentences without overlap; the reader must fill gaps.
2: a cut through a zone of very high cohesion with no bridge; nonsensical out of context.
1: mechanical, blind cutting that destroys meaning.
Overlap adjustment on dimension 3: subtract 0.5 when a chunk's overlap consists of sentences \
already inside the chunk; add 0.5 when its overlap supplies crucial context that lets the chunk \
be understood on its own.

# Output
Valid JSON only. For each dimension, a list with one score per chunk, in chunk order. Example \
for 4 chunks:
{"dimension1": [4.0, 3.0, 4.5, 5.0], "dimension2": [5.0, 4.0, 4.0, 3.0], \
"dimension3": [4.5, 3.0, 5.5, 4.0]}"""

JUDGE_USER = """\
Segment pipeline prompt:
{segment_pipeline_prompt}

Original passage:
{original_passage}

Segment pipeline:
{segment_pipeline}

The segment pipeline has {k} chunks. Return the JSON object with exactly {k} scores in each of \
"dimension1", "dimension2" and "dimension3"."""

JUDGE_RETRY = """\
Your answer could not be used: {problems}
Answer again with the JSON object only: {{"dimension1": [...], "dimension2": [...], \
"dimension3": [...]}}, exactly {k} numbers per list (dimensions 1 and 2 from 1 to 5, dimension 3 \
from 0.5 to 5.5)."""

DIMENSIONS = ("dimension1", "dimension2", "dimension3")
_RANGES = {"dimension1": (1.0, 5.0), "dimension2": (1.0, 5.0), "dimension3": (0.5, 5.5)}


class JudgeReplyError(ValueError):
    """A judge reply that cannot be scored; the message lists what was wrong."""


@dataclass
class NarrativeScore:
    """One completion's narratological reward and how it was reached."""

    reward: float
    segment_means: list[float] = field(default_factory=list)
    mean: float | None = None  # over segments, on the rubric's 1-5 scale
    attempts: int = 0
    cached: int = 0
    failed: bool = False
    problems: list[str] = field(default_factory=list)


@dataclass
class JudgeStats:
    """Counts over a judge's life (for logs and the GRPO report)."""

    scored: int = 0
    failed: int = 0
    calls: int = 0
    cached_calls: int = 0
    retries: int = 0


def parse_judge_reply(text: str, k: int) -> dict[str, list[float]]:
    """The three score lists of a judge reply, each exactly ``k`` numbers long."""
    try:
        obj = extract_json(text)
    except OutputParseError as exc:
        raise JudgeReplyError(f"invalid JSON: {exc}") from exc
    out: dict[str, list[float]] = {}
    problems: list[str] = []
    for dim in DIMENSIONS:
        raw = obj.get(dim)
        if not isinstance(raw, list):
            problems.append(f'"{dim}" is not a list')
            continue
        if len(raw) != k:
            problems.append(f'"{dim}" has {len(raw)} scores, not {k}')
            continue
        values: list[float] = []
        for v in raw:
            if isinstance(v, bool) or not isinstance(v, int | float):
                try:
                    v = float(str(v).strip())
                except ValueError:
                    problems.append(f'"{dim}" holds a non-number: {v!r}')
                    break
            values.append(float(v))
        else:
            out[dim] = values
    if problems:
        raise JudgeReplyError("; ".join(problems))
    return out


def narrative_score(scores: dict[str, list[float]]) -> NarrativeScore:
    """Dimensions, then segments, then the [0, 1] mapping (see the module docstring)."""
    clamped = {
        dim: [min(max(v, _RANGES[dim][0]), _RANGES[dim][1]) for v in scores[dim]]
        for dim in DIMENSIONS
    }
    per_segment = [statistics.fmean(vals) for vals in zip(*clamped.values(), strict=True)]
    if not per_segment:
        return NarrativeScore(reward=0.0, failed=True, problems=["no segments"])
    mean = statistics.fmean(per_segment)
    return NarrativeScore(
        reward=min(max((mean - 1.0) / 4.0, 0.0), 1.0), segment_means=per_segment, mean=mean
    )


def pipeline_view(obj: dict[str, Any], blocks: Sequence[Block]) -> str:
    """The segment pipeline as the judge reads it: the student's analysis and its segments,
    indices as given (so the judge sees overlap exactly as the student wrote it)."""
    view: dict[str, Any] = {k: obj[k] for k in ("step1", "step2") if k in obj}
    step3 = obj.get("step3") if isinstance(obj.get("step3"), dict) else {}
    view["step3"] = {
        **{k: v for k, v in step3.items() if k != "segments"},
        "segments": [
            {
                "subtitle": b.subtitle,
                "from_idx": b.start,
                "to_idx": b.end,
                "context_idx": list(b.context),
            }
            for b in blocks
        ],
    }
    return json.dumps(view, ensure_ascii=False, indent=1)


class NarrativeJudge:
    """Scores completions with an LLM judge; any LlamaIndex LLM behind an ``LLMCaller``."""

    def __init__(
        self,
        caller: LLMCaller,
        max_retries: int = 3,
        num_workers: int = 8,
        failure_score: float = 0.0,
        pipeline_prompt: str | None = None,
    ) -> None:
        from litrag.segment.prompts import LITE_SYSTEM

        self.caller = caller
        self.max_retries = max_retries
        self.failure_score = failure_score
        self.pipeline_prompt = LITE_SYSTEM if pipeline_prompt is None else pipeline_prompt
        self.num_workers = num_workers
        self.stats = JudgeStats()
        self._gates: dict[int, asyncio.Semaphore] = {}

    def _gate(self) -> asyncio.Semaphore:
        # one semaphore per event loop: TRL may run each batch's rewards in a fresh loop
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._gates:
            self._gates = {loop_id: asyncio.Semaphore(self.num_workers)}
        return self._gates[loop_id]

    def messages(self, passage: str, pipeline: str, k: int) -> list[ChatMessage]:
        """The judge's chat: the book's passage and the student's segments (which copy book
        text) as quoted data, never to be followed (issue 34: a planted order in a book must not
        set its own reward)."""
        user = JUDGE_USER.format(
            segment_pipeline_prompt=self.pipeline_prompt,
            original_passage=quoted("passage", passage),
            segment_pipeline=quoted("answer", pipeline),
            k=k,
        )
        return [
            ChatMessage(role=MessageRole.SYSTEM, content=f"{JUDGE_SYSTEM}\n\n{DATA_RULE}"),
            ChatMessage(role=MessageRole.USER, content=user),
        ]

    async def ascore(self, passage: str, pipeline: str, k: int) -> NarrativeScore:
        """Score one segment pipeline of ``k`` segments over its numbered ``passage``."""
        base = self.messages(passage, pipeline, k)
        messages = base
        problems: list[str] = []
        cached = 0
        async with self._gate():
            for attempt in range(1, self.max_retries + 2):
                try:
                    reply = await self.caller.acall(
                        messages, attempt=f"{JUDGE_PROMPT_VERSION}:{attempt}"
                    )
                except ConnectionError:
                    raise
                except Exception as exc:  # a timeout or a server error: try again
                    problems = [f"call failed: {type(exc).__name__}: {exc}"]
                    continue
                self.stats.calls += 1
                self.stats.cached_calls += reply.cached
                cached += reply.cached
                try:
                    score = narrative_score(parse_judge_reply(reply.text, k))
                except JudgeReplyError as exc:
                    problems = [str(exc)]
                    self.stats.retries += attempt <= self.max_retries
                    messages = [
                        *base,
                        ChatMessage(role=MessageRole.ASSISTANT, content=reply.text[:4000]),
                        ChatMessage(
                            role=MessageRole.USER,
                            content=JUDGE_RETRY.format(problems=exc, k=k),
                        ),
                    ]
                    continue
                score.attempts, score.cached = attempt, cached
                self.stats.scored += 1
                return score
        self.stats.failed += 1
        return NarrativeScore(
            reward=self.failure_score,
            attempts=self.max_retries + 1,
            cached=cached,
            failed=True,
            problems=problems,
        )
