"""Narrative tools and routed answers on a real ingested book: The Call of the Wild, chapters 1-3
(offline segmenter, MiniLM, embedded Qdrant Edge, the real character index), with assets built
by the real pipeline (extractor, canonical names, profiles, asset store) from a scripted LLM
that answers every block with valid JSON about the characters the index finds in it. Every item
carries a chapter mark (``MARK-c2-...``), so a later chapter leaking into any tool's text shows.

The spoiler limit is checked for every tool; the routed engine's citations against the blocks
behind the assets; the agent path with a scripted function-calling LLM (no real function-calling
model runs on this machine); one routed answer from the real SmolLM2 server.
"""

from __future__ import annotations

import json
import re
import time
from itertools import count

import pytest
from scripted_llm import ScriptedLLM, ScriptedToolLLM, ToolCall
from test_narrative_characters import cli, wild_library  # noqa: F401  (a fixture)

from litrag.answering.answer import AnswerStream, BookQueryEngine
from litrag.builders import build_query_engine, build_routed_engine
from litrag.narrative.asset_store import AssetStore
from litrag.narrative.assets import AssetExtractor
from litrag.narrative.build import build_assets
from litrag.narrative.engine import NOTES_LABEL, OPENINGS_LABEL, NarrativeQueryEngine
from litrag.narrative.excerpts import GAP
from litrag.narrative.index import CHARACTERS_KEY, load_index
from litrag.narrative.tools import NO_ASSETS, TOOL_NAMES, NarrativeTools, ToolOutput
from litrag.retrieval.retriever import BookRetriever, RetrievalSettings
from litrag.settings import Settings

BOOK = "pg215"
MARK = re.compile(r"MARK-c(\d+)-")
COUNTS = re.compile(
    r"\b(?:mentioned|named|passages?)\b[^.\n]{0,40}\b\d+ times\b|\bmentioned\b", re.I
)


def scripted_extraction(messages) -> str:
    """A valid extraction of one block from what the prompt says of it: its chapter and the
    indexed characters it names; every item marked with the chapter it was read in."""
    user = messages[-1].content
    chapter = int(re.search(r"^Chapter (\d+)", user, re.M).group(1))
    names = re.search(r"^Known characters named here: (.*)$", user, re.M).group(1)
    names = re.sub(r"</?names>", "", names)  # book text arrives as tagged data
    people = [] if names == "none" else [n.strip() for n in names.split(",")][:6]
    k = next(_blocks)
    mark = f"MARK-c{chapter}-b{k}"
    # grounded in the passage, as a faithful reader's items are (litrag.narrative.grounding)
    found = re.search(r"<passage[^>]*>(.*?)</passage>", user, re.S)
    words = " ".join((found.group(1) if found else "").split()[:16])[:80]
    out = {
        "entities": [
            {"name": p, "type": "animal", "description": f"{p} ({mark}): {words}"} for p in people
        ],
        "facts": [{"entity": p, "fact": f"{p} ({mark}): {words}"} for p in people],
        "events": [],
        "relations": [],
    }
    if len(people) >= 2:
        out["events"] = [
            {
                "summary": f"{people[0]} meets {people[1]} ({mark}): {words}",
                "participants": people[:2],
            }
        ]
        out["relations"] = [
            {"source": people[0], "relation": f"is with ({mark})", "target": people[1]}
        ]
    return json.dumps(out)


_blocks = count(1)


@pytest.fixture(scope="module")
def wild(wild_library):  # noqa: F811
    """The module's library with assets for all three chapters, and its open asset store."""
    lib, home, _ = wild_library
    s = Settings(home=home)
    assets = AssetStore.open(home, s.collection, embed_model=lib.embed_model)
    n_blocks = len(lib.store.get_nodes())
    extractor = AssetExtractor(ScriptedLLM([scripted_extraction] * n_blocks), num_workers=1)
    report = build_assets(home, BOOK, "The Call of the Wild", lib.store, assets, extractor)
    assert report.blocks == n_blocks and report.summary.valid == n_blocks
    assert {"entity_profile", "chapter_outline", "plotline"} <= set(report.nodes)
    yield lib, home, assets
    assets.close()


