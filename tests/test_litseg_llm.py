"""LitSeg-Lite end to end through a real local LLM: llama.cpp's OpenAI-compatible server.

The small packaged model tests plumbing and repair, not segmentation quality: whatever it
returns, the chapter must come out fully covered with every outcome recorded.
"""

from __future__ import annotations

import pytest
from llama_index.core import Document
from llama_index.core.ingestion import DocstoreStrategy, IngestionCache, IngestionPipeline

from litrag import LitSegNodeParser
from litrag.models.llama_server import openai_like
from litrag.segment.llm_calls import LLMUnavailableError
from litrag.segment.sentences import split_sentences

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def short_chapter(books_dir) -> Document:
    raw = (books_dir / "pg215_call_of_the_wild.txt").read_text(encoding="utf-8-sig")
    raw = raw.replace("\r\n", "\n")
    start = raw.index("Buck did not read the newspapers")
    end = raw.index("\n\n", start + 2500)
    return Document(text=raw[start:end], metadata={"chapter_title": "Into the Primitive"})


def covered(nodes) -> set[int]:
    out: set[int] = set()
    for n in nodes:
        out.update(range(n.metadata["sentence_from"], n.metadata["sentence_to"] + 1))
    return out


def test_litseg_lite_through_llama_cpp_server(llama_server, short_chapter, tmp_path):
    llm = openai_like(llama_server.api_base, llama_server.model, context_window=8192)
    parser = LitSegNodeParser(
        llm=llm, max_retries=1, max_output_tokens=600, cache_dir=str(tmp_path), num_workers=2
    )
    assert parser.segmenter == "litseg-lite"
    assert parser.llm_identity.startswith("OpenAILike:local@http://127.0.0.1:")
    nodes = parser.get_nodes_from_documents([short_chapter])
    n = len(split_sentences(short_chapter.text))
    assert covered(nodes) == set(range(1, n + 1))
    s = parser.summary
    assert s.llm_calls >= 1 and s.prompt_tokens > 500 and s.completion_tokens > 0
    assert s.valid + s.repaired + s.fallback == 1
    assert {x.metadata["segmentation_outcome"] for x in nodes} <= {"valid", "repaired", "fallback"}
    for node in nodes:
        assert short_chapter.text[node.start_char_idx : node.end_char_idx] == node.text
        assert node.metadata["subtitle"]

    # a second parser over the same reply cache replays every call from disk
    again = LitSegNodeParser(
        llm=llm, max_retries=1, max_output_tokens=600, cache_dir=str(tmp_path), num_workers=2
    )
    nodes2 = again.get_nodes_from_documents([short_chapter])
    assert again.summary.cached_calls == again.summary.llm_calls == s.llm_calls
    assert [x.text for x in nodes2] == [x.text for x in nodes]


def test_pipeline_rerun_makes_no_new_calls(llama_server, short_chapter):
    llm = openai_like(llama_server.api_base, llama_server.model, context_window=8192)
    parser = LitSegNodeParser(llm=llm, max_retries=0, max_output_tokens=400)
    cache = IngestionCache()
    first = IngestionPipeline(
        transformations=[parser], cache=cache, docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY
    ).run(documents=[short_chapter])
    calls = parser.summary.llm_calls
    assert calls == 1 and first
    second = IngestionPipeline(transformations=[parser], cache=cache).run(documents=[short_chapter])
    assert parser.summary.llm_calls == calls
    assert [x.text for x in second] == [x.text for x in first]


def test_unreachable_server_is_a_clear_error(short_chapter):
    llm = openai_like("http://127.0.0.1:9/v1", "local", max_retries=0, timeout=5)
    parser = LitSegNodeParser(llm=llm, max_retries=3)
    with pytest.raises(LLMUnavailableError, match="cannot reach the LLM OpenAILike:local@"):
        parser.get_nodes_from_documents([short_chapter])
