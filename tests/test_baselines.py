"""Reference chunkers: hand-computed LangChain behaviour, exact offsets and sizes on real books,
and the semantic splitter on a real chapter against LlamaIndex's own."""

from __future__ import annotations

import statistics
from itertools import pairwise
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.node_parser import SemanticSplitterNodeParser
from llama_index.core.node_parser.interface import TextSplitter
from llama_index.core.schema import NodeRelationship, TextNode
from llama_index.core.utils import get_tokenizer

from litrag.chunkers.baselines import (
    BASELINES,
    PAPER_SEPARATORS,
    DynamicMergeNodeParser,
    ParagraphNodeParser,
    RecursiveCharacterNodeParser,
    SemanticNodeParser,
    TextSplitterNodeParser,
    dynamic_merge,
    paragraph_chunker,
    semantic_chunker,
    sentence_chunker,
    token_chunker,
    word_count,
)
from litrag.eval.embedding_cache import CachedEmbedder, CachedEmbedding, EmbeddingCache
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book


@pytest.fixture(scope="module")
def alice(books_dir: Path) -> list[Document]:
    return split_chapters(load_book(books_dir / "pg11_alice_in_wonderland.txt"))


def _texts(parser: RecursiveCharacterNodeParser, text: str) -> list[str]:
    return [text[a:b] for a, b in parser.split_spans(text)]


def test_recursive_matches_langchain_by_hand() -> None:
    """Separators start the next piece, pieces merge up to the size, overlap pops from the left."""
    text = "Aa bb. Cc dd. Ee ff. Gg."
    # pieces on ".": "Aa bb"(5) ". Cc dd"(7) ". Ee ff"(7) ". Gg"(4) "."(1)
    p = RecursiveCharacterNodeParser(chunk_size=14, chunk_overlap=7)
    assert _texts(p, text) == ["Aa bb. Cc dd", ". Cc dd. Ee ff", ". Ee ff. Gg."]
    p = RecursiveCharacterNodeParser(chunk_size=10, chunk_overlap=0)
    assert _texts(p, "Aa bb. Cc dd. Ee.") == ["Aa bb", ". Cc dd", ". Ee."]
    # a piece exactly chunk_size long is split further ("<", as LangChain); merged back whole
    p = RecursiveCharacterNodeParser(chunk_size=20, chunk_overlap=0)
    assert _texts(p, "One two. Three four.\n\nFive six seven.") == [
        "One two. Three four.",
        "Five six seven.",
    ]
    # paragraph breaks first; whitespace stripped from chunk edges, offsets follow
    text = "  Alpha beta gamma.\n\n\n  Delta epsilon.  "
    p = RecursiveCharacterNodeParser(chunk_size=20, chunk_overlap=0)
    assert _texts(p, text) == ["Alpha beta gamma.", "Delta epsilon."]
    assert p.split_spans(text)[0] == (2, 19)
    # no separator left: a long word stays whole
    p = RecursiveCharacterNodeParser(chunk_size=5, chunk_overlap=0, separators=[" "])
    assert _texts(p, "abcdefgh ij") == ["abcdefgh", "ij"]


def test_recursive_paper_configuration() -> None:
    p = BASELINES["recursive 1000/200"]()
    assert isinstance(p, RecursiveCharacterNodeParser)
    assert (p.chunk_size, p.chunk_overlap) == (1000, 200)
    assert tuple(p.separators) == PAPER_SEPARATORS == ("\n\n", "\n", ".", ",", ";", ":", " ")


def test_langchain_parity(alice: list[Document]) -> None:
    import langchain_text_splitters as lc  # the dev extra installs it: this test runs in CI

    theirs = lc.RecursiveCharacterTextSplitter(
        chunk_size=1000, chunk_overlap=200, separators=list(PAPER_SEPARATORS)
    )
    ours = RecursiveCharacterNodeParser()
    for doc in alice:
        assert _texts(ours, doc.text) == theirs.split_text(doc.text)


@pytest.mark.parametrize("name", list(BASELINES))
def test_baselines_cut_exact_slices(name: str, alice: list[Document]) -> None:
    nodes = BASELINES[name]().get_nodes_from_documents(alice)
    docs = {d.id_: d for d in alice}
    assert len(nodes) > len(alice)
    covered: dict[str, set[int]] = {}
    for n in nodes:
        assert isinstance(n, TextNode)
        doc = docs[n.ref_doc_id]
        assert n.start_char_idx is not None and n.end_char_idx is not None
        assert doc.text[n.start_char_idx : n.end_char_idx] == n.text
        assert n.text == n.text.strip() and n.text
        assert n.metadata["book_id"] == "pg11" and "chapter_index" in n.metadata
        assert n.relationships[NodeRelationship.SOURCE].node_id == doc.id_
        covered.setdefault(doc.id_, set()).update(range(n.start_char_idx, n.end_char_idx))
    # nothing but whitespace is lost
    for doc in alice:
        lost = [c for i, c in enumerate(doc.text) if i not in covered[doc.id_]]
        assert "".join(lost).strip() == "", name
    # keys hidden from the embedding stay hidden
    assert "chapter_start_char" in nodes[0].excluded_embed_metadata_keys