def tools_at(wild, limit, with_assets=True) -> NarrativeTools:
    lib, home, assets = wild
    blocks = BookRetriever(lib.store, lib.embed_model, BOOK, upto_chapter=limit)
    return NarrativeTools(
        BOOK,
        assets=assets if with_assets else None,
        blocks=blocks,
        index=load_index(home, BOOK),
        upto_chapter=limit,
    )


def every_tool(t: NarrativeTools) -> list[ToolOutput]:
    return [
        t.search_passages("Spitz fights Buck in the snow"),
        t.character_profile("Buck", upto_chapter=3),  # asks past the session's limit
        t.character_profile("Spitz"),
        t.character_timeline("Buck", upto_chapter=3),
        t.character_timeline("Perrault"),
        t.chapter_outline(1),
        t.chapter_outline(2),
        t.chapter_outline(3),
        t.events_between(1, 3),
        t.events_between(2, 3, name="Buck"),
        t.plotline("Buck", "Spitz"),
        t.plotline("Buck", "Perrault"),
    ]


def assert_within(out: ToolOutput, limit: int) -> None:
    seen = [int(c) for c in MARK.findall(str(out))]  # the text and the passages an agent reads
    assert all(c <= limit for c in seen), (out.tool, out.args, seen)
    assert all(s.node.metadata["chapter_index"] <= limit for s in out.sources), out.tool
    assert out.upto_chapter is not None and out.upto_chapter <= limit


@pytest.mark.parametrize("limit", [1, 2])
@pytest.mark.parametrize("with_assets", [True, False])
def test_every_tool_keeps_to_the_spoiler_limit(wild, limit, with_assets):
    t = tools_at(wild, limit, with_assets)
    outs = every_tool(t)
    for out in outs:
        assert_within(out, limit)
    by = {(o.tool, json.dumps(o.args, sort_keys=True)): o for o in outs}
    assert all(o.tool in TOOL_NAMES for o in outs)
    # chapter 3 is past both limits; so is chapter 2 for a reader of chapter 1
    outline3 = next(o for o in outs if o.tool == "chapter_outline" and o.args["chapter"] == 3)
    assert not outline3.found and outline3.sources == [] and "spoiler limit" in outline3.text
    buck = next(o for o in outs if o.tool == "character_profile" and o.args["name"] == "Buck")
    assert buck.found and buck.args["upto_chapter"] == limit  # clamped to the session's
    spitz = next(o for o in outs if o.tool == "character_profile" and o.args["name"] == "Spitz")
    assert spitz.found == (limit >= 2)  # Spitz is met in chapter 2: unknown before
    if limit == 1:
        assert spitz.sources == [] and "Spitz" not in spitz.text.replace("'Spitz'", "")
    assert len(by) == len(outs)


def test_profile_cites_the_blocks_behind_its_snapshot(wild):
    _, _, assets = wild
    out = tools_at(wild, 2).character_profile("Buck")
    assert out.found and not out.note and len(out.asset_ids) == 1
    (node,) = [n for n in assets.get(BOOK, "entity_profile") if n.node_id == out.asset_ids[0]]
    assert node.metadata["chapter_index"] == 2 and out.text == node.get_content()
    assert {s.node.node_id for s in out.sources} == set(node.metadata["source_blocks"])
    assert all("buck" in s.node.metadata[CHARACTERS_KEY] for s in out.sources)
    assert {s.node.metadata["chapter_index"] for s in out.sources} == {1, 2}
    keys = [(s.node.metadata["chapter_index"], s.node.start_char_idx) for s in out.sources]
    assert keys == sorted(keys)  # reading order
    # the profile's marks name exactly chapters the sources come from
    assert {int(c) for c in MARK.findall(out.text)} <= {1, 2}


