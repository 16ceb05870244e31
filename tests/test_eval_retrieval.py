"""The retrieval harness end to end on chapter I of The Call of the Wild (bundled).

Real chunkers, the real packaged MiniLM and a real Qdrant Edge store; three questions whose gold
spans are verbatim (line-wrapped) passages of those chapters. The reranked mode runs a tiny
randomly initialised Qwen3 reranker saved as a checkpoint folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode

from litrag.cli import BUNDLED_BOOK, main
from litrag.eval.embedding_cache import CachedEmbedder, EmbeddingCache, windowed_minilm_embedder
from litrag.eval.intrinsic import boundary_pairs, boundary_similarity, pair_cosines
from litrag.eval.metrics import rank_order
from litrag.eval.questions import load_books, load_questions
from litrag.eval.registry import CHUNKERS, chunk_book, chunker_specs
from litrag.eval.retrieval import evaluate_retrieval, parse_modes
from litrag.eval.spans import normalize
from litrag.ingestion.gutenberg import load_book
from litrag.scoring.bm25 import BM25Index

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
    {
        "id": "elmo",
        "book_file": BOOK,
        "question": "What kind of dog was Buck's father?",
        "chunk_must_contain": "His father, Elmo, a huge St. Bernard",
    },
    {"id": "nospan", "book_file": BOOK, "question": "Unscorable?", "chunk_must_contain": None},
]


def write_eval_data(root: Path, questions: list[dict]) -> Path:
    """A data folder: chapter I of the bundled novel as a plain book, and ``questions``."""
    text = load_book(BUNDLED_BOOK).text
    (root / "books").mkdir()
    (root / BOOK).write_text(text[: text.index("Chapter II.")], encoding="utf-8")
    with (root / "questions.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(q) + "\n" for q in questions)
    return root


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_eval_data(tmp_path_factory.mktemp("evaldata"), QUESTIONS)


@pytest.fixture(scope="module")
def model():
    from litrag.models.embedders import WindowedEmbedding

    return WindowedEmbedding(embed_batch_size=32)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("evalcache")


def _embedder(cache: EmbeddingCache, model) -> CachedEmbedder:
    """The CLI's embedder (same cache key), sharing the module's loaded model."""
    return CachedEmbedder(cache, windowed_minilm_embedder(cache).model_key, lambda: model)


def test_questions_and_modes(data: Path) -> None:
    qs = load_questions(data / "questions.jsonl")
    assert [q.id for q in qs] == ["mexican", "manuel", "elmo"]  # the null span is skipped
    assert qs[0].spans == ("Ysabel, the Mexican hairless",)
    names = [m.name for m in parse_modes(["dense", "bm25", "hybrid"], [0.3, 0.5])]
    assert names == ["dense", "bm25", "hybrid-rsf a=0.3", "hybrid-rsf a=0.5"]
    with pytest.raises(ValueError, match="needs an LLM"):
        chunker_specs(["lumberchunker"])
    with pytest.raises(ValueError, match="unknown chunker"):
        chunker_specs(["nope"])


def test_harness_bm25_hit_and_cache(data: Path, cache_dir: Path, model) -> None:
    qs = load_questions(data / "questions.jsonl")
    modes = parse_modes(["dense", "bm25", "hybrid"], [0.3, 0.5])
    keys = ["paragraphs", "litseg-offline"]
    cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
    first = _embedder(cache, model)
    run = evaluate_retrieval(qs, data, keys, modes, cache_dir=cache_dir, embedder=first)
    assert run.questions == 3 and run.dropped == []
    assert first.computed > 0 and run.embeddings_computed == first.computed
    assert run.row("paragraphs").intrinsic["boundaries"] == run.row("paragraphs").chunks - 1
    for key in keys:
        res = run.row(key)
        assert res.split_spans == 0.0  # every span sits whole in some chunk
        bm25 = {s.question_id: s.rank for s in res.scores["bm25"]}
        assert bm25["mexican"] == 1, key  # "Mexican hairless" is in exactly one chunk
        assert res.modes["bm25"].over_questions["Hit@20"] == 1.0
        assert set(res.modes) == {m.name for m in modes}

    # The second run: chunks from the chunk cache, every vector from the embedding cache.
    second = _embedder(cache, model)
    again = evaluate_retrieval(qs, data, keys, modes, cache_dir=cache_dir, embedder=second)
    assert second.computed == 0 and again.embeddings_computed == 0
    assert again.embeddings_cached == first.computed + first.cached
    for key in keys:
        assert all(b["chunk_cached"] == 1.0 for b in again.row(key).seconds_per_book.values())
        assert again.row(key).intrinsic == run.row(key).intrinsic
        for mode in run.row(key).scores:
            ranks = [s.rank for s in run.row(key).scores[mode]]
            assert ranks == [s.rank for s in again.row(key).scores[mode]]
    cache.close()


def test_edge_bm25_matches_in_memory_bm25(data: Path, cache_dir: Path, model) -> None:
    """Edge's per-book BM25 (IDF over the book filter) ranks as the reference BM25Index does."""
    qs = load_questions(data / "questions.jsonl")
    books, _ = load_books(qs, data)
    cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
    run = evaluate_retrieval(
        qs,
        data,
        ["paragraphs"],
        parse_modes(["bm25"]),
        cache_dir=cache_dir,
        embedder=_embedder(cache, model),
        intrinsic=False,
    )
    cache.close()
    nodes, cached = chunk_book(CHUNKERS["paragraphs"], books[0].docs, books[0].key, cache_dir)
    assert cached
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    plain = [normalize(n.get_content(metadata_mode=MetadataMode.NONE)) for n in nodes]
    index = BM25Index(texts)
    for q, score in zip(qs, run.row("paragraphs").scores["bm25"], strict=True):
        order = rank_order(index.scores(q.question))
        relevant = [normalize(q.spans[0]) in plain[i] for i in order]
        assert score.rank == relevant.index(True) + 1, q.id


