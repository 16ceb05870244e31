"""Small-to-big in the library: a real book ingested with its paragraph children (the blocks
snapped to them), retrieval that ranks blocks through them, and the children kept in step with
the blocks (remove, a damaged children collection, the spoiler limit)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.schema import MetadataMode, QueryBundle
from test_library import short_book

from litrag.answering.answer_types import Source
from litrag.builders import build_library, build_query_engine
from litrag.chunkers.baselines import paragraph_chunker
from litrag.chunkers.children import PARENT_KEY, collapse
from litrag.ingestion.book_points import book_filter, count_points
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.retrieval.retriever import BookRetriever, RetrievalSettings
from litrag.settings import Settings

WILD = "pg215"
QUESTIONS = [
    "Who sold Buck to pay his gambling debts?",
    "What did the man in the red sweater beat Buck with?",
    "Where was Judge Miller's place?",
    "What happened to Curly at the camp?",
]


@pytest.fixture(scope="module")
def wild(books_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """The Call of the Wild, chapters I-II, ingested with children (the default settings)."""
    root = tmp_path_factory.mktemp("small-to-big")
    src = short_book(books_dir / "pg215_call_of_the_wild.txt", root / "wild.txt", "Chapter III.")
    lib = build_library(Settings(home=root / "home"))
    report = lib.ingest([src])
    assert report.ok, report.failed
    try:
        yield lib, src
    finally:
        lib.close()


def _children(lib):
    return lib.children_store.get_nodes(filters=book_filter(WILD))


def _blocks(lib):
    return lib.store.get_nodes(filters=book_filter(WILD))


def test_children_are_stored_and_counted(wild):
    lib, _ = wild
    record = lib.book(WILD)
    kids = _children(lib)
    assert record.children == len(kids) == count_points(lib.children_store, WILD) > record.nodes
    assert "embed_children" in record.seconds


def test_windows_are_kept_by_the_children_only(wild):
    """With children on, a new library's blocks keep one vector each (ranking reads the
    children's, which keep their sentence windows); the record's seconds have no block windows."""
    lib, _ = wild
    assert lib.store.config.window_vector_name is None
    assert lib.children_store.config.window_vector_name is not None
    assert lib.book(WILD).seconds.get("embed_windows", 0.0) == 0.0


def test_each_block_is_the_exact_union_of_its_children(wild):
    lib, src = wild
    chapters = {d.node_id: d for d in split_chapters(load_book(src))}
    blocks = {b.node_id: b for b in _blocks(lib)}
    by_parent: dict[str, list] = {}
    for kid in _children(lib):
        assert kid.metadata[PARENT_KEY] in blocks
        by_parent.setdefault(kid.metadata[PARENT_KEY], []).append(kid)
    assert set(by_parent) == set(blocks)  # no block without a child, no orphan child
    for bid, kids in by_parent.items():
        block = blocks[bid]
        kids.sort(key=lambda k: k.start_char_idx)
        assert kids[0].start_char_idx == block.start_char_idx
        assert kids[-1].end_char_idx == block.end_char_idx
        text = chapters[block.ref_doc_id].get_content(metadata_mode=MetadataMode.NONE)
        assert text[block.start_char_idx : block.end_char_idx] == block.get_content(
            metadata_mode=MetadataMode.NONE
        )
    # the children are the paragraph chunker's very pieces of each chapter
    for chapter in chapters.values():
        ref = paragraph_chunker().get_nodes_from_documents([chapter])
        mine = sorted(
            (k for k in _children(lib) if k.ref_doc_id == chapter.node_id),
            key=lambda k: k.start_char_idx,
        )
        assert [(k.start_char_idx, k.end_char_idx) for k in mine] == [
            (r.start_char_idx, r.end_char_idx) for r in ref
        ]
    # and a child's payload holds its block's characters, so character filters agree
    parents_chars = {b.node_id: b.metadata.get("characters") for b in blocks.values()}
    assert any(parents_chars.values())
    for kid in _children(lib):
        assert kid.metadata.get("characters") == parents_chars[kid.metadata[PARENT_KEY]]


@pytest.mark.parametrize("mode", ["hybrid", "sparse", "dense"])
def test_blocks_rank_in_the_order_of_their_best_child(wild, mode):
    lib, _ = wild
    settings = RetrievalSettings(mode=mode, top_k=8)
    through = BookRetriever(
        lib.store, lib.embed_model, WILD, settings=settings, children_store=lib.children_store
    )
    assert through.through_children and "paragraph children" in through.describe()
    for q in QUESTIONS:
        got = through.retrieve(q)
        kids = through.rank_children(q)
        want = collapse(
            [k.node.node_id for k in kids],
            {k.node.node_id: [k.node.metadata[PARENT_KEY]] for k in kids},
        )
        assert [n.node.node_id for n in got] == want[: settings.top_k], q
        best = {}
        for k in kids:
            best.setdefault(k.node.metadata[PARENT_KEY], k)
        for nws in got:  # the winning child is the evidence, inside its block
            source = Source.from_node(1, nws)
            assert source.evidence == best[nws.node.node_id].node.get_content(
                metadata_mode=MetadataMode.NONE
            )
            assert source.evidence in nws.node.get_content(metadata_mode=MetadataMode.NONE)
            assert nws.score == best[nws.node.node_id].score
            assert "evidence_start" not in nws.node.get_content(metadata_mode=MetadataMode.LLM)


def test_ranking_as_blocks_is_still_there(wild):
    lib, _ = wild
    settings = RetrievalSettings(rank_through="blocks")
    plain = BookRetriever(
        lib.store, lib.embed_model, WILD, settings=settings, children_store=lib.children_store
    )
    assert not plain.through_children and "paragraph children" not in plain.describe()
    got = plain.retrieve(QUESTIONS[0])
    assert got and all(Source.from_node(1, n).evidence is None for n in got)


def test_the_spoiler_limit_holds_through_children(wild):
    lib, _ = wild
    late = "Spitz fought Buck and the team"  # chapter II's matter
    r = BookRetriever(
        lib.store,
        lib.embed_model,
        WILD,
        upto_chapter=1,
        settings=RetrievalSettings(top_k=20, child_top_k=200),
        children_store=lib.children_store,
    )
    got = r.retrieve(QueryBundle(late))
    assert got and all(n.node.metadata["chapter_index"] <= 1 for n in got)
    kids = r.rank_children(late)
    assert kids and all(k.node.metadata["chapter_index"] <= 1 for k in kids)


def test_the_engine_ranks_through_children_and_cites_the_evidence(wild):
    lib, _ = wild
    s = Settings(home=lib.home)
    engine = build_query_engine(
        s, WILD, store=lib.store, children_store=lib.children_store, embed_model=lib.embed_model
    )
    assert engine.retriever.through_children
    answer = engine.ask(QUESTIONS[0]).answer()
    assert answer.sources and all(src.evidence for src in answer.sources)
    blocks_only = build_query_engine(
        s.model_copy(update={"retrieval_overrides": {"rank_through": "blocks"}}),
        WILD,
        store=lib.store,
        children_store=lib.children_store,
        embed_model=lib.embed_model,
    )
    assert not blocks_only.retriever.through_children


def test_lost_children_are_noticed_and_rebuilt(wild):
    lib, src = wild
    record = lib.book(WILD)
    lib.children_store.delete_nodes(filters=book_filter(WILD))
    said: list[str] = []
    report = lib.ingest([src], on_event=said.append)
    assert report.ingested == [WILD], said
    assert any("paragraph children" in line for line in said)
    assert count_points(lib.children_store, WILD) == record.children == lib.book(WILD).children
    again = lib.ingest([src])
    assert again.unchanged == [WILD]


def test_remove_takes_the_children_too(wild, tmp_path):
    _, src = wild
    home = tmp_path / "home"
    other = build_library(Settings(home=home))
    try:
        assert other.ingest([src]).ok
        assert count_points(other.children_store, WILD) > 0
        assert other.remove(WILD)
        assert count_points(other.children_store, WILD) == 0
        assert count_points(other.store, WILD) == 0
    finally:
        other.close()


def test_the_sources_open_on_the_paragraph_that_ranked_the_block(wild):
    """The chat's sources panel (and `ask` without --full) show the winning paragraph even when
    it lies past the first screenful of a long block."""
    from litrag.app.chat import PASSAGE_CHARS, render_passage

    lib, _ = wild
    r = BookRetriever(lib.store, lib.embed_model, WILD, children_store=lib.children_store)
    shown = 0
    asked = [*QUESTIONS, "Buck fought the dogs in the snow", "the man with the club"]
    for q in asked:
        for nws in r.retrieve(q):
            src = Source.from_node(1, nws)
            flat = " ".join(src.text.split())
            para = " ".join(src.evidence.split())
            if flat.find(para) <= 0 or len(flat) <= PASSAGE_CHARS:
                assert not render_passage(src).startswith("… ")  # shown from its start
                continue
            panel = render_passage(src)
            assert panel.startswith("… ") and panel.split()[1] == para.split()[0].replace(
                "*", "\\*"
            )
            shown += 1
    assert shown > 0  # some winning paragraph lay past the start of a long block
