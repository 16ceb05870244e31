"""LoRA SFT, then GRPO with the format and narratological rewards (TRL; the ``distill`` extra).

Both steps take any local Hugging Face model folder (the paper: Qwen3-4B-Instruct-2507), the
paper's settings from ``DistillConfig`` (Tables 13-16), and write checkpoints, the adapter
(``OUT/adapter``) and the merged model (``OUT/merged``, what the next step or ``vllm serve``
reads) under ``OUT``. The device and precision follow the machine: a GPU trains in bf16 where
it has it (fp16 otherwise, the paper's), a CPU in fp32 with ``use_cpu=True``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from litrag.distill.annotate import TRAIN, VALIDATION, read_records
from litrag.distill.config import GRPOConfigSection, JudgeConfig, SFTConfigSection

ADAPTER_DIR = "adapter"
MERGED_DIR = "merged"
REPORT_FILE = "train_report.json"


class DistillDependencyError(ImportError):
    """The ``distill`` extra is not installed."""


def _require() -> None:
    import importlib.util

    missing = [
        m
        for m in ("torch", "transformers", "trl", "peft", "datasets", "accelerate")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise DistillDependencyError(
            f"training needs {', '.join(missing)}: pip install 'litrag[distill]'"
        )


def precision_flags(precision: str) -> dict[str, Any]:
    """``use_cpu`` / ``bf16`` / ``fp16`` for the trainer's arguments, for this machine."""
    import torch

    if not torch.cuda.is_available():
        return {"use_cpu": True, "bf16": False, "fp16": False}
    if precision == "auto":
        precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return {"use_cpu": False, "bf16": precision == "bf16", "fp16": precision == "fp16"}


def _optimizer(name: str) -> str:
    """The fused AdamW only where CUDA runs it; the plain one on a CPU."""
    import torch

    if name == "adamw_torch_fused" and not torch.cuda.is_available():
        return "adamw_torch"
    return name


def _lora(cfg: SFTConfigSection | GRPOConfigSection) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        bias="none",
        target_modules=list(cfg.target_modules),
        task_type="CAUSAL_LM",
    )


def _model_and_tokenizer(model_path: str | Path, flags: dict[str, Any]) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_path)
    if not (path / "config.json").is_file():
        raise ValueError(f"{model_path} is not a Hugging Face model folder (no config.json)")
    dtype = torch.bfloat16 if flags["bf16"] else torch.float16 if flags["fp16"] else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
    return model, tokenizer


def _last_checkpoint(out: Path) -> str | None:
    ckpts = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return str(ckpts[-1]) if ckpts else None