def test_aligned_key_reuses_the_paragraph_run_and_ranks_no_lower(
    data: Path, cache_dir: Path, model
) -> None:
    """``litseg-offline>aligned`` stores the paragraph run's very chunks (no new embedding) and
    scores the blocks snapped to them: in every mode each question's gold block ranks no lower
    than its gold paragraph."""
    qs = load_questions(data / "questions.jsonl")
    modes = parse_modes(["dense", "bm25", "hybrid"], [0.3])
    cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
    first = _embedder(cache, model)
    paragraphs = evaluate_retrieval(
        qs, data, ["paragraphs"], modes, cache_dir=cache_dir, embedder=first
    )
    second = _embedder(cache, model)
    run = evaluate_retrieval(
        qs, data, ["litseg-offline>aligned"], modes, cache_dir=cache_dir, embedder=second
    )
    cache.close()
    assert second.computed == 0  # children and questions: all from the paragraph run's cache
    aligned, par = run.row("litseg-offline>aligned"), paragraphs.row("paragraphs")
    assert aligned.label == "LitSeg offline aligned to paragraph children"
    assert aligned.split_spans == 0.0
    for mode in aligned.scores:
        ranks = {s.question_id: s.rank for s in par.scores[mode]}
        for s in aligned.scores[mode]:
            assert s.rank is not None and s.rank <= (ranks[s.question_id] or 10**9), (mode, s)


def _node(text: str, doc: str) -> TextNode:
    return TextNode(
        text=text, relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)}
    )


def test_intrinsic_boundary_cosine_hand_case() -> None:
    nodes = [
        _node("The dog ran home. It was late at night.", "ch1"),
        _node("Morning came slowly. The sun rose over the hills.", "ch1"),
        _node("Nobody spoke.", "ch1"),
        _node("A new chapter begins here.", "ch2"),  # no boundary across chapters
    ]
    pairs = boundary_pairs(nodes)
    assert pairs == [
        ("It was late at night.", "Morning came slowly."),
        ("The sun rose over the hills.", "Nobody spoke."),
    ]
    vec = {
        "It was late at night.": [1.0, 0.0],
        "Morning came slowly.": [1.0, 1.0],  # cos 1/sqrt(2)
        "The sun rose over the hills.": [0.0, 2.0],
        "Nobody spoke.": [0.0, -1.0],  # cos -1
    }

    class Fake:
        model_key = "hand-made 2-d"

        def embed(self, texts):
            return np.asarray([vec[t] for t in texts])

    assert pair_cosines(pairs, Fake().embed) == pytest.approx([2**-0.5, -1.0])
    stats = boundary_similarity(nodes, Fake())
    assert stats.boundaries == 2
    assert stats.mean_cosine == pytest.approx((2**-0.5 - 1.0) / 2)
    assert stats.model == "hand-made 2-d"


