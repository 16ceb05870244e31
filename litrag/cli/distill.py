"""``litrag distill config|annotate|sft|grpo|export``: train a LitSeg-Lite student."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from litrag import settings
from litrag.cli.common import (
    add_backend_flag,
    backend_from_args,
    chapter_indices,
    check_at_least,
    make_out_folder,
    probe_llm_server,
    seconds,
)
from litrag.settings import SettingsError


def _one_line(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Bad input (a config, a folder, a missing extra) ends in one ``error:`` line, exit 2."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (ValueError, ImportError, RuntimeError) as exc:
            if settings.debug():
                raise
            line = str(exc).splitlines()[0] if str(exc) else repr(exc)
            print(f"error: {line}", file=sys.stderr)
            return 2

    return run


def _config(args: argparse.Namespace) -> Any:
    from litrag.distill.config import DistillConfig

    return DistillConfig.load(args.config)


def _server_llm(args: argparse.Namespace, url: str, model: str, timeout: float) -> Any:
    from litrag.builders import build_url_llm
    from litrag.settings import Settings

    s = Settings()
    return build_url_llm(
        s, url, model, backend=backend_from_args(args, s), timeout=timeout, api_key=s.llm_api_key
    )


def _print(report: dict[str, Any], keys: tuple[str, ...]) -> None:
    print(json.dumps({k: report[k] for k in keys if k in report}, indent=2, default=str))


def _cmd_config(args: argparse.Namespace) -> int:
    from litrag.distill.config import DEFAULT_CONFIG

    _config(args)  # a given file must be valid
    sys.stdout.write(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    return 0


def _cmd_annotate(args: argparse.Namespace) -> int:
    from litrag.distill.annotate import annotate
    from litrag.ingestion.gutenberg import BookLoadError, iter_book_files
    from litrag.segment.llm_calls import LLMUnavailableError

    check_at_least(args, workers=1, max_retries=0, max_unit_words=1)
    if args.timeout is not None and not args.timeout > 0:
        raise SettingsError(f"--timeout must be greater than 0, got {args.timeout}")
    if args.validation_fraction is not None and not 0 <= args.validation_fraction < 1:
        raise SettingsError(
            f"--validation-fraction must be at least 0 and below 1, got {args.validation_fraction}"
        )
    chapters = chapter_indices(args.chapters)
    cfg = _config(args).annotate
    for flag in ("workers", "max_retries", "max_unit_words", "timeout"):
        value = getattr(args, flag)
        if value is not None:
            setattr(cfg, flag, value)
    if args.validation_fraction is not None:
        cfg.validation_fraction = args.validation_fraction
    books: list[Path] = []
    for given in args.books:
        if not given.exists():
            print(f"error: {given}: no such file or folder", file=sys.stderr)
            return 2
        books.extend(iter_book_files(given) if given.is_dir() else [given])
    probe_llm_server(args.llm_url, "--llm-url", "teacher LLM server")
    make_out_folder(args.out)  # last: a refused run leaves no folder
    llm = _server_llm(args, args.llm_url, args.model, cfg.timeout)
    try:
        manifest = annotate(
            books,
            llm,
            args.out,
            cfg,
            chapters=chapters,
            cache_dir=args.cache_dir,
            teacher_model=args.model,
            validation_books=args.validation_books.split(",") if args.validation_books else (),
            show_progress=not args.quiet,
        )
    except BookLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except LLMUnavailableError as exc:  # it went away mid-run: the reply cache keeps what came
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: {first} (rerun to resume from the reply cache)", file=sys.stderr)
        return 2
    _print(
        manifest,
        (
            "teacher_model",
            "prompt_version",
            "units",
            "valid",
            "rejected",
            "records",
            "rejected_by_reason",
            "split",
            "llm_calls",
            "cached_calls",
            "seconds",
        ),
    )
    print(f"wrote {Path(args.out) / 'sft.jsonl'} and manifest.json", file=sys.stderr)
    return 0 if manifest["records"] else 1


def _steps(section: Any, args: argparse.Namespace) -> None:
    check_at_least(args, max_steps=1)
    if args.max_steps is not None:
        section.max_steps = args.max_steps


def _cmd_sft(args: argparse.Namespace) -> int:
    from litrag.distill.train import run_sft

    cfg = _config(args).sft
    _steps(cfg, args)
    report = run_sft(args.model, args.data, args.out, cfg, resume=args.resume)
    _print(
        report,
        (
            "train_records",
            "validation_records",
            "steps",
            "final_loss",
            "seconds",
            "device",
            "adapter",
            "merged",
        ),
    )
    return 0


def _cmd_grpo(args: argparse.Namespace) -> int:
    from litrag.distill.train import run_grpo

    config = _config(args)
    _steps(config.grpo, args)
    probe_llm_server(args.judge_url, "--judge-url", "judge LLM server")
    judge = _server_llm(args, args.judge_url, args.judge_model, config.judge.timeout)
    report = run_grpo(
        args.model,
        args.data,
        args.out,
        judge,
        config.grpo,
        config.judge,
        vllm_url=args.vllm_url,
        vllm_colocate=args.vllm_colocate,
        judge_cache_dir=args.judge_cache_dir,
        resume=args.resume,
    )
    _print(
        report,
        ("train_prompts", "steps", "final_loss", "seconds", "judge", "device", "adapter", "merged"),
    )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from litrag.distill.export import merge_adapter, to_gguf

    if not args.adapter and not args.gguf:  # it exited 0 having done nothing
        raise SettingsError(
            "nothing to export: give --adapter (merge it into --model) and/or --gguf FILE"
        )
    for flag, given in (("--model", args.model), ("--adapter", args.adapter)):
        if given is not None and not Path(given).is_dir():
            state = "is not a folder" if Path(given).exists() else "does not exist"
            raise SettingsError(f"{flag} {given} {state}")
    out = Path(args.out)
    if args.adapter:
        merge_adapter(args.model, args.adapter, out)
        print(f"merged {args.adapter} into {out}", file=sys.stderr)
        folder = out
    else:
        folder = Path(args.model)
    if args.gguf:
        path = to_gguf(folder, args.gguf, args.converter, args.outtype)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def add_parsers(sub: Any) -> None:
    """The ``distill`` command group."""
    p = sub.add_parser("distill", help="train a LitSeg-Lite student from the LitSeg teacher")
    steps = p.add_subparsers(dest="distill_command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument(
            "--config",
            help="a TOML file over the paper's defaults (`litrag distill config` prints them)",
        )

    q = steps.add_parser("config", help="print the default settings (the paper's) as TOML")
    common(q)
    q.set_defaults(func=_one_line(_cmd_config))

    q = steps.add_parser("annotate", help="teacher data: LitSeg over BOOKS -> SFT JSONL")
    q.add_argument("books", type=Path, nargs="+", help="Gutenberg .txt files or folders")
    q.add_argument("--llm-url", required=True, help="the teacher's OpenAI-compatible /v1 URL")
    q.add_argument("--model", required=True, help="the teacher's model name at --llm-url")
    q.add_argument("--out", required=True, help="folder for sft.jsonl and manifest.json")
    q.add_argument("--chapters", help="only these chapter indices, e.g. 1,2")
    q.add_argument("--validation-books", help="book ids to hold out, e.g. pg158,pg84")
    q.add_argument("--validation-fraction", type=float)
    q.add_argument("--workers", type=int, help="teacher calls in flight")
    q.add_argument("--max-retries", type=int)
    q.add_argument("--max-unit-words", type=int)
    q.add_argument("--timeout", type=seconds, help="seconds per call")
    q.add_argument("--cache-dir", help="teacher reply cache (default OUT/cache): resumable")
    q.add_argument("-q", "--quiet", action="store_true")
    add_backend_flag(q)
    common(q)
    q.set_defaults(func=_one_line(_cmd_annotate))

    def training(q: argparse.ArgumentParser) -> None:
        q.add_argument("--model", required=True, help="a local Hugging Face model folder")
        q.add_argument("--data", required=True, help="the annotate output folder")
        q.add_argument("--out", required=True, help="checkpoints, adapter/ and merged/")
        q.add_argument("--resume", action="store_true", help="from the last checkpoint in OUT")
        q.add_argument("--max-steps", type=int, help="stop after N optimizer steps")
        common(q)

    q = steps.add_parser("sft", help="LoRA SFT on the teacher's annotations")
    training(q)
    q.set_defaults(func=_one_line(_cmd_sft))

    q = steps.add_parser("grpo", help="GRPO with the format and narratological rewards")
    training(q)
    q.add_argument("--judge-url", required=True, help="the judge's OpenAI-compatible /v1 URL")
    q.add_argument("--judge-model", required=True, help="the judge's model name")
    q.add_argument("--judge-cache-dir", help="judge reply cache (default OUT/judge_cache)")
    vllm = q.add_mutually_exclusive_group()
    vllm.add_argument(
        "--vllm-url", help="rollouts on a `trl vllm-serve` server (TRL's server mode)"
    )
    vllm.add_argument(
        "--vllm-colocate",
        action="store_true",
        help="rollouts on a vLLM engine in the trainer, on its GPU (TRL's colocate mode)",
    )
    add_backend_flag(q)
    q.set_defaults(func=_one_line(_cmd_grpo))

    q = steps.add_parser("export", help="merge an adapter; write a GGUF")
    q.add_argument("--model", required=True, help="the base (or already merged) model folder")
    q.add_argument("--adapter", help="a LoRA adapter folder to merge into --model")
    q.add_argument("--out", required=True, help="folder for the merged model")
    q.add_argument("--gguf", help="also write this GGUF file (needs llama.cpp's converter)")
    q.add_argument("--converter", help="llama.cpp's convert_hf_to_gguf.py or its folder")
    q.add_argument("--outtype", default="q8_0", help="GGUF type: f16, bf16, q8_0, ...")
    q.set_defaults(func=_one_line(_cmd_export))
