"""The trained student as a plain model folder (adapter merged) and, optionally, a GGUF file.

``vllm serve OUT`` (or ``vllm serve BASE --enable-lora --lora-modules student=ADAPTER``) serves
the folder to ``LitSegNodeParser`` and ``litrag ingest`` by URL; a GGUF runs on llama.cpp.
The GGUF converter (``convert_hf_to_gguf.py``) ships with llama.cpp's source, not with the
``gguf`` package or llama-cpp-python's wheel: point ``--converter`` (or ``LITRAG_GGUF_CONVERTER``)
at it, or at a llama.cpp checkout; its ``gguf-py`` folder is put on the converter's path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

CONVERTER = "convert_hf_to_gguf.py"


def merge_loaded(model: Any, tokenizer: Any, out_dir: str | Path) -> Path:
    """Merge a loaded PEFT model's adapter (``merge_and_unload``) and save a plain folder."""
    out = Path(out_dir)
    merged = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
    merged.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def merge_adapter(base: str | Path, adapter: str | Path, out_dir: str | Path) -> Path:
    """Load ``base``, apply the LoRA ``adapter``, merge it and save the result to ``out_dir``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for path, what in ((base, "base model"), (adapter, "adapter")):
        if not Path(path).is_dir():
            raise ValueError(f"{what} folder not found: {path}")
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype="auto")
    model = PeftModel.from_pretrained(model, str(adapter))
    source = adapter if (Path(adapter) / "tokenizer_config.json").is_file() else base
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    return merge_loaded(model, tokenizer, out_dir)


def find_converter(hint: str | Path | None = None) -> Path | None:
    """llama.cpp's ``convert_hf_to_gguf.py``: ``hint`` (the file or a llama.cpp folder), else
    ``LITRAG_GGUF_CONVERTER``, else one on ``PATH``."""
    from litrag.settings import gguf_converter

    for cand in (hint, gguf_converter()):
        if not cand:
            continue
        p = Path(cand).expanduser()
        if p.is_dir():
            p = p / CONVERTER
        if p.is_file():
            return p
    found = shutil.which(CONVERTER)
    return Path(found) if found else None


def to_gguf(
    model_dir: str | Path,
    out_file: str | Path,
    converter: str | Path | None = None,
    outtype: str = "q8_0",
    timeout: float = 3600.0,
) -> Path:
    """Convert a merged model folder to one GGUF file with llama.cpp's converter."""
    script = find_converter(converter)
    if script is None:
        raise ValueError(
            f"GGUF export needs llama.cpp's {CONVERTER} (it ships in llama.cpp's source, not in "
            "the gguf package): pass --converter PATH or set LITRAG_GGUF_CONVERTER"
        )
    env = dict(os.environ)
    gguf_py = script.parent / "gguf-py"
    if gguf_py.is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(gguf_py), env.get("PYTHONPATH")]))
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(script), str(model_dir), "--outfile", str(out), "--outtype", outtype]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not out.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{CONVERTER} failed (exit {proc.returncode}): {tail[0]}")
    return out