def test_token_and_sentence_sizes(alice: list[Document]) -> None:
    tok = get_tokenizer()
    for make, size in ((token_chunker, 200), (sentence_chunker, 256)):
        nodes = make().get_nodes_from_documents(alice)
        sizes = [len(tok(n.text)) for n in nodes]
        # pieces are counted one by one; joined, a boundary can tokenise one token longer
        assert max(sizes) <= size + 2
        assert statistics.median(sizes) > 0.7 * size  # not shrunk by the metadata's tokens
    nodes = token_chunker().get_nodes_from_documents(alice)
    same_doc = [(a, b) for a, b in pairwise(nodes) if a.ref_doc_id == b.ref_doc_id]
    overlapping = sum(b.start_char_idx < a.end_char_idx for a, b in same_doc)
    assert overlapping > 0.9 * len(same_doc)


def test_recursive_sizes(alice: list[Document]) -> None:
    nodes = RecursiveCharacterNodeParser().get_nodes_from_documents(alice)
    assert max(len(n.text) for n in nodes) <= 1000
    assert statistics.median(len(n.text) for n in nodes) > 600


def test_splitter_chunks_must_be_verbatim() -> None:
    class Shouting(TextSplitter):
        def split_text(self, text: str) -> list[str]:
            return [text.upper()]

    parser = TextSplitterNodeParser(splitter=Shouting())
    with pytest.raises(ValueError, match="not found verbatim"):
        parser.get_nodes_from_documents([Document(text="quiet words")])


def _doc(words_per_paragraph: list[int], doc_id: str = "d") -> Document:
    paras = [" ".join(f"w{i}_{k}" for k in range(n)) for i, n in enumerate(words_per_paragraph)]
    return Document(text="\n\n".join(paras), id_=doc_id, metadata={"book_id": "x"})


def test_dynamic_merge_by_hand() -> None:
    doc = _doc([50, 100, 60, 30, 250, 10, 10])
    nodes = dynamic_merge(ParagraphNodeParser()).get_nodes_from_documents([doc])
    assert [word_count(n.get_content()) for n in nodes] == [150, 90, 250, 20]
    assert [n.metadata.get("merged_nodes") for n in nodes] == [2, 2, None, 2]
    for n in nodes:
        assert doc.text[n.start_char_idx : n.end_char_idx] == n.get_content()
    assert nodes[0].relationships[NodeRelationship.NEXT].node_id == nodes[1].node_id
    # exactly at the budget merges; one word over does not
    assert len(paragraph_chunker(max_words=200).get_nodes_from_documents([_doc([100, 100])])) == 1
    assert len(paragraph_chunker(max_words=199).get_nodes_from_documents([_doc([100, 100])])) == 2


def test_dynamic_merge_never_crosses_documents() -> None:
    docs = [_doc([10], "a"), _doc([10], "b"), _doc([10, 10], "c")]
    nodes = paragraph_chunker().get_nodes_from_documents(docs)
    assert [n.ref_doc_id for n in nodes] == ["a", "b", "c"]
    assert [word_count(n.get_content()) for n in nodes] == [10, 10, 20]


def test_dynamic_merge_of_overlapping_chunks_keeps_one_copy() -> None:
    doc = _doc([30] * 6)
    base = RecursiveCharacterNodeParser(chunk_size=400, chunk_overlap=150, separators=[" "])
    parts = base.get_nodes_from_documents([doc])
    merged = DynamicMergeNodeParser(base=base).get_nodes_from_documents([doc])
    assert len(merged) < len(parts)
    for n in merged:
        assert doc.text[n.start_char_idx : n.end_char_idx] == n.get_content()
    assert merged[0].start_char_idx == 0


def test_paragraph_chunker_on_emma(books_dir: Path) -> None:
    docs = split_chapters(load_book(books_dir / "pg158_emma.txt"))
    nodes = paragraph_chunker().get_nodes_from_documents(docs)
    words = [word_count(n.get_content()) for n in nodes]
    assert 150 < statistics.fmean(words) < 185  # the paper setting: 167 over the six books
    for w, n in zip(words, nodes, strict=True):
        assert w <= 200 or "merged_nodes" not in n.metadata  # only a lone paragraph is longer


@pytest.fixture(scope="module")
def minilm():
    from litrag.models.embedders import WindowedEmbedding

    return WindowedEmbedding(embed_batch_size=32)


def test_semantic_splitter_on_a_real_chapter(books_dir: Path, minilm, tmp_path: Path) -> None:
    """Exact offsets, the text covered, and the same cuts as LlamaIndex's own parser."""
    doc = split_chapters(load_book(books_dir / "pg11_alice_in_wonderland.txt"))[0]
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    embedder = CachedEmbedder(cache, "all-MiniLM-L6-v2", lambda: minilm)
    parser = semantic_chunker(CachedEmbedding(embedder))
    assert isinstance(parser, SemanticNodeParser)
    assert parser.splitter.breakpoint_percentile_threshold == 95
    assert parser.splitter.buffer_size == 1
    nodes = parser.get_nodes_from_documents([doc])
    assert 3 <= len(nodes) <= 15  # breakpoints above the 95th percentile of ~150 distances
    pos = 0
    for node in nodes:
        assert isinstance(node, TextNode)
        assert doc.text[node.start_char_idx : node.end_char_idx] == node.text
        assert node.text == node.text.strip() and node.start_char_idx >= pos
        assert doc.text[pos : node.start_char_idx].strip() == ""
        pos = node.end_char_idx
    assert doc.text[pos:].strip() == ""
    assert node.metadata["book_id"] == "pg11"
    # the stock parser (same model, vectors now from the cache) cuts at the same sentences
    computed = embedder.computed
    stock = SemanticSplitterNodeParser.from_defaults(embed_model=CachedEmbedding(embedder))
    theirs = stock.get_nodes_from_documents([doc])
    assert [n.get_content().strip() for n in theirs] == [n.text for n in nodes]
    assert embedder.computed == computed
    cache.close()
