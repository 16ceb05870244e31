"""GRPO rewards for LitSeg-Lite: the rule-based format reward and the narratological reward.

The format reward is the LitSeg paper's Table 16, checked with the parser's own tolerant JSON
extraction and validation (``litrag.segment.validation``), so what training calls valid is what
inference accepts without a retry:

==================================  ======  ====================================================
condition                           reward  meaning
==================================  ======  ====================================================
valid output                         0.0    parsable JSON, step1/step2/step3 present, step3
                                            segments pass validation
invalid JSON                        -1.0    no JSON object after cleanup (think blocks, fences,
                                            prose, trailing commas are tolerated)
missing required fields             -0.8    the object lacks any of step1, step2, step3
invalid step3 segments              -0.6    step3's segments fail validation (ranges, context
                                            indices, coverage)
==================================  ======  ====================================================

The narratological reward is an LLM judge's rubric score in [0, 1] (``litrag.distill.judge``).
The two are combined by a weighted sum, the paper's weights by default (format 0.1, narrative
0.9): in TRL, pass both functions with ``GRPOConfig(reward_weights=[0.1, 0.9])``.

TRL calls a reward function as ``f(prompts=..., completions=..., **dataset_columns)``; with chat
prompts each completion is ``[{"role": "assistant", "content": ...}]``. The dataset must carry
``n_sentences`` (the unit's sentence count) and, for the judge, ``passage`` (its numbered
sentences); ``litrag distill annotate`` writes both.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from litrag.distill.judge import NarrativeJudge, NarrativeScore, pipeline_view
from litrag.segment.validation import OutputParseError, check_segments, extract_json

FORMAT_VALID = 0.0
FORMAT_INVALID_JSON = -1.0
FORMAT_MISSING_FIELDS = -0.8
FORMAT_INVALID_SEGMENTS = -0.6


REQUIRED_FIELDS = ("step1", "step2", "step3")

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, a message dict, or a list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        parts = [
            completion_text(m)
            for m in completion
            if not isinstance(m, dict) or m.get("role", "assistant") == "assistant"
        ]
        return "".join(parts)
    return str(completion)


def strip_think(text: str) -> str:
    """Drop Qwen3's think blocks, and everything before a closing tag whose opening tag the
    chat template already wrote into the prompt."""
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


@dataclass
class FormatCheck:
    """The Table 16 verdict on one completion, with the parsed object and its problems."""

    reward: float
    obj: dict[str, Any] | None = None
    blocks: list[Any] | None = None
    problems: tuple[str, ...] = ()


def check_format(text: str, n_sentences: int) -> FormatCheck:
    """Classify one completion for a unit of ``n_sentences`` sentences (Table 16)."""
    try:
        obj = extract_json(strip_think(text))
    except OutputParseError as exc:
        return FormatCheck(FORMAT_INVALID_JSON, problems=(str(exc),))
    missing = [k for k in REQUIRED_FIELDS if k not in obj]
    checked = check_segments(
        {"step3": obj.get("step3")} if isinstance(obj.get("step3"), dict) else {}, n_sentences
    )
    blocks = checked.blocks or None
    if missing:
        return FormatCheck(FORMAT_MISSING_FIELDS, obj, blocks, (f"missing {', '.join(missing)}",))
    if not checked.valid:
        return FormatCheck(FORMAT_INVALID_SEGMENTS, obj, blocks, tuple(checked.problems))
    return FormatCheck(FORMAT_VALID, obj, checked.blocks)


def format_reward_value(text: str, n_sentences: int) -> float:
    """Table 16's reward for one completion."""
    return check_format(text, n_sentences).reward


def format_reward(
    prompts: Sequence[Any] | None = None,
    completions: Sequence[Any] = (),
    n_sentences: Sequence[int] = (),
    **kwargs: Any,
) -> list[float]:
    """TRL reward function: Table 16's format reward for each completion."""
    return [
        format_reward_value(completion_text(c), int(n))
        for c, n in zip(completions, n_sentences, strict=True)
    ]


class NarrativeReward:
    """TRL reward function (async) backed by a ``NarrativeJudge``.

    Completions with no readable segments (no JSON, or no integer ranges under ``step3``) get
    ``judge.failure_score`` without a judge call: there is nothing to judge. Others are judged
    concurrently (the judge's ``num_workers``) and their replies cached.
    """

    def __init__(self, judge: NarrativeJudge) -> None:
        self.judge = judge
        self.__name__ = "narrative_reward"  # TRL logs rewards under their function's name
        self.last: list[NarrativeScore] = []

    async def ascore(self, text: str, n_sentences: int, passage: str) -> NarrativeScore:
        check = check_format(text, n_sentences)
        if check.obj is None or not check.blocks:
            return NarrativeScore(
                reward=self.judge.failure_score, failed=True, problems=["nothing to judge"]
            )
        pipeline = pipeline_view(check.obj, check.blocks)
        return await self.judge.ascore(passage, pipeline, len(check.blocks))

    async def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        n_sentences: Sequence[int] = (),
        passage: Sequence[str] = (),
        **kwargs: Any,
    ) -> list[float]:
        scores = await asyncio.gather(
            *(
                self.ascore(completion_text(c), int(n), p)
                for c, n, p in zip(completions, n_sentences, passage, strict=True)
            )
        )
        self.last = list(scores)
        return [s.reward for s in scores]


def narrative_reward_function(judge: NarrativeJudge) -> Any:
    """A plain ``async def`` wrapping ``NarrativeReward`` (what TRL detects as async)."""
    reward = NarrativeReward(judge)

    async def narrative_reward(
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        n_sentences: Sequence[int] = (),
        passage: Sequence[str] = (),
        **kwargs: Any,
    ) -> list[float]:
        return await reward(prompts, completions, n_sentences, passage, **kwargs)

    narrative_reward.reward = reward  # type: ignore[attr-defined]
    return narrative_reward