def test_timeline_runs_in_reading_order_from_the_first_appearance(wild):
    out = tools_at(wild, 3).character_timeline("Spitz")
    assert out.found and out.text.startswith("Timeline of Spitz up to chapter 3")
    assert "first named in chapter 2" in out.text.splitlines()[0]
    chapters = [int(c) for c in re.findall(r"^- \(ch\. (\d+)\)", out.text, re.M)]
    assert chapters and chapters == sorted(chapters) and chapters[0] == 2
    marks = [int(b) for b in re.findall(r"MARK-c\d+-b(\d+)", out.text)]
    assert marks == sorted(marks)  # the extractor saw the blocks in reading order too


def test_names_resolve_through_the_index_as_the_reader_knows_it(wild):
    early, late = tools_at(wild, 1), tools_at(wild, 3)
    assert early.resolve("Spitz") is None and late.resolve("Spitz").ids == ("spitz",)
    assert late.resolve("spitz's").ids == ("spitz",)  # possessive and case
    francois = late.resolve("François")
    assert francois is not None and francois.ids == ("francois",)
    assert late.resolve("Nobody Atall") is None


def test_without_assets_each_tool_degrades_and_says_so(wild):
    t = tools_at(wild, 2, with_assets=False)
    profile = t.character_profile("Perrault")
    assert profile.found and profile.note == NO_ASSETS and profile.asset_ids == []
    assert "first named in chapter" in profile.text and not COUNTS.search(profile.text)
    assert all("perrault" in s.node.metadata[CHARACTERS_KEY] for s in profile.sources)
    # best first: where Perrault is introduced (his first block), then where he is named most
    assert profile.ranked[0].node.node_id == load_index(wild[1], BOOK).by_id("perrault").first_block
    outline = t.chapter_outline(2)
    assert outline.found and outline.note == NO_ASSETS
    assert {s.node.metadata["chapter_index"] for s in outline.sources} == {2}
    span = t.events_between(1, 3)
    assert span.args["chapter_to"] == 2 and span.note == NO_ASSETS
    assert {s.node.metadata["chapter_index"] for s in span.sources} == {1, 2}  # spread
    pair = t.plotline("Buck", "Spitz")
    assert pair.found and pair.note == NO_ASSETS and not COUNTS.search(pair.text)
    assert all({"buck", "spitz"} <= set(s.node.metadata[CHARACTERS_KEY]) for s in pair.sources)
    timeline = t.character_timeline("Spitz")
    assert timeline.found and timeline.note == NO_ASSETS and not COUNTS.search(timeline.text)
    assert {s.node.metadata["chapter_index"] for s in timeline.sources} == {2}


def test_as_tools_are_function_tools_that_keep_the_limit(wild):
    tools = tools_at(wild, 1).as_tools()
    assert [t.metadata.name for t in tools] == list(TOOL_NAMES)
    assert all("up to chapter 1" in t.metadata.description for t in tools)
    profile = tools[1]
    schema = profile.metadata.get_parameters_dict()
    assert schema["required"] == ["name"] and "upto_chapter" in schema["properties"]
    result = profile.call(name="Buck", upto_chapter=3)
    raw = result.raw_output
    assert isinstance(raw, ToolOutput) and raw.upto_chapter == 1
    assert result.content == str(raw) and "Passages:" in result.content
    assert all(int(c) <= 1 for c in MARK.findall(result.content))


# ------------------------------------------------------------------------ the routed engine
def engine_at(wild, limit, llm=None, with_assets=True, top_k=None) -> NarrativeQueryEngine:
    lib, home, _ = wild
    retrieval = RetrievalSettings.from_preset("embedded", top_k=top_k)
    book = build_query_engine(
        Settings(home=home),
        BOOK,
        upto_chapter=limit,
        llm=llm,
        retrieval=retrieval,
        store=lib.store,
        children_store=lib.children_store,
        embed_model=lib.embed_model,
    )
    t = tools_at(wild, limit, with_assets)
    t.blocks = book.retriever
    index = load_index(home, BOOK)
    return NarrativeQueryEngine(t, book, index=index, chapters=3)


