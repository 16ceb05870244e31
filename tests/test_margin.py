"""The margin-sampling chunker: the margin read from top log-probabilities, then a real run
through the llama.cpp server's chat log-probabilities (SmolLM2), replayed from its cache."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from llama_index.core import Document
from test_perplexity import assert_exact_slices

from litrag.chunkers.margin import MarginSamplingNodeParser, margin_from_logprobs
from litrag.segment.sentences import split_sentences


def test_margin_from_top_logprobs() -> None:
    assert margin_from_logprobs([("2", math.log(0.7)), ("1", math.log(0.2))]) == pytest.approx(0.5)
    assert margin_from_logprobs([(" 1", math.log(0.9)), ("x", -0.1)]) == pytest.approx(-0.9)
    assert margin_from_logprobs([("Yes", -0.1)]) is None


@pytest.mark.llm
def test_margin_sampling_through_llama_cpp_server(llama_server, tmp_path: Path) -> None:
    from litrag.models.llama_server import openai_like

    doc = Document(
        text="Buck lived at a big house in the sun-kissed Santa Clara Valley. Judge Miller's "
        "place, it was called. It stood back from the road, half hidden among the trees.\n\n"
        "Manuel, one of the gardener's helpers, had one besetting sin. He loved to play "
        "Chinese lottery. The wages of a gardener's helper do not lap over the needs of a wife.",
        metadata={"book_id": "x"},
    )
    llm = openai_like(llama_server.api_base, llama_server.model, context_window=8192)
    parser = MarginSamplingNodeParser(llm=llm, cache_dir=tmp_path)
    nodes = parser.get_nodes_from_documents([doc])
    n = len(split_sentences(doc.text))
    s = parser.summary
    assert s.decisions == s.llm_calls == n - 1
    assert s.kept + s.split == n - 1 and s.no_digit < n - 1  # the server returned log-probs
    assert len(nodes) == s.split + 1
    assert_exact_slices(doc, nodes, overlap_ok=False)
    again = MarginSamplingNodeParser(llm=llm, cache_dir=tmp_path)
    assert [x.get_content() for x in again.get_nodes_from_documents([doc])] == [
        x.get_content() for x in nodes
    ]
    assert again.summary.cached_calls == n - 1 and again.summary.llm_calls == 0
