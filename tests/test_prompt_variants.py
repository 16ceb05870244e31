"""The paper's ablation prompts (Appendix D.4) as named LitSeg-Lite variants."""

from __future__ import annotations

import json

import pytest
from llama_index.core import Document
from scripted_llm import ScriptedLLM

from litrag import LitSegNodeParser
from litrag.eval.registry import LLM_CHUNKERS
from litrag.segment import prompts

TEXT = "Buck ran to the gate. The man waited there. He took the rope. Buck fought him hard."


def answer(n: int) -> str:
    return json.dumps({"segments": [{"subtitle": "All", "from_idx": 1, "to_idx": n}]})


def test_variants_drop_their_step_and_keep_the_rules() -> None:
    v = prompts.LITE_VARIANTS
    assert v["full"] == prompts.LITE_SYSTEM
    assert set(v) == {"full", "no-events", "no-threads", "no-turning-points", "no-theory"}
    assert "Step 1, events" not in v["no-events"] and '"step1"' not in v["no-events"]
    assert "Step 2, threads" not in v["no-threads"] and '"step2"' not in v["no-threads"]
    assert "step_3_turning_points" not in v["no-turning-points"]
    assert "turning points and cuts" not in v["no-turning-points"]
    assert "narratolog" not in v["no-theory"].lower() and "Step 1" not in v["no-theory"]
    for text in v.values():  # every variant keeps the index rules and the segments schema
        assert "context_idx" in text and "The first block starts at 1" in text
        assert '"segments": [{"subtitle"' in text
    with pytest.raises(ValueError, match="unknown prompt variant"):
        prompts.lite_system("no-plot")


@pytest.mark.parametrize("variant", ["no-theory", "no-turning-points"])
def test_parser_sends_the_variant(variant: str) -> None:
    llm = ScriptedLLM([answer(4)])
    parser = LitSegNodeParser(llm=llm, prompt_variant=variant, max_retries=0)
    nodes = parser.get_nodes_from_documents([Document(text=TEXT)])
    assert llm.requests[0][0].content == prompts.LITE_VARIANTS[variant]
    assert [n.metadata["segmentation_outcome"] for n in nodes] == ["valid"]
    assert parser.to_dict()["prompt_variant"] == variant  # part of the ingestion cache key


def test_variant_is_a_lite_ablation_only() -> None:
    with pytest.raises(ValueError, match="LitSeg-Lite ablation"):
        LitSegNodeParser(llm=ScriptedLLM([]), segmenter="litseg", prompt_variant="no-theory")
    with pytest.raises(ValueError, match="unknown prompt variant"):
        LitSegNodeParser(llm=ScriptedLLM([]), prompt_variant="nope")
    names = {k for k in LLM_CHUNKERS if k.startswith("litseg-lite-")}
    assert names == {f"litseg-lite-{v}" for v in prompts.LITE_VARIANTS if v != "full"}