def test_routed_answer_cites_the_blocks_behind_the_profile(wild):
    llm = ScriptedLLM(["Buck is a big dog."])
    engine = engine_at(wild, 2, llm)
    engine.streaming = False
    answer = engine.ask("Who is Buck?").answer()
    assert answer.route["tool"] == "character_profile" and answer.route["by"] == "rules"
    assert answer.text == "Buck is a big dog." and answer.mode == "llm"
    profile = tools_at(wild, 2).character_profile("Buck")
    behind = {s.node.node_id for s in profile.sources}
    cited = [s.node_id for s in answer.sources]
    assert cited and set(cited) <= behind and all(s.chapter_index <= 2 for s in answer.sources)
    _system, user = llm.requests[0]
    head = "Book Title: <title>The Call of the Wild</title>\nQuestion: Who is Buck?"
    assert user.content.startswith(head)
    notes = "Notes (what the reader knows of the character):\n<notes>\n"
    assert notes + profile.text.strip() + "\n</notes>" in user.content
    assert user.content.endswith("Question: Who is Buck?\nAnswer:")
    assert user.content.count("<passage from=") == len(cited)  # exactly the cited blocks sent
    for src in answer.sources:
        assert src.text.split("\n")[0][:60] in user.content
    assert all(int(c) <= 2 for c in MARK.findall(user.content))


def test_outline_route_fits_an_even_spread_of_its_blocks(wild):
    llm = ScriptedLLM(["Buck is stolen."])
    engine = engine_at(wild, 3, llm)
    engine.streaming = False
    answer = engine.ask("Summarise chapter 1").answer()
    assert answer.route["tool"] == "chapter_outline" and answer.route["kwargs"] == {"chapter": 1}
    assert answer.sources and {s.chapter_index for s in answer.sources} == {1}
    assert "Answer in a few sentences" in llm.requests[0][0].content


def test_search_route_is_todays_answer(wild):
    question = "What kind of dog was Buck's father?"
    routed_llm, plain_llm = ScriptedLLM(["A St. Bernard."]), ScriptedLLM(["A St. Bernard."])
    routed = engine_at(wild, 2, routed_llm)
    plain: BookQueryEngine = engine_at(wild, 2, plain_llm).book
    routed.streaming = plain.streaming = False
    a = routed.ask(question).answer()
    b = AnswerStream.from_response(plain.query(question)).answer()
    assert a.route["tool"] == "search_passages" and b.route is None
    assert a.model_dump(exclude={"route"}) == b.model_dump(exclude={"route"})
    assert routed_llm.requests == plain_llm.requests


def test_a_tool_that_finds_nothing_falls_back_to_passages(wild):
    engine = engine_at(wild, 1, ScriptedLLM(["I don't know."]))
    answer = engine.ask("What happens in chapter 3?").answer()
    assert answer.route["by"] == "fallback" and answer.route["tool"] == "search_passages"
    assert "chapter_outline(chapter=3)" in answer.route["reason"]
    assert answer.sources and all(s.chapter_index <= 1 for s in answer.sources)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_without_assets_who_is_spitz_is_read_from_the_passages_about_him(wild, books_dir):
    """No assets, no LLM: the passages where Spitz is introduced and named most, steered by the
    character index, answer; the text is sentences of them naming Spitz, never the index's
    counts."""
    raw = (books_dir / "pg215_call_of_the_wild.txt").read_bytes().decode("utf-8-sig")
    book = flat(raw)
    answer = engine_at(wild, None, with_assets=False).ask("Who is Spitz?").answer()
    assert answer.route["tool"] == "character_passages" and answer.route["by"] == "rules"
    assert "passages steered by the character index" in answer.route["reason"]
    assert answer.route["kwargs"]["name"] == "Spitz"
    assert "steered by the character index" in answer.retrieval
    assert answer.mode == "extractive" and not COUNTS.search(answer.text)
    assert answer.evidence and answer.text.endswith(" ... ".join(answer.evidence))
    cited = [flat(s.text) for s in answer.sources]
    for sentence in answer.evidence:
        assert re.search(r"\bSpitz\b", sentence) and flat(sentence) in book
        assert any(flat(sentence) in c for c in cited)  # a sentence of a cited passage
    assert answer.sources and all(s.chapter_index >= 2 for s in answer.sources)
    stored = {
        n.node_id: n for n in wild[0].store.get_nodes(node_ids=[s.node_id for s in answer.sources])
    }
    assert all("spitz" in stored[s.node_id].metadata[CHARACTERS_KEY] for s in answer.sources)
    first = load_index(wild[1], BOOK).by_id("spitz").first_block
    assert answer.sources[0].node_id == first  # where the book introduces him
    print("no assets, no LLM:", answer.text, [s.citation() for s in answer.sources])


