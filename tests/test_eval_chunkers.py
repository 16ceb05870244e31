"""The opt-in chunkers of ``litrag eval retrieval``: the semantic splitter on a real chapter, the
LLM chunkers through the harness (scripted LLM, chunk and reply caches), and the reranked mode
with a tiny randomly initialised Qwen3 reranker saved as a checkpoint folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.node_parser import SemanticSplitterNodeParser
from llama_index.core.schema import TextNode
from scripted_llm import ScriptedLLM

from litrag.chunkers.baselines import SemanticNodeParser, semantic_chunker
from litrag.cli import BUNDLED_BOOK, main
from litrag.eval.retrieval import (
    CachedEmbedder,
    CachedEmbedding,
    ChunkerLLM,
    EmbeddingCache,
    chunker_specs,
    evaluate_retrieval,
    load_books,
    load_questions,
    parse_modes,
    windowed_minilm_embedder,
)
from litrag.ingestion.chapters import split_chapters
from litrag.ingestion.gutenberg import load_book

BOOK = "books/tiny_wild.txt"
QUESTIONS = [
    {
        "id": "mexican",
        "book_file": BOOK,
        "question": "Which dog was the Mexican hairless?",
        "chunk_must_contain": "Ysabel, the Mexican hairless",
    },
    {
        "id": "manuel",
        "book_file": BOOK,
        "question": "What was Manuel's besetting sin?",
        "chunk_must_contain": "Manuel had one besetting sin. He loved to play Chinese lottery.",
    },
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chapter I of the bundled novel as a book, and two questions on it."""
    root = tmp_path_factory.mktemp("evaldata")
    text = load_book(BUNDLED_BOOK).text
    (root / "books").mkdir()
    (root / BOOK).write_text(text[: text.index("Chapter II.")], encoding="utf-8")
    with (root / "questions.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(q) + "\n" for q in QUESTIONS)
    return root


@pytest.fixture(scope="module")
def minilm():
    from litrag.embeddings import WindowedEmbedding

    return WindowedEmbedding(embed_batch_size=32)


def _embedder(cache: EmbeddingCache, model) -> CachedEmbedder:
    return CachedEmbedder(cache, windowed_minilm_embedder(cache).model_key, lambda: model)


# ------------------------------------------------------------------------------ semantic


def test_semantic_splitter_on_a_real_chapter(books_dir: Path, minilm, tmp_path: Path) -> None:
    """Exact offsets, the text covered, and the same cuts as LlamaIndex's own parser."""
    doc = split_chapters(load_book(books_dir / "pg11_alice_in_wonderland.txt"))[0]
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    embedder = _embedder(cache, minilm)
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


def test_semantic_spec_uses_the_harness_embedder(tmp_path: Path, minilm) -> None:
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    embedder = _embedder(cache, minilm)
    (spec,) = chunker_specs(["semantic"], embedder=embedder)
    assert spec.identity == embedder.model_key
    parser = spec.make()
    assert isinstance(parser.splitter.embed_model, CachedEmbedding)
    cache.close()


# ------------------------------------------------------------------------------ LLM chunkers


def litseg_thirds(messages) -> str:
    """A valid LitSeg-Lite reply: the unit in three ranges."""
    n = int(re.search(r"\[Sentences: 1 to (\d+)\]", messages[1].content).group(1))
    a, b = max(n // 3, 1), max(2 * n // 3, 1)
    bounds = [(1, a), (a + 1, b), (b + 1, n)]
    segments = [
        {"subtitle": f"part {i}", "from_idx": x, "to_idx": y, "context_idx": []}
        for i, (x, y) in enumerate(bounds)
        if x <= y
    ]
    return json.dumps({"step1": {}, "step2": {}, "step3": {"segments": segments}})


def lumber_third(messages) -> str:
    ids = re.findall(r"^ID (\d{4}):", messages[1].content, flags=re.M)
    return f"Answer: ID {ids[min(2, len(ids) - 1)]}"


def scripted(messages) -> str:
    """One scripted LLM for both chunkers, told apart by their system prompts."""
    system = messages[0].content or ""
    return lumber_third(messages) if "Answer: ID XXXX" in system else litseg_thirds(messages)


LLM_KEYS = ["litseg-lite", "lumberchunker", "lumberchunker+merge", "litseg-lite+merge"]


def test_llm_chunkers_need_an_llm() -> None:
    for key in [*LLM_KEYS, "litseg"]:
        with pytest.raises(ValueError, match="needs an LLM"):
            chunker_specs([key])


def test_harness_runs_the_llm_chunkers(data: Path, tmp_path: Path, minilm) -> None:
    qs = load_questions(data / "questions.jsonl")
    assert len(qs) == 2
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    llm = ScriptedLLM([scripted] * 400)
    setup = ChunkerLLM(llm, identity="scripted-llm", workers=2, max_retries=1)
    modes = parse_modes(["bm25", "hybrid"], ["rrf"])
    run = evaluate_retrieval(
        qs,
        data,
        LLM_KEYS,
        modes,
        cache_dir=tmp_path,
        embedder=_embedder(cache, minilm),
        intrinsic=False,
        llm=setup,
        say=lambda _m: None,
    )
    calls = len(llm.requests)
    assert calls > 5
    assert run.config["llm"] == "scripted-llm"
    lite, lumber = run.row("litseg-lite"), run.row("lumberchunker")
    assert lite.outcomes == {"valid": lite.chunks}
    assert set(lumber.outcomes) <= {"valid", "last"} and sum(lumber.outcomes.values()) > 5
    for key in LLM_KEYS:
        res = run.row(key)
        assert res.split_spans == 0.0, key
        assert res.modes["bm25"].over_questions["Hit@20"] == 1.0, key
    assert run.row("lumberchunker+merge").chunks < lumber.chunks
    # replies were cached under <cache>/llm; chunks under a folder keyed by the LLM identity
    assert (tmp_path / "llm" / "llm_replies.sqlite").is_file()
    folders = sorted(p.name for p in (tmp_path / "chunks").iterdir())
    assert len(folders) == len(LLM_KEYS)

    # a rerun: every chunking from the chunk cache, not one LLM call
    idle = ScriptedLLM([])
    again = evaluate_retrieval(
        qs,
        data,
        LLM_KEYS,
        modes,
        cache_dir=tmp_path,
        embedder=_embedder(cache, minilm),
        intrinsic=False,
        llm=ChunkerLLM(idle, identity="scripted-llm", workers=2, max_retries=1),
        say=lambda _m: None,
    )
    assert idle.requests == []
    assert again.row("lumberchunker").outcomes == lumber.outcomes
    # another LLM identity is another chunking: it must call its LLM
    other = ScriptedLLM([scripted] * 400)
    evaluate_retrieval(
        qs,
        data,
        ["lumberchunker"],
        modes,
        cache_dir=tmp_path,
        embedder=_embedder(cache, minilm),
        intrinsic=False,
        llm=ChunkerLLM(other, identity="another-llm", max_retries=1),
        say=lambda _m: None,
    )
    assert other.requests
    cache.close()


def test_cli_refuses_an_llm_chunker_without_an_llm(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "eval",
            "retrieval",
            "--questions",
            str(data / "questions.jsonl"),
            "--books",
            str(data),
            "--chunkers",
            "paragraphs,lumberchunker",
            "--cache-dir",
            str(tmp_path),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 2
    assert "'lumberchunker' needs an LLM" in capsys.readouterr().err


# ------------------------------------------------------------------------------ rerank


def tiny_qwen3_reranker(folder: Path) -> Path:
    """A randomly initialised two-layer Qwen3 with a BPE tokenizer trained here, saved."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from litrag.query.rerank import ASSISTANT_SUFFIX, LITERARY_INSTRUCTION, SYSTEM_PREFIX

    questions = [q["question"] for q in QUESTIONS]
    corpus = [SYSTEM_PREFIX + ASSISTANT_SUFFIX, LITERARY_INSTRUCTION, "yes no", *questions]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus * 20, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        clean_up_tokenization_spaces=False,
    )
    tok.add_tokens(["<think>", "</think>"])
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        initializer_range=0.3,
        pad_token_id=tok.pad_token_id,
    )
    Qwen3ForCausalLM(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_rerank_mode_skipped_without_a_reranker(data: Path, tmp_path: Path, minilm) -> None:
    said: list[str] = []
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    run = evaluate_retrieval(
        load_questions(data / "questions.jsonl"),
        data,
        ["paragraphs"],
        parse_modes(["bm25", "hybrid+rerank"], ["rrf"]),
        cache_dir=tmp_path,
        embedder=_embedder(cache, minilm),
        intrinsic=False,
        say=said.append,
    )
    cache.close()
    assert run.config["modes"] == ["bm25"]
    assert any("skipping hybrid-rrf a=0.5+rerank: no reranker" in m for m in said)


def test_cli_reranker_adds_the_reranked_mode(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tiny_qwen3_reranker(tmp_path / "tiny-qwen3-reranker")
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    out = tmp_path / "report"
    rc = main(
        [
            "eval",
            "retrieval",
            "--questions",
            str(data / "questions.jsonl"),
            "--books",
            str(data),
            "--chunkers",
            "paragraphs",
            "--modes",
            "hybrid",
            "--fusion",
            "rrf",
            "--alpha",
            "0.5",
            "--no-intrinsic",
            "--reranker",
            str(folder),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    report = json.loads((out / "retrieval.json").read_text(encoding="utf-8"))
    assert report["config"]["modes"] == ["hybrid-rrf a=0.5", "hybrid-rrf a=0.5+rerank"]
    assert report["config"]["reranker"] == "tiny-qwen3-reranker"
    (row,) = report["chunkers"]
    hybrid, reranked = row["modes"]["hybrid-rrf a=0.5"], row["modes"]["hybrid-rrf a=0.5+rerank"]
    # the reranker reorders the hybrid top 20: what is in it is the same
    assert reranked["over_questions"]["Hit@20"] == hybrid["over_questions"]["Hit@20"]
    assert row["seconds"]["rerank"] > 0
    assert "hybrid-rrf a=0.5+rerank" in (out / "retrieval.md").read_text(encoding="utf-8")


def test_merged_lumber_chunks_respect_the_budget(data: Path) -> None:
    """The '+merge' spec wraps LumberChunker in the 200-word dynamic merge."""
    setup = ChunkerLLM(ScriptedLLM([scripted] * 200), identity="scripted-llm")
    (spec,) = chunker_specs(["lumberchunker+merge"], setup)
    doc = Document(text=(data / BOOK).read_text(encoding="utf-8"), metadata={"book_id": "x"})
    nodes = spec.make().get_nodes_from_documents([doc])
    for node in nodes:
        assert doc.text[node.start_char_idx : node.end_char_idx] == node.get_content()
        if "merged_nodes" in node.metadata:
            assert len(node.get_content().split()) <= 200


def test_perplexity_needs_a_local_model() -> None:
    setup = ChunkerLLM(ScriptedLLM([]), identity="scripted-llm")
    with pytest.raises(ValueError, match="--local-llm"):
        chunker_specs(["perplexity"], setup)
    (spec,) = chunker_specs(["margin+merge"], setup)
    assert spec.slow and "scripted-llm" in spec.identity


def test_max_chapters_keeps_a_sub_corpus(data_dir: Path) -> None:
    qs = [
        q
        for q in load_questions(data_dir / "gutenqa" / "questions.jsonl")
        if "pg11_" in q.book_file
    ]
    (full,), none = load_books(qs, data_dir)
    (first,), dropped = load_books(qs, data_dir, max_chapters=1)
    assert none == [] and len(full.docs) == 12 and len(first.docs) == 1
    assert 0 < len(first.questions) < len(qs) == len(first.questions) + len(dropped)
    assert first.key != full.key  # its own chunk cache
    assert first.docs[0].text == full.docs[0].text
