"""LitSeg-Lite and LitSeg through the parser, driven by a scripted LLM over real book text.

Each malformed-output case must end in a valid segmentation (every sentence covered) with its
outcome recorded on the nodes and counted in the summary; no exception escapes for garbage.
"""

from __future__ import annotations

import json
import re

import pytest
from llama_index.core import Document
from llama_index.core.ingestion import DocstoreStrategy, IngestionCache, IngestionPipeline
from llama_index.core.storage.docstore import SimpleDocumentStore
from scripted_llm import ScriptedLLM, Sleep

from litrag import LitSegNodeParser
from litrag.segment.sentences import split_sentences


@pytest.fixture(scope="module")
def chapter(books_dir) -> Document:
    raw = (books_dir / "pg11_alice_in_wonderland.txt").read_text(encoding="utf-8-sig")
    raw = raw.replace("\r\n", "\n")
    start = raw.index("Alice was beginning to get very tired")
    end = raw.index("CHAPTER II.", start)
    return Document(text=raw[start:end], metadata={"chapter_title": "Down the Rabbit-Hole"})


def n_sentences(doc: Document) -> int:
    return len(split_sentences(doc.text))


def last_index(messages) -> int:
    return int(re.search(r"\[Sentences: 1 to (\d+)\]", messages[1].content).group(1))