def test_the_ending_past_the_limit_is_no_tool_s_to_tell(wild):
    """With every asset built, "How does the book end?" at chapter 1 reaches no narrative tool
    (a plotline or outline would tell it) and no LLM: the reply says the ending lies ahead."""
    llm = ScriptedLLM([])  # any call would fail the test
    engine = engine_at(wild, 1, llm)
    engine.streaming = False
    answer = engine.ask("How does the book end?").answer()
    assert llm.requests == [] and answer.mode == "none"
    assert answer.route["tool"] == "search_passages" and "ends" in answer.route["reason"]
    assert "lies past chapter 1" in answer.text
    assert answer.sources and all(s.chapter_index <= 1 for s in answer.sources)


def test_without_assets_a_reader_of_chapter_1_is_not_told_of_spitz(wild):
    answer = engine_at(wild, 1, with_assets=False).ask("Who is Spitz?").answer()
    assert answer.route["tool"] == "search_passages"  # nobody named Spitz is met yet
    assert answer.sources and all(s.chapter_index <= 1 for s in answer.sources)
    # Only the reader's own word comes back ("never mentions “Spitz” up to chapter 1"): nothing
    # the book says of him, and no index statistics.
    assert "never mentions “Spitz” up to chapter 1" in answer.text
    assert not re.search(r"\bSpitz\b", answer.text.replace("never mentions “Spitz”", ""))
    assert not COUNTS.search(answer.text)
    for s in answer.sources:
        assert not re.search(r"\bSpitz\b", s.text)
    print("no assets, up to chapter 1:", answer.text, [s.citation() for s in answer.sources])


def test_without_assets_an_llm_reads_the_steered_passages_with_the_plain_prompt(wild):
    llm = ScriptedLLM(["Spitz is the lead dog."])
    engine = engine_at(wild, 2, llm, with_assets=False)
    engine.streaming = False
    answer = engine.ask("Who is Spitz?").answer()
    assert answer.route["tool"] == "character_passages" and answer.mode == "llm"
    assert answer.text == "Spitz is the lead dog."
    _system, user = llm.requests[0]
    assert "Notes (" not in user.content and "times" not in user.content.split("References:")[0]
    steered = tools_at(wild, 2, with_assets=False).character_passages("Spitz", "Who is Spitz?")
    assert {s.node_id for s in answer.sources} <= {n.node.node_id for n in steered.ranked}
    assert answer.sources and all(s.chapter_index <= 2 for s in answer.sources)
    assert 2 in {s.chapter_index for s in answer.sources}
    assert user.content.count("<passage from=") >= 1
    assert any("Spitz" in s.text for s in answer.sources)


