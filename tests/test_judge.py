"""The judge's reply parsing and its repair loop. The malformed replies come from a scripted LLM
(rare paths a real small model produces only now and then); the real judge runs against a real
llama.cpp server in test_eval_answers.py."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import MessageRole
from scripted_llm import ScriptedLLM

from litrag.eval.judge import (
    AA_SCALE,
    CR_SCALE,
    JUDGE_SYSTEM,
    Judge,
    format_contexts,
    format_references,
    parse_rating,
)
from litrag.eval.result_cache import ResultCache


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("4", 4),
        ("  2\n", 2),
        ("Rating: 4", 4),
        ("rating = 2.", 2),
        ("**0**", 0),
        ('{"rating": 2}', 2),
        ('```json\n{"score": 4}\n```', 4),
        ("<think>0 or 2? The answer names Buck.</think>\n4", 4),
        ("I would give it 2 out of 4.", 2),
        ("2/4", 2),
        ("4. The answer matches the reference.", 4),
        ("Between 0, 2 and 4 I would say 4", 4),
        ("The answer agrees only in part, so 2", 2),
        # unreadable or off the scale
        ("3", None),
        ("Rating: 5", None),
        ('{"rating": 1}', None),
        ("", None),
        ("The answer is good.", None),
        ("0 or 4, hard to say", 0),  # a number that opens the reply is the verdict
        ("Buck appears in 2 chapters and 4 scenes", None),
    ],
)
def test_parse_rating_answer_accuracy(reply: str, expected: int | None) -> None:
    assert parse_rating(reply, AA_SCALE) == expected


def test_parse_rating_context_relevance_scale() -> None:
    assert parse_rating("1", CR_SCALE) == 1
    assert parse_rating("4", CR_SCALE) is None
    assert parse_rating("The passages are partly relevant: 1", CR_SCALE) == 1


def _judge(steps, **kw) -> tuple[Judge, ScriptedLLM]:
    llm = ScriptedLLM(steps)
    return Judge(llm, "scripted", **kw), llm


def test_answer_accuracy_two_prompts_averaged() -> None:
    judge, llm = _judge(["4", "Rating: 2"])
    res = judge.answer_accuracy("Who stole Buck?", "Manuel stole him.", ["Manuel"])
    assert res.score == pytest.approx((4 / 4 + 2 / 4) / 2)
    assert [r.prompt for r in res.ratings] == ["aa_direct", "aa_swapped"]
    first, second = (req[1].content for req in llm.requests)
    assert llm.requests[0][0].role == MessageRole.SYSTEM
    assert llm.requests[0][0].content == JUDGE_SYSTEM
    # the direct prompt grades the answer against the reference; the second swaps the roles
    assert "Reference answer (known to be correct): <answer>Manuel</answer>" in first
    assert "Answer to grade: <answer>Manuel stole him.</answer>" in first
    assert "First answer: <answer>Manuel stole him.</answer>" in second
    assert "Second answer: <answer>Manuel</answer>" in second


def test_malformed_reply_is_repaired() -> None:
    judge, llm = _judge(["The answer is mostly right.", "3", "2", "4"])
    res = judge.answer_accuracy("Q?", "A", ["A"])
    direct, swapped = res.ratings
    assert direct.rating == 2 and direct.attempts == 3
    assert direct.replies == ["The answer is mostly right.", "3", "2"]
    repair = llm.requests[1]
    # the model sees its own reply and is told exactly which numbers are allowed
    assert repair[-2].role == MessageRole.ASSISTANT and repair[-2].content.startswith("The answer")
    assert repair[-1].role == MessageRole.USER and "0, 2, 4" in repair[-1].content
    assert swapped.rating == 4 and swapped.attempts == 1
    assert res.score == pytest.approx(0.75)


def test_one_prompt_never_valid_the_other_counts() -> None:
    judge, _ = _judge(["no idea", "still no idea", "?", "1"], max_retries=2)
    res = judge.context_relevance("Q?", ["Buck was a dog."])
    assert res.ratings[0].rating is None and res.ratings[0].attempts == 3
    assert res.ratings[1].rating == 1
    assert res.score == pytest.approx(0.5)


def test_no_valid_rating_gives_no_score() -> None:
    judge, _ = _judge(["x", "y", "z", "w"], max_retries=1)
    res = judge.answer_accuracy("Q?", "A", ["B"])
    assert res.score is None and all(r.rating is None for r in res.ratings)


def test_llm_failure_is_recorded_and_not_cached(tmp_path) -> None:
    cache = ResultCache(tmp_path / "c.sqlite")
    judge, _ = _judge([ConnectionError("server gone"), "2"], cache=cache)
    res = judge.context_relevance("Q?", ["passage"])
    assert res.ratings[0].error == "ConnectionError: server gone"
    assert res.ratings[0].rating is None and res.score == pytest.approx(1.0)
    judge2, llm2 = _judge(["2", "2"], cache=cache)
    assert judge2.context_relevance("Q?", ["passage"]).score == 1.0  # asked again, not cached
    assert len(llm2.requests) == 2
    cache.close()


def test_verdicts_are_cached_per_judge_and_input(tmp_path) -> None:
    cache = ResultCache(tmp_path / "c.sqlite")
    judge, llm = _judge(["4", "4"], cache=cache)
    first = judge.answer_accuracy("Q?", "A", ["A"])
    again = judge.answer_accuracy("Q?", "A", ["A"])  # no scripted replies left: must be cached
    assert again.score == first.score == 1.0 and judge.cached == 1 and len(llm.requests) == 2
    other, llm3 = _judge(["0", "0"], cache=cache)
    other.identity = "another judge"
    assert other.answer_accuracy("Q?", "A", ["A"]).score == 0.0  # another judge: asked anew
    assert len(llm3.requests) == 2
    cache.close()


def test_reference_and_context_formatting() -> None:
    assert format_references(["Buck", "Buck "]) == "Buck"
    assert format_references(["Crossing the river", "The melting ice"]) == (
        "any of these is correct: Crossing the river | The melting ice"
    )
    text = format_contexts(["word " * 500, "short passage"], max_chars=1000)
    first, second = text.split("\n\n")
    assert first.startswith('<passage n="1">\nword') and first.endswith("[...]\n</passage>")
    assert len(first) < 540
    assert second == '<passage n="2">\nshort passage\n</passage>'
    judge, _ = _judge([])
    assert judge.context_relevance("Q?", []).score == 0.0  # nothing retrieved: irrelevant
