"""The GRPO rewards: Table 16's format values, the judge's averaging, the judge's retries.

The judge's rare path (garbage replies) is driven by a scripted LLM; the judge against a real
local LLM runs in tests/test_distill_e2e.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from scripted_llm import ScriptedLLM

from litrag.distill.config import DistillConfig
from litrag.distill.judge import NarrativeJudge, narrative_score, parse_judge_reply
from litrag.distill.rewards import (
    FORMAT_INVALID_JSON,
    FORMAT_INVALID_SEGMENTS,
    FORMAT_MISSING_FIELDS,
    FORMAT_VALID,
    format_reward,
    narrative_reward_function,
    strip_think,
)
from litrag.segment.cache import ResponseCache
from litrag.segment.llm_calls import LLMCaller, Sampling

N = 10


def reply(segments, **drop) -> str:
    obj = {
        "step1": {"step_1_events": "Buck is stolen"},
        "step2": {"step_2_threads": "one thread"},
        "step3": {"chapter_title": "I", "step_3_turning_points": [], "segments": segments},
    }
    for key in drop:
        obj.pop(key)
    return json.dumps(obj)


GOOD = [
    {"subtitle": "Stolen", "from_idx": 1, "to_idx": 6, "context_idx": []},
    {"subtitle": "Sold", "from_idx": 7, "to_idx": 10, "context_idx": [5]},
]


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (reply(GOOD), 0.0),
        # Qwen3 opens with a think block; tolerated like the parser tolerates it
        ("<think>\nplanning the cuts\n</think>\n\n" + reply(GOOD), 0.0),
        ("</think>\n" + reply(GOOD), 0.0),  # the template wrote <think> into the prompt
        ("```json\n" + reply(GOOD) + "\n```", 0.0),
        ("I cannot segment this.", -1.0),
        ("", -1.0),
        ('{"step1": {"step_1_events": "x"', -1.0),  # cut off
        ("<think>" + reply(GOOD) + "</think> no answer", -1.0),  # the JSON only in thoughts
        (reply(GOOD, step1=True), -0.8),
        (reply(GOOD, step2=True), -0.8),
        (reply(GOOD, step3=True), -0.8),
        (json.dumps({"segments": GOOD}), -0.8),  # the top-level schema inference accepts
        (reply([{"subtitle": "All", "from_idx": 1, "to_idx": 9}]), -0.6),  # not to N
        (reply([{"subtitle": "A", "from_idx": 2, "to_idx": 10}]), -0.6),  # not from 1
        (reply([GOOD[0], {**GOOD[1], "from_idx": 8}]), -0.6),  # a gap
        (reply([GOOD[0], {**GOOD[1], "context_idx": [11]}]), -0.6),  # context out of range
        (reply([{"subtitle": "x", "from_idx": "one", "to_idx": 10}]), -0.6),
        (reply([]), -0.6),
    ],
)
def test_format_reward_is_table_16(text: str, expected: float) -> None:
    assert format_reward(prompts=None, completions=[chat(text)], n_sentences=[N]) == [expected]
    assert format_reward(completions=[text], n_sentences=[N]) == [expected]  # plain text too


def test_table_16_constants() -> None:
    assert (FORMAT_VALID, FORMAT_INVALID_JSON, FORMAT_MISSING_FIELDS, FORMAT_INVALID_SEGMENTS) == (
        0.0,
        -1.0,
        -0.8,
        -0.6,
    )
    assert strip_think("<think>a</think>{}") == "{}"
    g = DistillConfig.load().grpo
    assert (g.format_weight, g.narrative_weight) == (0.1, 0.9)


FIXED = '{"dimension1": [5, 3, 4.5], "dimension2": [4, 2, 5], "dimension3": [5.5, 1.0, 0.5]}'


def test_narrative_score_averages_dimensions_then_segments_then_maps() -> None:
    score = narrative_score(parse_judge_reply("<think>ok</think>" + FIXED, 3))
    # per segment: (5+4+5.5)/3, (3+2+1)/3, (4.5+5+0.5)/3
    assert score.segment_means == pytest.approx([14.5 / 3, 2.0, 10.0 / 3])
    mean = (14.5 / 3 + 2.0 + 10.0 / 3) / 3
    assert score.mean == pytest.approx(mean)
    assert score.reward == pytest.approx((mean - 1) / 4)
    # the overlap bonus lifts a segment above 5 but never the reward above 1
    top = narrative_score({"dimension1": [5], "dimension2": [5], "dimension3": [5.5]})
    assert top.segment_means == pytest.approx([31 / 6]) and top.reward == 1.0
    # out-of-scale scores are clamped to the rubric first (dim 3: 0.5..5.5, others 1..5)
    low = narrative_score({"dimension1": [0, 9], "dimension2": [-3, 1], "dimension3": [0, 7]})
    assert low.segment_means == pytest.approx([2.5 / 3, 11.5 / 3])
    assert low.reward == pytest.approx(((2.5 / 3 + 11.5 / 3) / 2 - 1) / 4)
    floor = narrative_score({"dimension1": [1], "dimension2": [1], "dimension3": [0.5]})
    assert floor.reward == 0.0


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no json here", "invalid JSON"),
        ('{"dimension1": [5, 5, 5], "dimension2": [5, 5]}', '"dimension2" has 2 scores, not 3'),
        ('{"dimension1": [5, 5, 5], "dimension2": [5, 5, 5]}', '"dimension3" is not a list'),
        (
            '{"dimension1": [5, "x", 5], "dimension2": [5, 5, 5], "dimension3": [5, 5, 5]}',
            "non-number",
        ),
    ],
)
def test_bad_judge_replies_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_judge_reply(text, 3)


def judged(steps, tmp_path, max_retries=2):
    llm = ScriptedLLM(steps)
    cache = ResponseCache(tmp_path / "judge.sqlite")
    judge = NarrativeJudge(LLMCaller(llm, Sampling(), 30, cache), max_retries=max_retries)
    return llm, judge, narrative_reward_function(judge)


def run(fn, texts, n=N):
    return asyncio.run(
        fn(
            completions=[chat(t) for t in texts],
            n_sentences=[n] * len(texts),
            passage=["[1] x"] * len(texts),
        )
    )


def test_garbage_judge_reply_is_retried_then_scored(tmp_path) -> None:
    two = '{"dimension1": [5, 3], "dimension2": [4, 4], "dimension3": [4.5, 3]}'
    llm, judge, fn = judged(["I liked it.", '{"dimension1": [5]}', two], tmp_path)
    assert run(fn, [reply(GOOD)]) == pytest.approx([((13.5 / 3 + 10 / 3) / 2 - 1) / 4])
    assert len(llm.requests) == 3
    retry = llm.requests[1][-1].content
    assert "invalid JSON" in retry and "exactly 2 numbers" in retry
    assert '"dimension1" has 1 scores, not 2' in llm.requests[2][-1].content
    assert judge.stats.scored == 1 and judge.stats.retries == 2 and judge.stats.failed == 0
    # a resumed run replays every judge call from the cache: no new request
    llm2, judge2, fn2 = judged([], tmp_path)
    assert run(fn2, [reply(GOOD)]) == pytest.approx([((13.5 / 3 + 10 / 3) / 2 - 1) / 4])
    assert llm2.requests == [] and judge2.stats.cached_calls == 3


def test_judge_that_never_scores_gives_the_failure_score(tmp_path) -> None:
    llm, judge, fn = judged(["garbage", "still garbage", "{}"], tmp_path)
    assert run(fn, [reply(GOOD)]) == [0.0]
    assert len(llm.requests) == 3 and judge.stats.failed == 1
    score = fn.reward.last[0]
    assert score.failed and score.attempts == 3 and "not a list" in score.problems[0]


def test_nothing_to_judge_costs_no_call(tmp_path) -> None:
    llm, _, fn = judged([], tmp_path)
    assert run(fn, ["not json", reply(GOOD, step3=True)]) == [0.0, 0.0]
    assert llm.requests == []


def test_judge_sees_the_pipeline_and_passage(tmp_path) -> None:
    two = '{"dimension1": [5, 5], "dimension2": [5, 5], "dimension3": [5, 5]}'
    llm, _, fn = judged([two], tmp_path)
    # an invalid (gappy) segmentation is still judged on the segments it has
    gappy = reply([GOOD[0], {**GOOD[1], "from_idx": 8}])
    assert run(fn, [gappy]) == [1.0]
    system, user = llm.requests[0]
    assert "Dimension 3" in system.content and "Overlap adjustment" in system.content
    assert "[1] x" in user.content and '"from_idx": 8' in user.content
    assert "# Role" in user.content  # the student's own prompt, as the paper's template asks


def test_base_install_imports_no_trainer(tmp_path) -> None:
    """``import litrag``, the rewards, the judge, the annotator and the CLI load with the
    training packages blocked (a base install has none of them)."""
    import subprocess
    import sys

    code = """