def read_with_budgets(wild, question: str, tool: str) -> tuple[dict, NarrativeQueryEngine]:
    """``question`` answered with no assets at the limit of chapter 3, the local model's budget
    of 650 words and a server's 0 (all): {words: (answer, the passage bodies it read)}."""
    read = {}
    for words in (650, 0):
        llm = ScriptedLLM(["An answer."])
        engine = engine_at(wild, 3, llm, with_assets=False)
        engine.streaming = False
        engine.book.read_words = words
        answer = engine.ask(question).answer()
        assert answer.route["tool"] == tool and answer.mode == "llm"
        _system, user = llm.requests[0]
        bodies = re.findall(r"<passage from=\"[^\"]*\">\n(.*?)\n</passage>", user.content, re.S)
        assert len(bodies) == len(answer.sources) >= 1
        read[words] = (answer, bodies)
    return read, engine


def test_within_a_reading_budget_the_llm_reads_what_each_block_says_of_the_character(wild):
    """The packaged model reads 650 words: of each steered block, the sentences naming Spitz
    (each with the one after it), so blocks past his introduction fit beside it; a server, which
    reads everything, gets the blocks whole."""
    prompts, engine = read_with_budgets(wild, "Who is Spitz?", "character_passages")
    cut, cut_bodies = prompts[650]
    whole, whole_bodies = prompts[0]
    steered = engine.tools.character_passages("Spitz", "Who is Spitz?")
    order = [n.node.node_id for n in steered.ranked]
    assert [s.node_id for s in cut.sources] == order[: len(cut.sources)]  # best first, no gap
    assert sum(len(b.split()) for b in cut_bodies) <= 650 + 130  # the budget, the last may go over
    for s, body in zip(cut.sources, cut_bodies, strict=True):
        assert re.search(r"\bSpitz\b", body)
        if s.excerpt is not None:  # what the model read is recorded as the source's excerpt
            assert GAP in body and s.excerpt.split() == body.split()
    assert sum(s.excerpt is not None for s in cut.sources) >= 3
    assert len(cut.sources) > 2 and {2, 3} <= {s.chapter_index for s in cut.sources}
    assert all(s.excerpt is None for s in whole.sources) and GAP not in "".join(whole_bodies)


def test_within_a_reading_budget_a_chapter_is_read_as_each_blocks_gist(wild):
    """With no outline, a chapter question reads up to 12 of its blocks; within the local
    model's 650 words each is cut to its most salient sentence and the next, so every chosen
    block is read, not the first few whole."""
    read, engine = read_with_budgets(wild, "What happens in chapter 2?", "chapter_outline")
    assert all(s.chapter_index == 2 for answer, _ in read.values() for s in answer.sources)
    cut, cut_bodies = read[650]
    whole, whole_bodies = read[0]
    chosen = engine.tools.chapter_outline(2).sources
    assert [s.node_id for s in cut.sources] == [n.node.node_id for n in chosen]  # every one
    assert len(cut.sources) > len(whole.sources)
    assert sum(len(b.split()) for b in cut_bodies) < sum(len(b.split()) for b in whole_bodies)
    assert sum(len(b.replace(GAP, " ").split()) for b in cut_bodies) <= 650 + 40 * len(chosen)
    for s, body in zip(cut.sources, cut_bodies, strict=True):
        if s.excerpt is not None:
            assert GAP in body and s.excerpt.split() == body.split()
    assert sum(s.excerpt is not None for s in cut.sources) >= len(chosen) - 1
    assert all(s.excerpt is None for s in whole.sources)


def test_within_a_reading_budget_a_story_reads_every_chapter(wild):
    """A character's story (its arc) is read chapter by chapter: within a reading budget each
    chapter's block naming Buck most gives the sentences naming him, every chapter one, where
    the first blocks would fill the budget with his opening chapter (this library holds
    chapters 1-3; 300 words is what 650 are to the whole book's seven)."""
    llm = ScriptedLLM(["An answer."])
    engine = engine_at(wild, None, llm, with_assets=False)
    engine.streaming = False
    engine.book.read_words = 300
    answer = engine.ask("How does Buck change over the story?").answer()
    assert answer.route["tool"] == "character_passages" and answer.route["kwargs"]["story"]
    assert [s.chapter_index for s in answer.sources[:3]] == [1, 2, 3]  # in story order
    _system, user = llm.requests[0]
    bodies = re.findall(r"<passage from=\"[^\"]*\">\n(.*?)\n</passage>", user.content, re.S)
    assert sum(len(b.replace(GAP, " ").split()) for b in bodies) <= 300 + 60
    assert all(re.search(r"\bBuck\b", b) for b in bodies)


