"""The chunkers of ``litrag eval`` by key: the semantic spec on the harness's embedder, the LLM
chunkers through the harness (scripted LLM, chunk and reply caches keyed by the LLM's identity),
the ``+merge`` variants, and the refusals when an LLM chunker has no LLM."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from llama_index.core import Document
from scripted_llm import ScriptedLLM
from test_eval_retrieval import write_eval_data

from litrag.cli import main
from litrag.eval.embedding_cache import (
    CachedEmbedder,
    CachedEmbedding,
    EmbeddingCache,
    windowed_minilm_embedder,
)
from litrag.eval.questions import load_questions
from litrag.eval.registry import ChunkerLLM, chunker_specs
from litrag.eval.retrieval import evaluate_retrieval, parse_modes

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
    return write_eval_data(tmp_path_factory.mktemp("evaldata"), QUESTIONS)


@pytest.fixture(scope="module")
def minilm():
    from litrag.models.embedders import WindowedEmbedding

    return WindowedEmbedding(embed_batch_size=32)


def _embedder(cache: EmbeddingCache, model) -> CachedEmbedder:
    return CachedEmbedder(cache, windowed_minilm_embedder(cache).model_key, lambda: model)


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
    modes = parse_modes(["bm25", "hybrid"], [0.5])
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


def test_sized_variants_change_only_the_size() -> None:
    """`litseg-offline@200` and `paragraphs@120` are the same chunkers with another size; the
    sized LitSeg blocks come out shorter than the default's on a real chapter."""
    from litrag.chunkers.baselines import word_count
    from litrag.cli import BUNDLED_BOOK
    from litrag.eval.registry import is_ours
    from litrag.ingestion.gutenberg import load_book

    small, default, paras = chunker_specs(
        ["litseg-offline@200", "litseg-offline", "paragraphs@120"]
    )
    parser = small.make()
    assert (parser.target_words, parser.min_words, parser.max_words) == (200, 80, 400)
    assert paras.label == "paragraphs ≤120w" and paras.make().max_words == 120
    assert is_ours("litseg-offline@200") and not is_ours("paragraphs@120")
    text = load_book(BUNDLED_BOOK).text
    doc = Document(text=text[: text.index("Chapter II.")])

    def mean_words(spec) -> float:
        nodes = spec.make().get_nodes_from_documents([doc])
        return sum(word_count(n.get_content()) for n in nodes) / len(nodes)

    assert mean_words(small) < mean_words(default)
    for bad in ("litseg-offline@", "litseg-offline@x", "token@200", "paragraphs@0"):
        with pytest.raises(ValueError, match="sized variant"):
            chunker_specs([bad])
