"""Settings of the distillation steps: the paper's values, read from one TOML file.

``default_config.toml`` (shipped with the package) holds Tables 11-16; a user copies it
(``litrag distill config > distill.toml``), edits it and passes it with ``--config``. Unknown
keys are an error, so a typo never silently keeps a default.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_CONFIG = Path(__file__).with_name("default_config.toml")

_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
Precision = Literal["auto", "bf16", "fp16", "fp32"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TeacherSampling(_Section):
    temperature: float = Field(1.0, description="Sampling temperature.")
    top_p: float = Field(0.95, description="Nucleus sampling.")
    top_k: int = Field(20, description="Top-k sampling (sent in the request body).")
    presence_penalty: float = Field(1.5, description="Presence penalty (OpenAI field).")
    enable_thinking: bool = Field(False, description="Qwen3 thinking mode (chat_template_kwargs).")
    max_retries: int = Field(20, ge=0, description="Retries of an invalid reply.")
    workers: int = Field(16, ge=1, description="Calls in flight.")
    timeout: float = Field(600.0, gt=0, description="Seconds per call.")
    max_output_tokens: int = Field(0, ge=0, description="Tokens per reply; 0 = the server's.")

    def extra_body(self) -> dict[str, Any]:
        return {
            "presence_penalty": self.presence_penalty,
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
        }

    def sampling(self) -> Any:
        """These settings as the JSON-mode ``Sampling`` of an ``LLMCaller`` (teacher or judge)."""
        from litrag.segment.llm_calls import Sampling

        return Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            json_mode=True,
            max_tokens=self.max_output_tokens or None,
            extra_body=tuple(sorted(self.extra_body().items())),
        )


class AnnotateConfig(TeacherSampling):
    """The LitSeg teacher (Table 11) and the train / validation split."""

    max_unit_words: int = Field(25_000, gt=0, description="Input chunk size n (words).")
    validation_fraction: float = Field(
        0.1, ge=0, lt=1, description="Share of books held out for validation (by book)."
    )
    seed: int = Field(42, description="Seed of the book split.")
    strict: bool = Field(
        True,
        description="Keep only units whose stages all parsed and whose segments passed "
        "validation without repair (the paper's); false keeps every unit, repaired and "
        "fallback ones too: a plumbing check with a small teacher, never training data.",
    )


class JudgeConfig(TeacherSampling):
    """The reward model (Table 15)."""

    enable_thinking: bool = Field(True, description="Qwen3 thinking mode (the paper: on).")
    max_retries: int = Field(3, ge=0, description="Retries of an unusable judge reply.")
    failure_score: float = Field(
        0.0, ge=0, le=1, description="Narrative reward when the judge never scores."
    )


class _Training(_Section):
    lora_r: int = Field(16, gt=0, description="LoRA rank.")
    lora_alpha: int = Field(32, gt=0, description="LoRA alpha.")
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="LoRA dropout.")
    target_modules: list[str] = Field(
        default_factory=lambda: list(_PROJECTIONS), description="Projections LoRA adapts."
    )
    epochs: float = Field(3, gt=0, description="Training epochs.")
    learning_rate: float = Field(2e-4, gt=0, description="Peak learning rate.")
    batch_size: int = Field(1, ge=1, description="Per-device batch size.")
    gradient_accumulation: int = Field(8, ge=1, description="Gradient accumulation steps.")
    optimizer: str = Field("adamw_torch_fused", description="transformers optimizer name.")
    seed: int = Field(42, description="Random seed.")
    precision: Precision = Field("auto", description="auto: bf16/fp16 on a GPU, fp32 on a CPU.")
    max_steps: int = Field(-1, description="> 0 stops after this many optimizer steps.")
    save_steps: int = Field(200, gt=0, description="Checkpoint every this many steps.")
    logging_steps: int = Field(10, gt=0, description="Log every this many steps.")


class SFTConfigSection(_Training):
    """LoRA SFT (Table 13)."""

    max_length: int = Field(32_768, gt=0, description="Tokens per example.")
    assistant_only_loss: bool = Field(True, description="Loss on the answer only.")


class GRPOConfigSection(_Training):
    """GRPO with a DAPO loss (Table 14)."""

    loss_type: str = Field("dapo", description="TRL loss type.")
    num_generations: int = Field(8, ge=2, description="Completions per prompt (G).")
    num_iterations: int = Field(4, ge=1, description="Optimisation passes per generation.")
    epochs: float = Field(2, gt=0, description="Training epochs.")
    learning_rate: float = Field(5e-6, gt=0, description="Peak learning rate.")
    temperature: float = Field(0.7, gt=0, description="Rollout sampling temperature.")
    mask_truncated_completions: bool = Field(True, description="No loss on cut-off rollouts.")
    max_completion_length: int = Field(4096, gt=0, description="Tokens per rollout.")
    format_weight: float = Field(0.1, description="Weight of the format reward.")
    narrative_weight: float = Field(0.9, description="Weight of the narratological reward.")
    save_steps: int = Field(50, gt=0, description="Checkpoint every this many steps.")
    logging_steps: int = Field(1, gt=0, description="Log every this many steps.")
    vllm_gpu_memory_utilization: float = Field(
        0.2, gt=0, lt=1, description="Share of the GPU for colocated rollouts (--vllm-colocate)."
    )


class DistillConfig(_Section):
    """Every step's settings; ``load`` reads a TOML file over the packaged defaults."""

    annotate: AnnotateConfig = Field(default_factory=AnnotateConfig)
    sft: SFTConfigSection = Field(default_factory=SFTConfigSection)
    grpo: GRPOConfigSection = Field(default_factory=GRPOConfigSection)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)

    @classmethod
    def class_name(cls) -> str:
        return "DistillConfig"

    @classmethod
    def load(cls, path: str | Path | None = None) -> DistillConfig:
        """The packaged defaults, overlaid with ``path`` (a TOML file) when given."""
        data = _read(DEFAULT_CONFIG)
        if path is not None:
            for section, values in _read(Path(path)).items():
                if not isinstance(values, dict):
                    raise ValueError(f"{path}: [{section}] must be a table")
                data.setdefault(section, {}).update(values)
        try:
            return cls.model_validate(data)
        except Exception as exc:
            first = str(exc).splitlines()
            detail = " ".join(line.strip() for line in first[1:3])
            raise ValueError(f"{path or DEFAULT_CONFIG}: bad distill config: {detail}") from exc


def _read(path: Path) -> dict[str, Any]:
    from litrag.ingestion.input_file import InputFileError, read_input_text

    try:  # a device or a FIFO is refused before a byte is read, and the read is capped
        return tomllib.loads(read_input_text(path, ""))
    except InputFileError as exc:  # a folder, a device: one line, not IsADirectoryError
        if exc.reason == "no such file":
            raise ValueError(f"config file not found: {path}") from None
        raise ValueError(f"config file {path} cannot be read: {exc.reason}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