def test_a_story_asked_about_its_end_reads_the_last_block_naming_the_character(wild):
    """ "What does Buck become at the end of the story?": the library's last block naming Buck
    leads what the model reads (chapter 3's block naming him most is an earlier scene)."""
    llm = ScriptedLLM(["An answer."])
    engine = engine_at(wild, None, llm, with_assets=False)
    engine.streaming = False
    engine.book.read_words = 300
    tools = engine.tools
    who = tools.resolve("Buck", None)
    assert who is not None
    last = tools._naming(who.ids, None)[-1].node.node_id
    plain = tools.character_passages("Buck", "How does Buck change?", story=True)
    assert plain.ranked[0].node.node_id != last and plain.ranked[2].node.node_id != last
    answer = engine.ask("What does Buck become at the end of the story?").answer()
    assert answer.route["tool"] == "character_passages" and answer.route["kwargs"]["story"]
    read = {s.node_id: s for s in answer.sources}
    assert last in read and read[last].excerpt is None  # read whole: "he", not only "Buck"
    assert any(s.excerpt is not None for s in answer.sources)  # the others cut to their share


def test_without_assets_a_story_or_a_pair_is_book_text_too(wild):
    engine = engine_at(wild, 3, with_assets=False)
    story = engine.ask("When does Spitz first appear?").answer()
    assert story.route["tool"] == "character_passages" and story.route["kwargs"]["story"]
    chapters = [s.chapter_index for s in story.sources]
    assert chapters == sorted(chapters) and chapters[0] == 2 and 3 in chapters
    assert story.evidence and all(re.search(r"\bSpitz\b", e) for e in story.evidence)
    pair = engine.ask("What is the relationship between Buck and Spitz?").answer()
    assert pair.route["tool"] == "pair_passages" and not COUNTS.search(pair.text)
    assert pair.evidence and all(re.search(r"\b(?:Buck|Spitz)\b", e) for e in pair.evidence)
    outline = engine.ask("What happens in chapter 2?").answer()
    assert outline.route["tool"] == "chapter_outline" and outline.text.startswith(OPENINGS_LABEL)
    assert outline.evidence and not COUNTS.search(outline.text)
    assert all(s.chapter_index == 2 for s in outline.sources)


def test_without_an_llm_the_notes_are_the_answer(wild):
    answer = engine_at(wild, 2).ask("Tell me about Perrault").answer()
    assert answer.mode == "extractive" and answer.text.startswith(NOTES_LABEL)
    assert "Perrault" in answer.text and answer.sources
    assert all(s.chapter_index <= 2 for s in answer.sources)


def test_a_function_calling_llm_drives_the_tools_as_an_agent(wild):
    """The agent asks for a profile past the reader's chapter; the tool clamps it. (A scripted
    function-calling LLM: no real one runs on this machine.)"""
    llm = ScriptedToolLLM([ToolCall("character_profile", name="Spitz", upto_chapter=3), "A dog."])
    engine = engine_at(wild, 2, llm)
    answer = engine.ask("Tell me about the dog Spitz.").answer()
    assert answer.text == "A dog." and answer.error is None
    assert answer.route["by"] == "agent" and answer.route["tool"] == "character_profile"
    assert answer.route["calls"] == [
        {"tool": "character_profile", "args": {"name": "Spitz", "upto_chapter": 2}, "found": True}
    ]
    assert llm.tools_offered[0] == list(TOOL_NAMES)
    tool_msgs = [m for m in llm.requests[1] if m.role == "tool"]
    assert len(tool_msgs) == 1
    profile = tools_at(wild, 2).character_profile("Spitz")
    assert tool_msgs[0].content == str(profile)
    cited = {s.node_id for s in answer.sources}
    assert cited == {n.node.node_id for n in profile.passages()}
    assert all(s.chapter_index <= 2 for s in answer.sources)
    assert all(int(c) <= 2 for m in llm.requests[1] for c in MARK.findall(m.content or ""))