import sys
BLOCKED = ("trl", "peft", "datasets", "accelerate", "torch", "transformers")
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import litrag, litrag.distill.rewards, litrag.distill.judge, litrag.distill.annotate
import litrag.distill.config, litrag.distill.export, litrag.distill.train, litrag.cli
litrag.cli.build_parser()
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_cli_config_round_trip_and_one_line_errors(tmp_path, capsys) -> None:
    from litrag.cli import main

    assert main(["distill", "config"]) == 0
    text = capsys.readouterr().out
    assert "[grpo]" in text and 'loss_type = "dapo"' in text
    mine = tmp_path / "mine.toml"
    mine.write_text(text.replace("num_generations = 8", "num_generations = 4"))
    assert DistillConfig.load(mine).grpo.num_generations == 4
    assert DistillConfig.load(mine).sft.lora_r == 16

    bad = tmp_path / "bad.toml"
    bad.write_text("[grpo]\nnum_generatons = 4\n")  # a typo never silently keeps a default
    assert main(["distill", "config", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "bad distill config" in err and len(err.splitlines()) == 1
    args = ["distill", "sft", "--model", str(tmp_path), "--data", str(tmp_path), "--out", "x"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "sft.jsonl" in err and len(err.splitlines()) == 1


def test_gguf_export_without_converter_says_where_to_get_it(tmp_path, monkeypatch, capsys):
    from litrag.cli import main
    from litrag.distill.export import find_converter, to_gguf

    monkeypatch.delenv("LITRAG_GGUF_CONVERTER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_converter() is None
    with pytest.raises(ValueError, match="ships in llama\\.cpp's source"):
        to_gguf(tmp_path, tmp_path / "x.gguf")
    fake = tmp_path / "llama.cpp"
    fake.mkdir()
    (fake / "convert_hf_to_gguf.py").write_text("import sys; sys.exit('no model here')\n")
    assert find_converter(fake) == fake / "convert_hf_to_gguf.py"
    monkeypatch.setenv("LITRAG_GGUF_CONVERTER", str(fake))
    assert find_converter() == fake / "convert_hf_to_gguf.py"
    with pytest.raises(RuntimeError, match="no model here"):
        to_gguf(tmp_path, tmp_path / "x.gguf")
    monkeypatch.delenv("LITRAG_GGUF_CONVERTER")
    assert main(["distill", "export", "--model", str(tmp_path), "--out", "o", "--gguf", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: GGUF export needs") and len(err.splitlines()) == 1
