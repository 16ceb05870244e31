"""Small-to-big (litrag.query.children): paragraph children, their parents, the collapse; and
the property it is for, on real books: a block ranks through its children no lower than the
paragraph chunker ranks its paragraph, up to the children that straddle two blocks."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from llama_index.core.schema import Document, MetadataMode, TextNode

from litrag.chunkers.baselines import paragraph_chunker
from litrag.query.children import (
    book_children,
    chapter_children,
    child_id,
    collapse,
    rank_bound,
)

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()


def _para(i: int, n: int) -> str:
    return " ".join(f"{WORDS[i % len(WORDS)]}{j}" for j in range(n))


def _chapter(sizes: list[int], doc_id: str = "bk:ch0001") -> Document:
    return Document(id_=doc_id, text="\n\n".join(_para(i, n) for i, n in enumerate(sizes)))


def _blocks(doc: Document, cuts: list[int]) -> list[TextNode]:
    """Blocks of ``doc`` cut at character offsets ``cuts`` (exact slices, stripped)."""
    text, out = doc.text, []
    bounds = [0, *cuts, len(text)]
    for i, (a, b) in enumerate(pairwise(bounds)):
        piece = text[a:b]
        a += len(piece) - len(piece.lstrip())
        b = a + len(piece.strip())
        node = TextNode(id_=f"block{i}", text=text[a:b], start_char_idx=a, end_char_idx=b)
        node.relationships = {"1": doc.as_related_node_info()}  # SOURCE
        out.append(node)
    return out


def test_children_are_the_paragraph_chunkers_nodes_with_their_parents() -> None:
    doc = _chapter([120, 60, 150, 30, 40, 250])
    text = doc.text
    # block 0: paragraphs 0-1 and the first words of 2; block 1: the rest
    cut = text.index(_para(2, 150)) + 40
    blocks = _blocks(doc, [cut])
    kids, parents = chapter_children(blocks, doc)
    ref = paragraph_chunker().get_nodes_from_documents([doc])
    assert [k.text for k in kids] == [r.text for r in ref]
    assert [(k.start_char_idx, k.end_char_idx) for k in kids] == [
        (r.start_char_idx, r.end_char_idx) for r in ref
    ]
    assert all(text[k.start_char_idx : k.end_char_idx] == k.text for k in kids)
    assert [parents[k.node_id] for k in kids] == [
        ["block0"],
        ["block0", "block1"],
        ["block1"],
        ["block1"],
    ]
    assert kids[0].node_id == child_id(doc.node_id, kids[0].start_char_idx, kids[0].end_char_idx)
    _, major = chapter_children(blocks, doc, straddle="major")
    assert major[kids[1].node_id] == ["block1"]  # 110 of its 150 words lie in block 1
    with pytest.raises(ValueError, match="straddle"):
        chapter_children(blocks, doc, straddle="half")  # type: ignore[arg-type]


def test_book_children_match_blocks_to_chapters_and_refuse_offsetless_blocks() -> None:
    one, two = _chapter([50, 50], "bk:ch0001"), _chapter([80, 30, 20], "bk:ch0002")
    b1, b2 = _blocks(one, []), _blocks(two, [two.text.index(_para(1, 30))])
    for i, b in enumerate(b2):
        b.id_ = f"two{i}"
    kids, parents = book_children([*b1, *b2], [one, two])
    assert [parents[k.node_id] for k in kids] == [["block0"], ["two0", "two1"]]
    assert kids[0].get_content(metadata_mode=MetadataMode.NONE) == one.text
    bare = TextNode(id_="x", text=one.text)
    bare.relationships = {"1": one.as_related_node_info()}
    with pytest.raises(ValueError, match="offsets"):
        chapter_children([bare], one)
    stray = _blocks(_chapter([10], "other:ch1"), [])
    with pytest.raises(ValueError, match="none of the chapters"):
        book_children(stray, [one])


def test_collapse_ranks_parents_by_their_best_child_straddlers_both_in_story_order() -> None:
    parents = {"c1": ["B1"], "c2": ["B1", "B2"], "c3": ["B3"], "c4": ["B2"], "c5": ["B4", "B5"]}
    assert collapse(["c3", "c1", "c4", "c2"], parents) == ["B3", "B1", "B2"]
    assert collapse(["c5", "c3", "c2"], parents) == ["B4", "B5", "B3", "B1", "B2"]
    assert collapse(["zz", "c3"], parents) == ["B3"]  # a child with no parent is skipped
    assert collapse([], parents) == []
    # the child at rank 2 (c3): one straddler (c5) before it -> its parent is at most 3rd
    assert rank_bound(["c5", "c3", "c2"], parents, 2) == 3
    assert rank_bound(["c5", "c3", "c2"], parents, 3) == 5
    assert rank_bound(["c1", "c3"], parents, 2) == 2


# ------------------------------------------------------------------------ the property, real books
PROPERTY_BOOKS = ("pg215_call_of_the_wild", "pg11_alice_in_wonderland")


def _first(ranked_texts: list[str], needles: list[str]) -> int | None:
    return next((r for r, t in enumerate(ranked_texts, 1) if any(n in t for n in needles)), None)


@pytest.mark.slow
def test_blocks_through_children_rank_no_lower_than_paragraphs(
    data_dir: Path, tmp_path: Path
) -> None:
    """Every public question with a span, BM25 over the book's children (the paragraph index's
    statistics): the first gold block's rank through children is <= the first gold
    paragraph's rank in the paragraph chunker's own index, except (a) spans no block holds whole
    (counted) and (b) places taken by children that straddle two blocks, which ``rank_bound``
    counts; a block-level BM25 index in place of the collapse breaks it."""
    from litrag.eval.questions import load_books, load_questions
    from litrag.eval.registry import chunk_book, chunker_specs
    from litrag.eval.spans import normalize
    from litrag.query.bm25 import BM25Index

    questions = [
        q
        for q in load_questions(data_dir / "gutenqa" / "questions.jsonl")
        if any(b in q.book_file for b in PROPERTY_BOOKS)
    ]
    books, _ = load_books(questions, data_dir)
    assert len(books) == len(PROPERTY_BOOKS)
    text = lambda n: n.get_content(metadata_mode=MetadataMode.NONE)  # noqa: E731
    seg, par = chunker_specs(["litseg-offline", "paragraphs"])
    checked = split = above_paragraph = beyond_bound = flat_above = flat_beyond = 0
    for book in books:
        blocks, _ = chunk_book(seg, book.docs, book.key, tmp_path)
        paragraphs, _ = chunk_book(par, book.docs, book.key, tmp_path)
        kids, parents = book_children(blocks, book.docs)
        assert [text(k) for k in kids] == [text(p) for p in paragraphs]  # the same chunking
        norm_block = {b.node_id: normalize(text(b)) for b in blocks}
        norm_para = [normalize(text(p)) for p in paragraphs]
        para_index = BM25Index([text(p) for p in paragraphs])
        kid_index = BM25Index([text(k) for k in kids])  # built apart: same stats by construction
        block_index = BM25Index([text(b) for b in blocks])
        for q in book.questions:
            needles = [normalize(s) for s in q.spans]
            if not any(n in t for n in needles for t in norm_block.values()):
                split += 1
                continue
            r_para = _first([norm_para[i] for i, _ in para_index.search(q.question)], needles)
            if r_para is None:  # no paragraph holds the span whole: nothing to lose to
                continue
            checked += 1
            ranked = [kids[i].node_id for i, _ in kid_index.search(q.question)]
            r_block = _first([norm_block[p] for p in collapse(ranked, parents)], needles)
            assert r_block is not None
            above_paragraph += r_block > r_para
            beyond_bound += r_block > rank_bound(ranked, parents, r_para)
            r_flat = _first(
                [norm_block[blocks[i].node_id] for i, _ in block_index.search(q.question)],
                needles,
            )
            assert r_flat is not None
            flat_above += r_flat > r_para
            flat_beyond += r_flat > rank_bound(ranked, parents, r_para)
    print(
        f"\nchildren property: {checked} questions checked, {split} spans split across blocks; "
        f"block rank > paragraph rank: {above_paragraph} through children (all within the "
        f"straddler bound: {beyond_bound} beyond it); block-level BM25 instead of the "
        f"collapse: {flat_above} above the paragraph, {flat_beyond} beyond the bound"
    )
    assert checked >= 50
    assert beyond_bound == 0  # the construction's guarantee
    assert flat_beyond > 0  # the test can fail: block-level BM25 in place of the collapse does


def test_the_eval_key_chunker_through_paragraphs() -> None:
    from litrag.eval.registry import chunker_specs, is_ours

    (spec,) = chunker_specs(["litseg-offline>paragraphs"])
    assert (spec.base_key, spec.children) == ("litseg-offline", "paragraphs")
    assert spec.label == "LitSeg offline through paragraph children"
    assert is_ours(spec.key)
    (plain,) = chunker_specs(["litseg-offline"])
    assert (plain.base_key, plain.children) == ("litseg-offline", "")
    with pytest.raises(ValueError, match="children"):
        chunker_specs(["litseg-offline>sentences"])