def test_llm_tools_makes_a_server_client_function_calling(tmp_path, monkeypatch):
    """What sends `litrag ask` down the agent path with a served model (no server is called)."""
    from litrag.builders import build_answer_llm
    from litrag.models.served import BackendError

    url = "http://127.0.0.1:9/v1"
    monkeypatch.setenv("LITRAG_LLM_TOOLS", "1")
    s = Settings(home=tmp_path, llm_url=url, llm_model="Qwen/Qwen3-8B", llm_backend="openai-like")
    assert s.llm_tools
    with build_answer_llm(s) as answer_llm:
        assert answer_llm.llm.metadata.is_function_calling_model
    with build_answer_llm(s.model_copy(update={"llm_tools": False})) as answer_llm:
        assert not answer_llm.llm.metadata.is_function_calling_model
    with pytest.raises(BackendError, match="LITRAG_LLM_TOOLS needs"):
        build_answer_llm(s.model_copy(update={"llm_backend": "vllm"}))


@pytest.mark.llm
def test_routed_answer_from_a_real_llm(wild, llama_server):
    # a 2k window (of SmolLM2's 8k): a short prompt, and fewer blocks fit than lie behind
    llm = llama_server.llm(max_tokens=48, timeout=600, context_window=2048)
    engine = engine_at(wild, 2, llm)
    t0 = time.perf_counter()
    stream = engine.ask("Who is Perrault?")
    assert stream.route["tool"] == "character_profile" and stream.sources
    pieces = list(stream)
    answer = stream.answer()
    print(f"routed answer ({time.perf_counter() - t0:.1f}s): {answer.text!r}")
    assert answer.text and answer.error is None
    if answer.draft is None:  # the draft stands: it streamed as it came
        assert len(pieces) > 1
    else:  # withdrawn under the limit: the name gate sent only what precedes the name
        assert answer.draft.startswith("".join(pieces))
    behind = {s.node.node_id for s in tools_at(wild, 2).character_profile("Perrault").sources}
    assert {s.node_id for s in answer.sources} <= behind
    assert len(answer.sources) < len(behind)  # cut to the window: cited is what was sent


# ------------------------------------------------------------------------ litrag ask (last)
def test_litrag_ask_routes_and_no_route_does_not(wild, capsys):
    """Last: it closes the module's stores so the command can open them."""
    lib, home, assets = wild
    lib.close()
    assets.close()
    code, out, err = cli(
        home, capsys, "ask", "Who is Buck?", "--upto-chapter", "1", "--no-llm", "--json"
    )
    assert code == 0, err
    answer = json.loads(out)
    assert answer["route"]["tool"] == "character_profile"
    assert answer["route"]["kwargs"] == {"name": "Buck", "upto_chapter": 1}
    assert answer["sources"] and all(s["chapter_index"] <= 1 for s in answer["sources"])
    assert all(int(c) <= 1 for c in MARK.findall(out))
    code, out, err = cli(home, capsys, "ask", "Who is Buck?", "--no-llm", "--no-route", "--json")
    assert code == 0 and json.loads(out)["route"] is None
    code, out, err = cli(home, capsys, "ask", "What happens in chapter 2?", "--no-llm")
    assert code == 0 and "route: chapter_outline(chapter=2) [rules:" in err
    engine = build_routed_engine(Settings(home=home), BOOK, upto_chapter=1)
    try:
        assert isinstance(engine, NarrativeQueryEngine) and engine.tools.has_assets
    finally:
        engine.close()
        engine.retriever.vector_store.close()
