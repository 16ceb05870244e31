"""A sentence-transformers model run by OpenVINO: the same vectors, about twice as fast on a CPU.

Embedding is what an offline ingest waits for (97% of its stage time). OpenVINO's CPU plugin runs
the packaged MiniLM's graph faster than eager torch on the same cores, and in fp32 it returns
torch's vectors to five decimals (``benchmarks/bench_embed_runtimes.py``), so retrieval does not
move. The graph is converted once from the model's own PyTorch weights with
``openvino.convert_model`` (no optimum, no download) and kept under ``<cache>/openvino``; later
loads read the converted graph and never load torch.

Only what sentence-transformers' ``encode`` does for a mean-pooled, normalised encoder is
reproduced (tokenise with truncation, pad per batch, mean-pool over the mask, L2-normalise);
``supports`` says whether a model folder is of that kind, and other models stay on torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def available() -> bool:
    """Whether the ``openvino`` package is installed (the ``embeddings`` extra brings it)."""
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


def supports(model_path: str | Path) -> bool:
    """A sentence-transformers folder of Transformer -> mean Pooling (-> Normalize) modules."""
    root = Path(model_path)
    try:
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
            return False
        pooling = json.loads(
            (root / modules[1]["path"] / "config.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return False
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True]
    return modes == ["pooling_mode_mean_tokens"] and (root / "tokenizer.json").is_file()


def _max_seq_length(root: Path) -> int:
    try:
        cfg = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(cfg["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 512


def _fingerprint(root: Path) -> str:
    """Changes when the weights, the config or the OpenVINO release change."""
    import openvino

    h = hashlib.sha256(openvino.__version__.encode())
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        path = root / name
        if path.is_file():
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def without_telemetry() -> None:
    """Make OpenVINO's converter use its own no-op telemetry stub.

    With ``openvino_telemetry`` installed, ``convert_model`` reports usage to Google Analytics
    unless the user opted out (no consent file counts as yes, outside CI): network at run time,
    from a process forked off a thread, which was seen to hang in ``getaddrinfo`` after the
    command had finished, holding its stdout and the embedded store's lock. The converter falls
    back to the stub when the telemetry package is missing; this points it there.
    """
    import importlib

    from openvino.tools.ovc import telemetry_stub

    for name in ("convert_impl", "main", "telemetry_utils", "utils"):
        module = importlib.import_module(f"openvino.tools.ovc.{name}")
        if hasattr(module, "tm"):
            module.tm = telemetry_stub


def default_cache_dir() -> Path:
    from litrag.settings import home

    return home() / "cache" / "openvino"


def converted_model(model_path: str | Path, cache_dir: str | Path | None = None) -> Path:
    """The OpenVINO graph (``model.xml``) of a sentence-transformers folder, converted on first use.

    Written to a temporary folder and renamed into place, so a killed conversion leaves nothing
    half-written and two processes converting at once both end with a whole graph.
    """
    root = Path(model_path)
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    dest = cache / f"{root.name}-{_fingerprint(root)}"
    xml = dest / "model.xml"
    if xml.is_file():
        return xml
    import openvino
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(root)).eval()
    tok = AutoTokenizer.from_pretrained(str(root))
    probe = tok(["a probe", "a longer probe sentence"], padding=True, return_tensors="pt")
    example = {k: probe[k] for k in INPUTS if k in probe}
    with torch.no_grad(), warnings.catch_warnings():
        # the tracer notes that mask-shape checks become constants: right for an encoder, whose
        # mask always spans the whole (padded) batch
        warnings.simplefilter("ignore")
        without_telemetry()
        graph = openvino.convert_model(model, example_input=example)
    from litrag.models.disk_space import DiskSpaceError, free_bytes, is_disk_full, need_space

    # the graph keeps the model's weights in fp16: about half of its fp32 safetensors
    need = sum(f.stat().st_size for f in root.glob("*.safetensors")) // 2 + 8 * 2**20
    what = f"the OpenVINO conversion of {root.name} (once, into {cache})"
    need_space(cache, need, what)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=cache))
    try:
        try:
            openvino.save_model(graph, str(tmp / "model.xml"))
        except (RuntimeError, OSError) as exc:  # "basic_ios::clear: iostream error" on ENOSPC
            if not (is_disk_full(exc) or free_bytes(cache) < need):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # what it wrote goes before the free space
            raise DiskSpaceError(cache, free_bytes(cache), need, what) from None
        try:
            tmp.rename(dest)
        except OSError:  # another process got there first: theirs is as good
            if not xml.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return xml


class OpenVINOSentenceModel:
    """``SentenceTransformer.encode`` for a mean-pooled encoder, compiled for OpenVINO's CPU."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        cache_dir: str | Path | None = None,
        threads: int | None = None,
        precision: str = "f32",
    ) -> None:
        import openvino
        from tokenizers import Tokenizer

        root = Path(model_path)
        if not supports(root):
            raise ValueError(
                f"{root} is not a mean-pooled sentence-transformers model; use backend 'torch'"
            )
        self.max_seq_length = _max_seq_length(root)
        self.normalize = (root / "modules.json").read_text(encoding="utf-8").count("Normalize") > 0
        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.enable_truncation(self.max_seq_length)
        tok.no_padding()
        self._tok = tok
        core = openvino.Core()
        config: dict[str, Any] = {
            "INFERENCE_NUM_THREADS": threads or os.cpu_count() or 1,
            "INFERENCE_PRECISION_HINT": precision,
        }
        self._compiled = core.compile_model(str(converted_model(root, cache_dir)), "CPU", config)
        self._inputs = [p.get_any_name() for p in self._compiled.inputs]
        self._pad = tok.token_to_id("[PAD]") or 0

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        **_: Any,
    ) -> np.ndarray:
        """Mean-pooled vectors of ``texts`` (unit length when the model or the caller says so),
        batched by length as sentence-transformers batches them, so padding costs little."""
        unit = self.normalize or normalize_embeddings
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        encs = self._tok.encode_batch(list(texts))
        order = np.argsort([-len(e.ids) for e in encs], kind="stable")
        out: np.ndarray | None = None
        request = self._compiled.create_infer_request()
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = max(len(encs[i].ids) for i in idx)
            ids = np.full((len(idx), width), self._pad, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            types = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[row, :n] = encs[i].ids
                mask[row, :n] = 1
                types[row, :n] = encs[i].type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            result = request.infer({n: feeds[n] for n in self._inputs})
            hidden = np.asarray(result[self._compiled.outputs[0]], dtype=np.float32)
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
            if unit:
                pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            if out is None:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[idx] = pooled
        assert out is not None
        return out
