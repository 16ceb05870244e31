"""llama-index-node-parser-litseg in stock LlamaIndex, on a real novel, offline (no LLM).

The book is The Call of the Wild as litrag installs it (``litrag/data``), cut into its seven
chapters here the way any LlamaIndex app would hand a book over: one ``Document`` per chapter.
"""

from __future__ import annotations

import re
import threading
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document, MockEmbedding, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.ingestion import IngestionCache, IngestionPipeline
from llama_index.core.ingestion.pipeline import get_transformation_hash
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode
from llama_index.node_parser.litseg import LitSegNodeParser

BOOK = "pg215_call_of_the_wild.txt"
CHAPTER = re.compile(r"^Chapter ([IVX]+)\. (.+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def chapters() -> list[Document]:
    """The seven chapters of the installed book, Gutenberg header and licence left out."""
    text = (files("litrag") / "data" / BOOK).read_text(encoding="utf-8")
    body = text[text.index("*** START OF") : text.index("*** END OF")]
    heads = list(CHAPTER.finditer(body))
    docs = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
        docs.append(
            Document(
                text=body[head.end() : end].strip(),
                metadata={"book": "The Call of the Wild", "chapter": head.group(1)},
                id_=f"pg215-{i + 1}",
            )
        )
    assert len(docs) == 7, [h.group(0) for h in heads]
    return docs


class WordVectors(BaseEmbedding):
    """Static word vectors (WordLlama, which litrag's base install brings with its weights):
    a real embedding that needs neither torch nor the network."""

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        import wordllama
        from wordllama import WordLlama

        model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        return [[float(x) for x in row] for row in model.embed(texts, norm=True)]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vectors([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._vectors(texts)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vectors([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def spans(nodes: list[BaseNode]) -> list[tuple]:
    return [
        (n.ref_doc_id, n.start_char_idx, n.end_char_idx, n.text, n.metadata["subtitle"])
        for n in nodes
    ]


def within(seconds: float, call: Any) -> Any:
    """``call()``, or a failure after ``seconds``: a process pool whose workers die while
    unpickling their task replaces them forever, so a broken parser hangs rather than fails."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"no result in {seconds} s: the pipeline's worker processes never answered")
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_the_import_is_litrags_parser():
    import llama_index.node_parser.litseg as package

    import litrag

    assert LitSegNodeParser is litrag.LitSegNodeParser  # re-exported, not a copy
    assert package.__all__ == ["LitSegNodeParser"]
    assert issubclass(LitSegNodeParser, NodeParser)
    parser = LitSegNodeParser()
    assert parser.segmenter == "offline" and parser.llm is None
    assert LitSegNodeParser.class_name() == "LitSegNodeParser"


def test_blocks_are_exact_slices_of_each_chapter(chapters):
    docs = chapters[:2]
    nodes = LitSegNodeParser().get_nodes_from_documents(docs)
    by_id = {d.doc_id: d for d in docs}
    assert {n.ref_doc_id for n in nodes} == set(by_id)
    assert len(nodes) >= 2 * len(docs)  # a chapter of thousands of words is several blocks
    for node in nodes:
        source = by_id[node.ref_doc_id].text
        assert node.text and source[node.start_char_idx : node.end_char_idx] == node.text
        assert node.metadata["subtitle"] and node.metadata["segmenter"] == "offline"
        assert node.metadata["chapter"] == by_id[node.ref_doc_id].metadata["chapter"]


def test_round_trips_through_dict_and_json(chapters):
    parser = LitSegNodeParser(target_words=250, min_words=100, max_words=500, max_block_tokens=400)
    data = parser.to_dict()
    assert data["class_name"] == "LitSegNodeParser" and data["target_words"] == 250
    again = LitSegNodeParser.from_dict(data)
    assert again.to_dict() == data and again.max_block_tokens == 400
    text = parser.to_json()
    from_json = LitSegNodeParser.from_json(text)
    assert from_json.to_json() == text and from_json.to_dict() == data
    docs = chapters[:1]
    expected = spans(parser.get_nodes_from_documents(docs))
    assert spans(again.get_nodes_from_documents(docs)) == expected
    assert spans(from_json.get_nodes_from_documents(docs)) == expected


def test_the_ingestion_cache_key_is_stable(chapters):
    docs = chapters[:1]
    key = get_transformation_hash(docs, LitSegNodeParser(max_words=500))
    assert key == get_transformation_hash(docs, LitSegNodeParser(max_words=500))
    rebuilt = LitSegNodeParser.from_dict(LitSegNodeParser(max_words=500).to_dict())
    assert key == get_transformation_hash(docs, rebuilt)
    assert key != get_transformation_hash(docs, LitSegNodeParser(max_words=501))
    smaller = LitSegNodeParser(max_block_tokens=256, max_words=500)
    assert key != get_transformation_hash(docs, smaller)

    # a second pipeline with an equal parser (another instance) is answered from the cache
    cache = IngestionCache()
    first = IngestionPipeline(transformations=[LitSegNodeParser()], cache=cache).run(documents=docs)
    equal = LitSegNodeParser()
    again = IngestionPipeline(transformations=[equal], cache=cache).run(documents=docs)
    assert spans(again) == spans(first) and equal.summary.units == 0  # nothing re-segmented
    changed = LitSegNodeParser(target_words=200)
    IngestionPipeline(transformations=[changed], cache=cache).run(documents=docs)
    assert changed.summary.units == 1  # a changed setting misses the cache


def test_in_a_vector_store_index(chapters):
    parser, embed = LitSegNodeParser(), WordVectors()
    index = VectorStoreIndex.from_documents(
        chapters[:2], transformations=[parser, embed], embed_model=embed
    )
    stored = list(index.docstore.docs.values())
    assert spans(sorted(stored, key=lambda n: (n.ref_doc_id, n.start_char_idx))) == spans(
        parser.get_nodes_from_documents(chapters[:2])
    )
    retriever = index.as_retriever(similarity_top_k=1)
    for question, chapter, name in [
        ("Manuel the gardener sold Buck to a stranger to pay his gambling debts", "I", "Manuel"),
        ("Curly is killed by the huskies", "II", "Curly"),
    ]:
        (hit,) = retriever.retrieve(question)
        assert hit.node.metadata["chapter"] == chapter and name in hit.node.text, question


def test_in_an_ingestion_pipeline_with_workers(chapters):
    # MockEmbedding only fills the embedding step: the parser is what is under test here.
    embed = MockEmbedding(embed_dim=8)
    pipeline = IngestionPipeline(transformations=[LitSegNodeParser(), embed])
    nodes = within(240, lambda: pipeline.run(documents=chapters, num_workers=2))
    serial = IngestionPipeline(transformations=[LitSegNodeParser(), embed]).run(documents=chapters)
    assert spans(nodes) == spans(serial)  # two processes cut the same blocks as one
    assert {n.metadata["chapter"] for n in nodes} == {"I", "II", "III", "IV", "V", "VI", "VII"}
    assert all(n.embedding is not None and len(n.embedding) == 8 for n in nodes)
    for doc in chapters:  # the blocks of each chapter cover all its words (not "*  *  *" breaks)
        covered = bytearray(len(doc.text))
        for node in nodes:
            if node.ref_doc_id == doc.doc_id:
                covered[node.start_char_idx : node.end_char_idx] = b"\1" * len(node.text)
        assert all(covered[i] or not c.isalnum() for i, c in enumerate(doc.text)), doc.doc_id