def _finish(trainer: Any, tokenizer: Any, out: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Save the adapter, merge it into ``OUT/merged``, write the report."""
    from litrag.distill.export import merge_loaded

    trainer.save_model(str(out / ADAPTER_DIR))
    tokenizer.save_pretrained(str(out / ADAPTER_DIR))
    merge_loaded(trainer.model, tokenizer, out / MERGED_DIR)
    logs = [h for h in trainer.state.log_history if "loss" in h or "train_loss" in h]
    report.update(
        steps=trainer.state.global_step,
        log_history=trainer.state.log_history,
        final_loss=next((h.get("loss", h.get("train_loss")) for h in reversed(logs)), None),
        adapter=str(out / ADAPTER_DIR),
        merged=str(out / MERGED_DIR),
    )
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report


def _trainer_args(cfg: Any, out: Path, flags: dict[str, Any]) -> dict[str, Any]:
    """The transformers TrainingArguments SFT and GRPO share (the config's _Training fields)."""
    return {
        "output_dir": str(out),
        "num_train_epochs": cfg.epochs,
        "max_steps": cfg.max_steps,
        "learning_rate": cfg.learning_rate,
        "per_device_train_batch_size": cfg.batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation,
        "optim": _optimizer(cfg.optimizer),
        "seed": cfg.seed,
        "save_strategy": "steps",
        "save_steps": cfg.save_steps,
        "logging_steps": cfg.logging_steps,
        "report_to": "none",
        **flags,
    }


def run_sft(
    model_path: str | Path,
    data_dir: str | Path,
    out_dir: str | Path,
    cfg: SFTConfigSection | None = None,
    *,
    resume: bool = False,
) -> dict[str, Any]:
    """LoRA SFT on the annotated records (Table 13); the validation split is evaluated."""
    cfg = cfg or SFTConfigSection()
    out = Path(out_dir)
    train = [{"messages": r["messages"]} for r in read_records(data_dir, TRAIN)]
    val = [{"messages": r["messages"]} for r in read_records(data_dir, VALIDATION)]
    if not train:
        raise ValueError(f"{data_dir}: no training records (the teacher kept none)")
    _require()
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    flags = precision_flags(cfg.precision)
    model, tokenizer = _model_and_tokenizer(model_path, flags)
    args = SFTConfig(
        **_trainer_args(cfg, out, flags),
        per_device_eval_batch_size=cfg.batch_size,
        max_length=cfg.max_length,
        assistant_only_loss=cfg.assistant_only_loss,
        eval_strategy="epoch" if val else "no",
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(train),
        eval_dataset=Dataset.from_list(val) if val else None,
        processing_class=tokenizer,
        peft_config=_lora(cfg),
    )
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=_last_checkpoint(out) if resume else None)
    report = {
        "step": "sft",
        "base_model": str(model_path),
        "train_records": len(train),
        "validation_records": len(val),
        "seconds": round(time.perf_counter() - t0, 2),
        "config": cfg.model_dump(),
        "device": "cpu" if flags["use_cpu"] else "cuda",
    }
    if val:
        report["eval"] = trainer.evaluate()
    return _finish(trainer, tokenizer, out, report)


def grpo_dataset(data_dir: str | Path, split: str = TRAIN) -> list[dict[str, Any]]:
    """Prompts (system + user, no answer) with what the rewards read."""
    return [
        {"prompt": r["messages"][:2], "n_sentences": r["n_sentences"], "passage": r["passage"]}
        for r in read_records(data_dir, split)
    ]


def run_grpo(
    model_path: str | Path,
    data_dir: str | Path,
    out_dir: str | Path,
    judge_llm: Any,
    cfg: GRPOConfigSection | None = None,
    judge_cfg: JudgeConfig | None = None,
    *,
    vllm_url: str | None = None,
    vllm_colocate: bool = False,
    judge_identity: str | None = None,
    judge_cache_dir: str | Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """GRPO (Table 14) with the format reward and the LLM judge's narratological reward.

    ``vllm_url`` generates rollouts on a ``trl vllm-serve`` server (TRL's server mode);
    ``vllm_colocate`` on a vLLM engine inside the trainer, sharing its GPU (TRL's colocate
    mode, ``cfg.vllm_gpu_memory_utilization`` of it); with neither, with ``generate``. The
    judge's replies are cached under ``judge_cache_dir`` (default ``OUT/judge_cache``).
    """
    rows = grpo_dataset(data_dir)
    if not rows:
        raise ValueError(f"{data_dir}: no training records (the teacher kept none)")
    _require()
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from litrag.distill.judge import NarrativeJudge
    from litrag.distill.rewards import format_reward, narrative_reward_function
    from litrag.segment.cache import ResponseCache
    from litrag.segment.llm_calls import LLMCaller

    cfg = cfg or GRPOConfigSection()
    judge_cfg = judge_cfg or JudgeConfig()
    out = Path(out_dir)
    cache = ResponseCache(Path(judge_cache_dir or out / "judge_cache") / "judge_replies.sqlite")
    caller = LLMCaller(judge_llm, judge_cfg.sampling(), judge_cfg.timeout, cache)
    caller.identity = judge_identity or caller.identity
    judge = NarrativeJudge(
        caller,
        max_retries=judge_cfg.max_retries,
        num_workers=judge_cfg.workers,
        failure_score=judge_cfg.failure_score,
    )
    narrative = narrative_reward_function(judge)
    flags = precision_flags(cfg.precision)
    model, tokenizer = _model_and_tokenizer(model_path, flags)
    vllm: dict[str, Any] = {}
    if vllm_url:
        vllm = {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": vllm_url}
    elif vllm_colocate:
        vllm = {
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
        }
    args = GRPOConfig(
        **_trainer_args(cfg, out, flags),
        loss_type=cfg.loss_type,
        num_generations=cfg.num_generations,
        num_iterations=cfg.num_iterations,
        temperature=cfg.temperature,
        mask_truncated_completions=cfg.mask_truncated_completions,
        max_completion_length=cfg.max_completion_length,
        reward_weights=[cfg.format_weight, cfg.narrative_weight],
        **vllm,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[format_reward, narrative],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=_lora(cfg),
    )
    t0 = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=_last_checkpoint(out) if resume else None)
    finally:
        cache.close()
    report = {
        "step": "grpo",
        "base_model": str(model_path),
        "train_prompts": len(rows),
        "seconds": round(time.perf_counter() - t0, 2),
        "config": cfg.model_dump(),
        "judge": {**judge.stats.__dict__, "identity": caller.identity},
        "device": "cpu" if flags["use_cpu"] else "cuda",
        "vllm_url": vllm_url,
    }
    return _finish(trainer, tokenizer, out, report)
