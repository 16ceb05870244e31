"""Reranker cost per candidate: Qwen3Reranker on random models of a few sizes, or a real checkpoint.

python benchmarks/bench_rerank.py [--sizes tiny,small,0.6b] [--candidates 100] [--words 250]
                                  [--batch-size 8] [--model-path DIR] [--device auto] [--dtype auto]

Candidates are --words-word windows of the bundled Call of the Wild, scored against one question,
as the query engine would (one ``score`` call over all of them). Random weights cost what trained
ones do, so ``0.6b`` (Qwen3-Reranker-0.6B's shape: 28 layers, hidden 1024, 151,669-token vocab)
estimates the real 0.6B model's speed where no weights are installed; its prompts are cut by a
byte-level BPE trained here on the book (about as many tokens per word as Qwen's). A real
checkpoint (``--model-path``) uses its own tokenizer. Prints one JSON line per model and a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

BOOK = Path(__file__).resolve().parents[1] / "litrag" / "data" / "pg215_call_of_the_wild.txt"
QUERY = "Who stole Buck from Judge Miller's place?"
SHAPES: dict[str, dict[str, int]] = {
    # name: Qwen3Config fields; vocab_size 0 means the bench tokenizer's own size
    "tiny": dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        vocab_size=0,
    ),
    "small": dict(
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        vocab_size=0,
    ),
    "0.6b": dict(
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151669,
    ),
}


def candidates(n: int, words: int) -> list[str]:
    """``n`` windows of ``words`` words, spread over the book."""
    text = BOOK.read_text(encoding="utf-8-sig").split()
    step = max((len(text) - words) // max(n, 1), 1)
    return [" ".join(text[i * step : i * step + words]) for i in range(n)]


def bench_tokenizer(vocab_size: int = 16000) -> Any:
    """Byte-level BPE on the book with Qwen's chat tokens; no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from litrag.models.qwen3_rerank import ASSISTANT_SUFFIX, LITERARY_INSTRUCTION, SYSTEM_PREFIX

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = BOOK.read_text(encoding="utf-8-sig").splitlines()
    core.train_from_iterator(
        [*lines, SYSTEM_PREFIX, ASSISTANT_SUFFIX, LITERARY_INSTRUCTION], trainer
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        clean_up_tokenization_spaces=False,
    )
    tok.add_tokens(["<think>", "</think>"])
    return tok


def random_reranker(shape: str, tokenizer: Any, args: argparse.Namespace) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from litrag.models.qwen3_rerank import resolve_device, resolve_dtype
    from litrag.retrieval.rerank import Qwen3Reranker

    fields = dict(SHAPES[shape])
    fields["vocab_size"] = max(fields["vocab_size"], len(tokenizer))
    config = Qwen3Config(
        **fields,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
    )
    device = resolve_device(args.device)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(resolve_dtype(args.dtype, device))
    return Qwen3Reranker.from_model(
        model, tokenizer, batch_size=args.batch_size, device=device, dtype=args.dtype
    )


def measure(name: str, reranker: Any, docs: list[str], repeats: int) -> dict[str, Any]:
    import torch

    prompts = reranker.encode(QUERY, docs)
    reranker.score(QUERY, docs[: reranker.batch_size])  # warm-up: kernels, allocator
    cuda = next(reranker.model.parameters()).is_cuda
    runs = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        reranker.score(QUERY, docs)
        if cuda:
            torch.cuda.synchronize()
        runs.append(time.perf_counter() - t0)
    best = min(runs)
    params = sum(p.numel() for p in reranker.model.parameters())
    p = next(reranker.model.parameters())
    return {
        "model": name,
        "params_m": round(params / 1e6, 1),
        "device": str(p.device),
        "dtype": str(p.dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "batch_size": reranker.batch_size,
        "candidates": len(docs),
        "tokens_per_prompt": round(statistics.mean(len(x) for x in prompts), 1),
        "ms_per_candidate": round(1000 * best / len(docs), 2),
        "ms_per_candidate_median": round(1000 * statistics.median(runs) / len(docs), 2),
        "total_s": round(best, 3),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="tiny,small", help=f"comma list of {', '.join(SHAPES)}")
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument(
        "--large-candidates", type=int, default=8, help="candidates for 0.6b / a real model on CPU"
    )
    ap.add_argument("--words", type=int, default=250)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--model-path", default=None, help="a real Qwen3-Reranker checkpoint folder")
    args = ap.parse_args(argv)

    import torch

    from litrag.models.qwen3_rerank import resolve_device
    from litrag.retrieval.rerank import Qwen3Reranker

    if args.threads:
        torch.set_num_threads(args.threads)
    on_cpu = resolve_device(args.device) == "cpu"
    rows = []
    sizes = [s for s in args.sizes.split(",") if s]
    tokenizer = bench_tokenizer() if sizes else None
    for shape in sizes:
        if shape not in SHAPES:
            raise SystemExit(f"unknown size {shape!r}; choose from {', '.join(SHAPES)}")
        n = args.large_candidates if shape == "0.6b" and on_cpu else args.candidates
        rr = random_reranker(shape, tokenizer, args)
        rows.append(measure(f"random-{shape}", rr, candidates(n, args.words), args.repeats))
        print(json.dumps(rows[-1]), flush=True)
        del rr
    if args.model_path:
        rr = Qwen3Reranker(
            model_path=args.model_path,
            batch_size=args.batch_size,
            device=args.device,
            dtype=args.dtype,
        )
        n = args.large_candidates if on_cpu else args.candidates
        docs = candidates(n, args.words)
        rows.append(measure(Path(args.model_path).name, rr, docs, args.repeats))
        print(json.dumps(rows[-1]), flush=True)

    cols = ["model", "params_m", "device", "dtype", "candidates", "tokens_per_prompt"]
    cols += ["ms_per_candidate", "ms_per_candidate_median"]
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
