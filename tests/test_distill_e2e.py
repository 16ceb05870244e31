"""The distillation kit end to end on a CPU, offline: teacher data from a real local LLM, LoRA
SFT and GRPO (both rewards; the judge is the same real LLM) of a tiny random Qwen3 built here,
merge, reload, and the student segmenting a chapter through ``LitSegNodeParser``.

The packaged SmolLM2 tests plumbing, not quality: it rarely passes the teacher's validation, so
the run keeps every unit (``strict = false``) to have something to train on; the strict
default's accounting is checked on the same replies, from the cache. The tiny student writes
garbage: the parser's fallback must engage cleanly.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from litrag.distill.annotate import annotate, read_records, split_books
from litrag.distill.config import DistillConfig
from litrag.models.llama_server import openai_like

pytestmark = pytest.mark.llm

BOOK = "pg1342_pride_and_prejudice.txt"  # chapter 1 (~800 words) annotated, 2 segmented


def tiny_qwen3(folder: Path, texts: list[str]) -> Path:
    """A random Qwen3ForCausalLM (hidden 64, 2 layers) with a byte-level BPE tokenizer trained
    on ``texts`` and TRL's Qwen3 chat template."""
    import trl
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=1024,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    template = Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja"
    fast.chat_template = template.read_text(encoding="utf-8")
    config = Qwen3Config(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    import torch

    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(str(folder))
    fast.save_pretrained(str(folder))
    return folder


def test_annotate_sft_grpo_merge_and_segment(llama_server, books_dir, tmp_path) -> None:
    import importlib.util

    from litrag import LitSegNodeParser
    from litrag.cli import main
    from litrag.distill.export import merge_adapter
    from litrag.distill.judge import NarrativeJudge
    from litrag.distill.rewards import narrative_reward_function
    from litrag.distill.student import TransformersChatLLM
    from litrag.distill.train import run_grpo, run_sft
    from litrag.ingestion.chapters import split_chapters
    from litrag.ingestion.gutenberg import load_book
    from litrag.segment.cache import ResponseCache
    from litrag.segment.llm_calls import LLMCaller, Sampling

    for module in ("trl", "peft", "datasets", "accelerate", "transformers"):
        if importlib.util.find_spec(module) is None:  # fail, never skip: a missing extra is red
            pytest.fail(f"{module} is missing: install the distill extra (scripts/setup.sh)")
    times: dict[str, float] = {}

    # generous timeouts and no client retries: a busy CI core must not turn one slow call into
    # a retried (and so uncached) one
    def fresh_llm():  # OpenAILike's async client is bound to the event loop it first ran in
        return openai_like(
            llama_server.api_base,
            llama_server.model,
            context_window=8192,
            timeout=1800,
            max_retries=0,
        )

    llm = fresh_llm()
    cfg = DistillConfig.load()
    a = cfg.annotate.model_copy(
        update={
            "max_retries": 0,
            "workers": 2,
            "max_output_tokens": 256,
            "timeout": 1800,
            "strict": False,
        }
    )
    data, cache = tmp_path / "data", tmp_path / "teacher-cache"

    # 1. teacher data: one chapter, three stages (each teacher call is the run's dearest step)
    t0 = time.perf_counter()
    book = books_dir / BOOK
    manifest = annotate([book], llm, data, a, chapters={1}, cache_dir=cache)
    times["annotate"] = time.perf_counter() - t0
    assert manifest["units"] == 1 and manifest["llm_calls"] == 3
    assert manifest["valid"] + manifest["rejected"] == 1
    assert sum(manifest["rejected_by_reason"].values()) == manifest["rejected"]
    assert manifest["records"] == 1 and manifest["split"]["train"] == ["pg1342"]
    assert manifest["teacher_model"] == llama_server.model
    records = read_records(data)
    assert [r["chapter_index"] for r in records] == [1]
    for r in records:
        system, user, answer = r["messages"]
        assert [m["role"] for m in r["messages"]] == ["system", "user", "assistant"]
        assert system["content"].startswith("# Role") and "STRICT JSON" in system["content"]
        assert f"[{r['n_sentences']}] " in user["content"] and r["passage"] in user["content"]
        obj = json.loads(answer["content"])
        assert set(obj) == {"step1", "step2", "step3"} and obj["step3"]["segments"]
    # the strict default through the command line, over the same (cached) replies: only
    # valid units are kept, and nothing is asked twice
    toml = tmp_path / "distill.toml"
    toml.write_text(
        "[annotate]\nmax_retries = 0\nworkers = 2\nmax_output_tokens = 256\ntimeout = 1800.0\n"
    )
    argv = [
        "distill",
        "annotate",
        str(book),
        "--llm-url",
        llama_server.api_base,
        "--model",
        llama_server.model,
        "--out",
        str(tmp_path / "strict"),
        "--chapters",
        "1",
        "--cache-dir",
        str(cache),
        "--config",
        str(toml),
        "-q",
    ]
    code = main(argv)
    strict = json.loads((tmp_path / "strict" / "manifest.json").read_text())
    assert code == (0 if strict["records"] else 1)
    assert strict["strict"] and strict["cached_calls"] == strict["llm_calls"] == 3
    assert strict["records"] == strict["valid"] == manifest["valid"]
    assert len(read_records(tmp_path / "strict")) == strict["records"]

    # 2. the judge, the same real LLM, on the teacher's answers (the student's rollouts below
    # are garbage, which the narrative reward scores without a call)
    judge_cache = tmp_path / "judge-cache"
    caller = LLMCaller(
        fresh_llm(),
        Sampling(max_tokens=200),
        1800,
        ResponseCache(judge_cache / "judge_replies.sqlite"),
    )
    # one real call: the retry path is test_distill_rewards.py's (scripted replies)
    judge = NarrativeJudge(caller, max_retries=0, num_workers=2)
    reward = narrative_reward_function(judge)
    first = records[0]
    t0 = time.perf_counter()
    values = asyncio.run(
        reward(
            completions=[[first["messages"][2]]],
            n_sentences=[first["n_sentences"]],
            passage=[first["passage"]],
        )
    )
    times["judge"] = time.perf_counter() - t0
    assert 0.0 <= values[0] <= 1.0
    assert judge.stats.calls >= 1 and judge.stats.scored + judge.stats.failed == 1
    caller.cache.close()

    # 3. a tiny random Qwen3, LoRA SFT for a few steps
    base = tiny_qwen3(tmp_path / "base", [m["content"] for r in records for m in r["messages"]])
    sft_cfg = cfg.sft.model_copy(
        update={
            "max_steps": 3,
            "gradient_accumulation": 1,
            "max_length": 4096,
            "save_steps": 2,
            "logging_steps": 1,
        }
    )
    t0 = time.perf_counter()
    sft = run_sft(base, data, tmp_path / "sft", sft_cfg)
    times["sft"] = time.perf_counter() - t0
    assert sft["steps"] == 3 and sft["device"] == "cpu" and sft["final_loss"] is not None
    assert (tmp_path / "sft" / "adapter" / "adapter_config.json").is_file()
    assert (tmp_path / "sft" / "merged" / "config.json").is_file()
    assert list((tmp_path / "sft").glob("checkpoint-*"))

    # 4. GRPO, 2 steps, the DAPO loss and both rewards; rollouts generated in-process
    grpo_cfg = cfg.grpo.model_copy(
        update={
            "max_steps": 2,
            "num_generations": 2,
            "batch_size": 2,
            "gradient_accumulation": 1,
            "num_iterations": 1,
            "max_completion_length": 24,
            "save_steps": 100,
            "logging_steps": 1,
        }
    )
    judge_cfg = cfg.judge.model_copy(
        update={"max_retries": 0, "workers": 2, "max_output_tokens": 200, "timeout": 1800}
    )
    t0 = time.perf_counter()
    grpo = run_grpo(
        tmp_path / "sft" / "merged",
        data,
        tmp_path / "grpo",
        fresh_llm(),
        grpo_cfg,
        judge_cfg,
        judge_cache_dir=judge_cache,
    )
    times["grpo"] = time.perf_counter() - t0
    assert grpo["steps"] == 2 and grpo["config"]["loss_type"] == "dapo"
    logged = {k for h in grpo["log_history"] for k in h}
    assert {"rewards/format_reward/mean", "rewards/narrative_reward/mean"} <= logged
    formats = [
        h["rewards/format_reward/mean"]
        for h in grpo["log_history"]
        if "rewards/format_reward/mean" in h
    ]
    assert all(-1.0 <= f <= 0.0 for f in formats)

    # 5. merge the GRPO adapter into its base again, from the folders (what `export` does)
    student = merge_adapter(
        tmp_path / "sft" / "merged", tmp_path / "grpo" / "adapter", tmp_path / "student"
    )
    assert (student / "config.json").is_file()

    # 6. reload and segment one chapter with the student through LitSegNodeParser
    doc = next(d for d in split_chapters(load_book(book)) if d.metadata["chapter_index"] == 2)
    t0 = time.perf_counter()
    parser = LitSegNodeParser(
        llm=TransformersChatLLM(model_path=str(student), max_new_tokens=48, temperature=0),
        max_retries=1,
        num_workers=1,
    )
    nodes = parser.get_nodes_from_documents([doc])
    times["segment"] = time.perf_counter() - t0
    s = parser.summary
    assert s.llm_calls == 2 and s.valid + s.repaired + s.fallback == 1
    covered = set()
    for n in nodes:
        assert doc.text[n.start_char_idx : n.end_char_idx] == n.text
        covered.update(range(n.metadata["sentence_from"], n.metadata["sentence_to"] + 1))
    assert min(covered) == 1 and len(covered) == max(covered)
    print("distill e2e seconds:", {k: round(v, 1) for k, v in times.items()})


def test_split_is_by_book_never_by_chapter() -> None:
    books = [f"pg{i}" for i in (11, 84, 158, 215, 1342, 1661)]
    split = split_books(books * 3, 0.34, seed=42)  # repeated ids: chapters of the same books
    assert len(split["validation"]) == 2 and len(split["train"]) == 4
    assert not set(split["train"]) & set(split["validation"])
    assert split == split_books(list(reversed(books)), 0.34, seed=42)  # order does not matter
    assert split_books(["pg11"], 0.5)["validation"] == []  # one book: nothing to hold out
    assert split_books(books, 0.01)["validation"] != []  # at least one book when asked
    named = split_books(books, 0.5, validation=["pg84"])
    assert named["validation"] == ["pg84"] and "pg84" not in named["train"]
    with pytest.raises(ValueError, match="not among"):
        split_books(books, 0.1, validation=["pg9999"])