def halves(messages) -> str:
    """A valid LitSeg-Lite reply for whatever unit is asked about."""
    n = last_index(messages)
    mid = max(n // 2, 1)
    segments = [
        {"subtitle": "Alice follows the Rabbit", "from_idx": 1, "to_idx": mid, "context_idx": []}
    ]
    if mid < n:
        segments.append(
            {
                "subtitle": "The fall and the hall",
                "from_idx": mid + 1,
                "to_idx": n,
                "context_idx": [1],
            }
        )
    return json.dumps(
        {
            "step1": {"step_1_events": "e"},
            "step2": {"step_2_threads": "t"},
            "step3": {"chapter_title": "I", "step_3_turning_points": [], "segments": segments},
        }
    )


def reply(segments) -> str:
    return json.dumps({"step1": {}, "step2": {}, "step3": {"segments": segments}})


def seg(a, b, ctx=()):
    return {"subtitle": f"part {a}", "from_idx": a, "to_idx": b, "context_idx": list(ctx)}


def parse(doc, steps, **kwargs):
    llm = ScriptedLLM(steps)
    kwargs.setdefault("max_retries", 2)
    parser = LitSegNodeParser(llm=llm, **kwargs)
    nodes = parser.get_nodes_from_documents([doc])
    return llm, parser, nodes


def assert_covers(nodes, n):
    covered = set()
    for node in nodes:
        covered.update(range(node.metadata["sentence_from"], node.metadata["sentence_to"] + 1))
    assert covered == set(range(1, n + 1))


def outcomes(nodes):
    return {
        (n.metadata["segmentation_outcome"], n.metadata["segmentation_attempts"]) for n in nodes
    }


def test_valid_first_reply(chapter):
    llm, parser, nodes = parse(chapter, [halves])
    n = n_sentences(chapter)
    assert_covers(nodes, n)
    assert outcomes(nodes) == {("valid", 1)}
    assert parser.summary.valid == 1 and parser.summary.retries == 0
    assert parser.summary.llm_calls == 1
    assert {x.metadata["subtitle"] for x in nodes} >= {"Alice follows the Rabbit"}
    # the prompt numbers sentences and carries the schema
    system, user = llm.requests[0]
    assert '"segments"' in system.content and "[1] Alice was beginning" in user.content
    # the chapter is quoted data, and the system prompt says it is never to be followed
    assert "<chapter>\n[1] Alice was beginning" in user.content
    assert user.content.count("</chapter>") == 1 and "never follow" in system.content


def test_invalid_json_is_retried_with_feedback(chapter):
    llm, parser, nodes = parse(chapter, ["I think the chapter is about Alice.", halves])
    assert outcomes(nodes) == {("valid", 2)}
    assert parser.summary.retries == 1
    retry = llm.requests[1]
    assert retry[-2].role.value == "assistant" and "invalid JSON" in retry[-1].content


def test_missing_fields_every_time_falls_back_to_whole_unit(chapter):
    bad = '{"step1": {"step_1_events": "x"}}'
    llm, parser, nodes = parse(chapter, [bad, bad, bad], max_block_tokens=100_000)
    assert len(llm.requests) == 3  # one try + two retries
    assert len(nodes) == 1 and outcomes(nodes) == {("fallback", 3)}
    assert_covers(nodes, n_sentences(chapter))
    assert parser.summary.fallback == 1
    assert nodes[0].metadata["subtitle"]  # an extractive subtitle fills the gap


def test_out_of_range_indices_are_repaired(chapter):
    n = n_sentences(chapter)
    bad = reply([seg(0, 10), seg(11, n + 40)])
    _, parser, nodes = parse(chapter, [bad, bad, bad])
    assert outcomes(nodes) == {("repaired", 3)}
    assert_covers(nodes, n)
    assert parser.summary.repaired == 1


def test_gaps_are_repaired_into_left_neighbour(chapter):
    n = n_sentences(chapter)
    bad = reply([seg(3, 10), seg(15, n - 2)])
    _, _, nodes = parse(chapter, [bad, bad, bad], max_block_tokens=100_000)
    assert_covers(nodes, n)
    ranges = [(x.metadata["sentence_from"], x.metadata["sentence_to"]) for x in nodes]
    assert ranges == [(1, 14), (15, n)]


def test_overlapping_ranges_are_allowed(chapter):
    n = n_sentences(chapter)
    _, _, nodes = parse(chapter, [reply([seg(1, 12), seg(10, n)])], max_block_tokens=100_000)
    assert outcomes(nodes) == {("valid", 1)}
    assert [(x.metadata["sentence_from"], x.metadata["sentence_to"]) for x in nodes] == [
        (1, 12),
        (10, n),
    ]


def test_context_only_sentence_is_covered_after_repair(chapter):
    n = n_sentences(chapter)
    bad = reply([seg(1, 10), seg(12, n, ctx=[11])])
    llm, _, nodes = parse(chapter, [bad, bad, bad], max_block_tokens=100_000)
    assert "only in context_idx: 11" in llm.requests[1][-1].content
    assert_covers(nodes, n)
    assert outcomes(nodes) == {("repaired", 3)}


def test_context_sentences_appear_in_the_embedding_view(chapter):
    n = n_sentences(chapter)
    _, _, nodes = parse(
        chapter, [reply([seg(1, 10), seg(11, n, ctx=[2])])], max_block_tokens=100_000
    )
    second = nodes[1]
    first_sentence_2 = split_sentences(chapter.text)[1].flat
    embed = second.get_content(metadata_mode="embed")
    head = embed.split("\n\n")[0]
    assert head == "chapter_title: Down the Rabbit-Hole\nsubtitle: part 11"  # no bookkeeping
    assert embed.index(first_sentence_2) < embed.index(second.text[:30])
    assert second.get_content() == second.text  # the plain view is the exact slice


def test_garbage_until_exhausted_never_raises(chapter):
    llm, _, nodes = parse(chapter, ["", "null", "{", "[]"], max_retries=3)
    assert len(llm.requests) == 4
    assert {x.metadata["segmentation_outcome"] for x in nodes} == {"fallback"}
    assert_covers(nodes, n_sentences(chapter))


def test_timeouts_and_errors_count_as_failed_attempts(chapter):
    steps = [Sleep(5), RuntimeError("HTTP 500 from server"), halves]
    _, parser, nodes = parse(chapter, steps, request_timeout=0.2)
    assert outcomes(nodes) == {("valid", 3)}
    assert parser.summary.llm_calls == 1  # only the answered call is counted


def test_litseg_three_stages(chapter):
    steps = [
        '{"step_1_events": "Alice sees a rabbit; falls"}',
        "not json at all",
        '{"step_2_threads": "one thread"}',
        halves,
    ]
    # stage 3's prompt carries the sentence count in the same marker
    llm, parser, nodes = parse(chapter, steps, segmenter="litseg")
    assert len(llm.requests) == 4
    assert "Alice sees a rabbit; falls" in llm.requests[2][1].content
    assert "one thread" in llm.requests[3][1].content
    assert outcomes(nodes) == {("valid", 1)}
    assert parser.summary.llm_calls == 4


def test_reply_cache_resumes_an_interrupted_run(chapter, tmp_path):
    half = len(chapter.text) // 2
    cut = chapter.text.index("\n\n", half)
    docs = [Document(text=chapter.text[:cut], id_="a"), Document(text=chapter.text[cut:], id_="b")]

    class Interrupt(BaseException):
        pass

    first = ScriptedLLM([halves, Interrupt()])
    parser = LitSegNodeParser(llm=first, cache_dir=str(tmp_path), num_workers=1)
    with pytest.raises(Interrupt):
        parser.get_nodes_from_documents(docs)
    second = ScriptedLLM([halves])
    parser = LitSegNodeParser(llm=second, cache_dir=str(tmp_path), num_workers=1)
    nodes = parser.get_nodes_from_documents(docs)
    assert len(second.requests) == 1  # unit "a" came from the cache
    assert parser.summary.cached_calls == 1 and parser.summary.llm_calls == 2
    assert {x.ref_doc_id for x in nodes} == {"a", "b"}


def test_ingestion_pipeline_cache_means_zero_new_calls(chapter):
    cache = IngestionCache()
    llm = ScriptedLLM([halves])
    parser = LitSegNodeParser(llm=llm)
    first = IngestionPipeline(
        transformations=[parser],
        cache=cache,
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,
    ).run(documents=[chapter])
    assert len(llm.requests) == 1 and first
    again = IngestionPipeline(transformations=[parser], cache=cache).run(documents=[chapter])
    assert len(llm.requests) == 1  # served by the ingestion cache
    assert [n.text for n in again] == [n.text for n in first]
    # another model is another cache key
    other = ScriptedLLM([halves])
    other.model = "another-model"
    IngestionPipeline(transformations=[LitSegNodeParser(llm=other)], cache=cache).run(
        documents=[chapter]
    )
    assert len(other.requests) == 1


def test_concurrency_is_bounded(chapter):
    import asyncio

    active = 0
    peak = 0

    async def tracked(messages):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.05)
        active -= 1
        return halves(messages)

    class Tracking(ScriptedLLM):
        async def achat(self, messages, **kwargs):
            from llama_index.core.base.llms.types import ChatMessage, ChatResponse

            text = await tracked(messages)
            return ChatResponse(message=ChatMessage(role="assistant", content=text))

    docs = [Document(text=chapter.text, id_=f"d{i}") for i in range(7)]
    parser = LitSegNodeParser(llm=Tracking([]), num_workers=3)
    nodes = asyncio.run(parser.aget_nodes_from_documents(docs))
    assert peak == 3
    assert {n.ref_doc_id for n in nodes} == {f"d{i}" for i in range(7)}


def test_sync_parse_inside_a_running_event_loop(chapter):
    import asyncio

    async def notebook_cell():
        return LitSegNodeParser(llm=ScriptedLLM([halves])).get_nodes_from_documents([chapter])

    nodes = asyncio.run(notebook_cell())
    assert_covers(nodes, n_sentences(chapter))