def test_cli_end_to_end(
    data: Path, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
            "bm25,hybrid",
            "--cache-dir",
            str(cache_dir),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    md = (out / "retrieval.md").read_text(encoding="utf-8")
    assert "| paragraphs ≤200w | bm25 |" in md and "hybrid-rsf a=0.5" in md
    assert "Intrinsic boundary metric" in md
    per_book = md.split("Seconds per book")[1].split("###")[0]
    assert "| chunker | tiny |" in per_book and "| paragraphs ≤200w | " in per_book
    report = json.loads((out / "retrieval.json").read_text(encoding="utf-8"))
    assert report["questions"] == 3
    (row,) = report["chunkers"]
    assert row["modes"]["bm25"]["over_questions"]["Hit@20"] == 1.0
    assert row["intrinsic"]["boundaries"] > 0


def test_cli_report_sections(
    data: Path, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--report FILE.md` keeps one section per `--section`: a rerun replaces only its own."""
    monkeypatch.setenv("LITRAG_HOME", str(tmp_path / "home"))
    report = tmp_path / "docs" / "results.md"
    base = ["eval", "retrieval", "--questions", str(data / "questions.jsonl")]
    base += ["--books", str(data), "--cache-dir", str(cache_dir), "--no-intrinsic"]
    base += ["--report", str(report)]
    assert main([*base, "--chunkers", "paragraphs", "--modes", "bm25"]) == 0
    assert main([*base, "--chunkers", "token", "--modes", "bm25", "--section", "tokens"]) == 0
    assert main([*base, "--chunkers", "paragraphs", "--modes", "dense"]) == 0
    md = report.read_text(encoding="utf-8")
    assert md.startswith("# litrag results")
    assert md.count("<!-- section default -->") == 1 and md.count("<!-- section tokens -->") == 1
    default = md.split("<!-- section default -->")[1].split("<!-- /section default -->")[0]
    assert "| paragraphs ≤200w | dense |" in default and "| bm25 |" not in default  # replaced
    assert "--modes dense" in default and "## Retrieval evaluation: default" in default
    assert "### MRR" in default and "\n# " not in default  # headings one level down
    assert "| token 200/40 | bm25 |" in md.split("<!-- section tokens -->")[1]
    assert "(results-default.png)" in default
    for name in ("results-default.json", "results-tokens.json", "results-default.png"):
        assert (report.parent / name).exists(), name
    assert main([*base, "--section", "bad name"]) == 2


# ------------------------------------------------------------------------------ rerank


def tiny_qwen3_reranker(folder: Path) -> Path:
    """A randomly initialised two-layer Qwen3 with a BPE tokenizer trained here, saved."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from litrag.models.qwen3_rerank import ASSISTANT_SUFFIX, LITERARY_INSTRUCTION, SYSTEM_PREFIX

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


def test_rerank_mode_skipped_without_a_reranker(data: Path, tmp_path: Path, model) -> None:
    said: list[str] = []
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    run = evaluate_retrieval(
        load_questions(data / "questions.jsonl"),
        data,
        ["paragraphs"],
        parse_modes(["bm25", "hybrid+rerank"], [0.5]),
        cache_dir=tmp_path,
        embedder=_embedder(cache, model),
        intrinsic=False,
        say=said.append,
    )
    cache.close()
    assert run.config["modes"] == ["bm25"]
    assert any("skipping hybrid-rsf a=0.5+rerank: no reranker" in m for m in said)


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
    assert report["config"]["modes"] == ["hybrid-rsf a=0.5", "hybrid-rsf a=0.5+rerank"]
    assert report["config"]["reranker"] == "tiny-qwen3-reranker"
    (row,) = report["chunkers"]
    hybrid, reranked = row["modes"]["hybrid-rsf a=0.5"], row["modes"]["hybrid-rsf a=0.5+rerank"]
    # the reranker reorders the hybrid top 20: what is in it is the same
    assert reranked["over_questions"]["Hit@20"] == hybrid["over_questions"]["Hit@20"]
    assert row["seconds"]["rerank"] > 0
    assert "hybrid-rsf a=0.5+rerank" in (out / "retrieval.md").read_text(encoding="utf-8")
