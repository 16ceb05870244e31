"""LitSegNodeParser (offline) over the six real books: coverage, size cap, exact offsets, views."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core import Document
from llama_index.core.ingestion import DocstoreStrategy, IngestionCache, IngestionPipeline
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import MetadataMode, NodeRelationship
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.utils import get_tokenizer

from litrag import LitSegNodeParser
from litrag.chunkers.lumberchunker import LumberChunkerNodeParser
from litrag.chunkers.margin import MarginSamplingNodeParser
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book
from litrag.segment import LLMNodeParser
from litrag.segment.llm_calls import llm_identity
from litrag.segment.sentences import split_sentences

BOOKS = [
    "pg11_alice_in_wonderland.txt",
    "pg84_frankenstein.txt",
    "pg158_emma.txt",
    "pg215_call_of_the_wild.txt",
    "pg1342_pride_and_prejudice.txt",
    "pg1661_adventures_of_sherlock_holmes.txt",
]
CAP = 512


@pytest.fixture(scope="module")
def parsed(books_dir):
    parser = LitSegNodeParser(max_block_tokens=CAP)
    out = {}
    for name in BOOKS:
        docs = split_chapters(load_book(books_dir / name))
        out[name] = (docs, parser.get_nodes_from_documents(docs))
    return parser, out


def test_defaults_are_offline_and_a_node_parser():
    parser = LitSegNodeParser()
    assert isinstance(parser, NodeParser)
    assert parser.segmenter == "offline" and parser.llm is None
    assert LitSegNodeParser.class_name() == "LitSegNodeParser"
    assert LitSegNodeParser.from_defaults(max_words=500).max_words == 500
    with pytest.raises(ValueError, match="needs an llm"):
        LitSegNodeParser(segmenter="litseg-lite")


@pytest.mark.parametrize("name", BOOKS)
def test_every_sentence_is_covered(parsed, name):
    docs, nodes = parsed[1][name]
    by_doc: dict[str, set[int]] = {}
    for node in nodes:
        m = node.metadata
        by_doc.setdefault(node.ref_doc_id, set()).update(
            range(m["sentence_from"], m["sentence_to"] + 1)
        )
    for doc in docs:
        n = len(split_sentences(doc.text))
        if n:
            assert by_doc[doc.doc_id] == set(range(1, n + 1)), doc.metadata["chapter_title"]


@pytest.mark.parametrize("name", BOOKS)
def test_offsets_slice_the_source_exactly(parsed, name):
    docs, nodes = parsed[1][name]
    text = {d.doc_id: d.text for d in docs}
    for node in nodes:
        assert text[node.ref_doc_id][node.start_char_idx : node.end_char_idx] == node.text


@pytest.mark.parametrize("name", BOOKS)
def test_no_block_exceeds_the_cap(parsed, name):
    tokenizer = get_tokenizer()
    _, nodes = parsed[1][name]
    for node in nodes:
        embed = node.get_content(metadata_mode=MetadataMode.EMBED)
        assert len(tokenizer(embed)) <= CAP, node.metadata["subtitle"]


@pytest.mark.quick
def test_a_real_chapter_cut_into_blocks(books_dir):
    """The quick tier's parser check: chapter I of The Call of the Wild, whole, through the
    default parser: blocks in order that tile the chapter exactly, each within the cap and
    subtitled, none the whole chapter."""
    (chapter, *_rest) = split_chapters(load_book(books_dir / "pg215_call_of_the_wild.txt"))
    parser = LitSegNodeParser(max_block_tokens=CAP)
    nodes = parser.get_nodes_from_documents([chapter])
    assert 5 < len(nodes) < 60
    assert " ".join(n.text for n in nodes).split() == chapter.text.split()
    for node in nodes:
        assert chapter.text[node.start_char_idx : node.end_char_idx] == node.text
        assert node.metadata["subtitle"] and node.metadata["segmentation_outcome"] == "offline"
    assert [n.start_char_idx for n in nodes] == sorted(n.start_char_idx for n in nodes)
    assert parser.summary.blocks == len(nodes) and parser.summary.llm_calls == 0


def test_metadata_and_views(parsed):
    parser, books = parsed
    _docs, nodes = books["pg215_call_of_the_wild.txt"]
    node = nodes[3]
    m = node.metadata
    assert m["book_id"] == "pg215" and m["chapter_index"] == 1
    assert m["segmenter"] == "offline" and m["segmentation_outcome"] == "offline"
    assert m["subtitle"] and m["unit_index"] == 1
    embed = node.get_content(metadata_mode=MetadataMode.EMBED)
    llm = node.get_content(metadata_mode=MetadataMode.LLM)
    assert f"subtitle: {m['subtitle']}" in embed and f"subtitle: {m['subtitle']}" in llm
    for key in ("sentence_from", "segmentation_outcome", "chapter_start_char"):
        assert key not in embed and key not in llm
    assert node.get_content(metadata_mode=MetadataMode.NONE) == node.text
    # prev/next within a chapter, none across chapters
    assert nodes[2].node_id == node.relationships[NodeRelationship.PREVIOUS].node_id
    first_of_ch2 = next(x for x in nodes if x.metadata["chapter_index"] == 2)
    assert NodeRelationship.PREVIOUS not in first_of_ch2.relationships
    s = parser.summary
    assert s.units == sum(len(d) for d, _ in books.values())
    assert s.blocks == sum(len(n) for _, n in books.values())
    assert s.offline == s.parts and s.llm_calls == 0


SHARED = ("llm", "llm_identity", "request_timeout", "num_workers", "cache_dir")
LLM_PARSERS = (LitSegNodeParser, LumberChunkerNodeParser, MarginSamplingNodeParser)


def test_llm_parsers_share_one_base_and_round_trip(tmp_path):
    from scripted_llm import ScriptedLLM

    for cls in LLM_PARSERS:
        assert issubclass(cls, LLMNodeParser) and issubclass(cls, NodeParser)
        own = vars(cls).get("__annotations__", {})
        for name in SHARED:  # declared once, on the base, and inherited as declared
            assert name not in own, (cls.__name__, name)
            assert repr(cls.model_fields[name]) == repr(LLMNodeParser.model_fields[name])
            assert LLMNodeParser.model_fields[name].description
    assert LLMNodeParser.class_name() == "LLMNodeParser"
    with pytest.raises(ValueError, match="LumberChunkerNodeParser needs an llm"):
        LumberChunkerNodeParser()
    llm = ScriptedLLM([])
    parsers = [
        LitSegNodeParser(max_words=500, cache_dir=tmp_path, extra_body={"x": [1]}, num_workers=2),
        LitSegNodeParser(llm=llm, segmenter="litseg", llm_identity="stable-name"),
        LumberChunkerNodeParser(llm=llm, unit="sentence", cache_dir=tmp_path),
        MarginSamplingNodeParser(llm=llm, history=3, request_timeout=5.0),
    ]
    for parser in parsers:
        data = parser.to_dict()
        assert data["class_name"] == parser.class_name() and "llm" not in data
        assert data["cache_dir"] in (None, str(tmp_path))  # a Path is stored as a str
        again = type(parser).from_dict(data, llm=parser.llm)
        assert again.to_dict() == data and list(again.to_dict()) == list(data)
        assert again.llm_identity == parser.llm_identity
    assert parsers[1].llm_identity == "stable-name"
    assert parsers[2].llm_identity == llm_identity(llm) == parsers[3].llm_identity
    # IngestionCache keys hash str(to_dict()): the key order predates the base and stays
    own_keys = {
        LitSegNodeParser: "segmenter llm_identity prompt_version prompt_variant max_unit_words "
        "max_retries retry_feedback temperature top_p top_k json_mode max_output_tokens "
        "extra_body request_timeout num_workers cache_dir max_block_tokens target_words "
        "min_words max_words cohesion_window",
        LumberChunkerNodeParser: "llm_identity prompt_version unit window_words max_retries "
        "fallback temperature max_output_tokens extra_body request_timeout num_workers cache_dir",
        MarginSamplingNodeParser: "llm_identity history max_left_words top_logprobs "
        "request_timeout num_workers cache_dir",
    }
    for parser in parsers:
        keys = list(parser.to_dict())
        assert keys[: len(NodeParser.model_fields) - 1] == [
            k for k in NodeParser.model_fields if k != "callback_manager"
        ]
        ours = [k for k in keys if k not in NodeParser.model_fields]
        assert ours == [*own_keys[type(parser)].split(), "class_name"]


def test_repeated_passages_get_their_own_offsets():
    para = "The bell rang twice in the empty hall, and nobody came to answer it. " * 6
    other = "Far off a dog barked at the moon, and the wind turned cold. " * 6
    text = "\n\n".join([para, other, para, other])
    doc = Document(text=text)
    nodes = LitSegNodeParser(target_words=60, min_words=20, max_words=80).get_nodes_from_documents(
        [doc]
    )
    assert len(nodes) >= 4
    for node in nodes:
        assert text[node.start_char_idx : node.end_char_idx] == node.text
    starts = [n.start_char_idx for n in nodes]
    assert starts == sorted(set(starts))


def test_cap_follows_the_given_tokenizer():
    doc = Document(text="\n\n".join(["One two three four five six seven eight."] * 40))
    parser = LitSegNodeParser(tokenizer=str.split, max_block_tokens=40)
    for node in parser.get_nodes_from_documents([doc]):
        assert len(node.get_content(metadata_mode=MetadataMode.EMBED).split()) <= 40


def test_pickles_for_the_worker_processes_of_an_ingestion_pipeline():
    # IngestionPipeline.run(num_workers=N) pickles its transformations into spawned processes.
    # LlamaIndex's default tokenizer pickles as a tiktoken encoding, which a worker then fetches
    # from the network (offline: the worker dies and the pool waits forever); the word vectors
    # are a cache. Neither travels: the worker's parser rebuilds them.
    parser = LitSegNodeParser(max_words=500)
    parser.get_nodes_from_documents([Document(text="A dog ran. It barked. " * 20)])
    blob = pickle.dumps(parser)
    assert b"tiktoken" not in blob and b"wordllama" not in blob and len(blob) < 100_000
    assert parser._vectors is not None  # the parser pickled keeps its own cache
    again = pickle.loads(blob)
    assert again.to_dict() == parser.to_dict() and again.max_words == 500
    assert again._tokenizer is get_tokenizer()
    # a tokenizer of the caller's travels, so a worker caps blocks as the parser it came from
    doc = Document(text="\n\n".join(["One two three four five six seven eight."] * 40))
    custom = LitSegNodeParser(tokenizer=str.split, max_block_tokens=40)
    copied = pickle.loads(pickle.dumps(custom))
    assert copied._tokenizer is str.split
    assert [n.text for n in copied.get_nodes_from_documents([doc])] == [
        n.text for n in custom.get_nodes_from_documents([doc])
    ]


def test_in_a_stock_ingestion_pipeline(books_dir):
    docs = split_chapters(load_book(books_dir / "pg11_alice_in_wonderland.txt"))[:3]
    cache, store = IngestionCache(), SimpleDocumentStore()
    parser = LitSegNodeParser()
    first = IngestionPipeline(
        transformations=[parser],
        cache=cache,
        docstore=store,
        docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,
    ).run(documents=docs)
    assert first and store.get_all_document_hashes()
    again = IngestionPipeline(transformations=[parser], cache=cache).run(documents=docs)
    assert [(n.text, n.start_char_idx) for n in again] == [
        (n.text, n.start_char_idx) for n in first
    ]
    assert parser.summary.units == 3  # the second run came from the cache


words = st.sampled_from(
    [
        "the",
        "a",
        "he",
        "she",
        "it",
        "they",
        "Alice",
        "Buck",
        "ran",
        "saw",
        "said",
        "cold",
        "night",
        "river",
        "house",
        "dog",
        "letter",
    ]
)
sentence = st.lists(words, min_size=2, max_size=25).map(lambda w: " ".join(w).capitalize() + ".")
paragraph = st.lists(sentence, min_size=1, max_size=8).map(" ".join)
document = st.lists(paragraph, min_size=1, max_size=30).map("\n\n".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=document, cap=st.integers(min_value=40, max_value=300))
def test_properties_on_generated_text(text, cap):
    parser = LitSegNodeParser(
        max_block_tokens=cap, tokenizer=str.split, target_words=60, min_words=20, max_words=120
    )
    nodes = parser.get_nodes_from_documents([Document(text=text)])
    n = len(split_sentences(text))
    covered = set()
    for node in nodes:
        assert text[node.start_char_idx : node.end_char_idx] == node.text
        covered.update(range(node.metadata["sentence_from"], node.metadata["sentence_to"] + 1))
        one_sentence = node.metadata["sentence_from"] == node.metadata["sentence_to"]
        size = len(node.get_content(metadata_mode=MetadataMode.EMBED).split())
        assert size <= cap or one_sentence
    assert covered == set(range(1, n + 1))
