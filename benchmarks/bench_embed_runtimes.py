"""The packaged MiniLM through faster runtimes: passages per second and agreement with torch.

    python benchmarks/bench_embed_runtimes.py        # torch batches, the library's OpenVINO
    pip install onnxruntime onnx                     # optional rows; not litrag dependencies
    python benchmarks/bench_embed_runtimes.py        # + ONNX Runtime fp32/int8, OpenVINO on ONNX
    python benchmarks/bench_embed_runtimes.py --texts 300 --json-out runtimes.json

The texts are what an ingest embeds: the offline segmenter's blocks of The Call of the Wild (cut
into the model's 254-piece windows) and their 3-sentence windows, in that mix. The model is
exported once with ``torch.onnx.export`` (mean pooling and normalisation done here, as
sentence-transformers does for this model); int8 is ONNX Runtime's dynamic quantisation
(``quantize_dynamic``, QInt8 weights). Agreement is the cosine of each runtime's vector with
torch's for the same text. optimum-onnx (sentence-transformers' ``backend="onnx"``) was not
usable here: its 0.1.0 release requires transformers < 4.58 and this environment has 5.x.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def sample_texts(n: int) -> list[str]:
    """``n`` texts in an ingest's mix: block windows first, then sentence windows, interleaved."""
    from llama_index.core import Document

    from litrag.models.embedders import _hf_tokenizer, minilm_path
    from litrag.scoring.windows import SentenceWindowEncoder
    from litrag.segment import LitSegNodeParser

    book = Path(__file__).resolve().parents[1] / "litrag" / "data" / "pg215_call_of_the_wild.txt"
    text = book.read_text(encoding="utf-8")
    nodes = LitSegNodeParser().get_nodes_from_documents([Document(text=text[:120_000])])
    tok = _hf_tokenizer(str(minilm_path()))
    pieces, windows = [], []
    enc = SentenceWindowEncoder(lambda ts: [])
    for node in nodes:
        ids = tok.encode(node.get_content(), add_special_tokens=False)
        offsets, width = ids.offsets, 254
        content = node.get_content()
        for start in range(0, len(offsets), width - 32):
            end = min(start + width, len(offsets))
            pieces.append(content[offsets[start][0] : offsets[end - 1][1]])
            if end == len(offsets):
                break
        windows.extend(enc.windows(content))
    # An ingest embeds about one block piece per 2.5 sentence windows (six books: 2,075 blocks).
    mix: list[str] = []
    wi = iter(windows)
    for piece in pieces:
        mix.append(piece)
        mix.extend(w for _, w in zip(range(3), wi, strict=False))
        if len(mix) >= n:
            break
    return mix[:n]


def timed(fn: Callable[[list[str]], np.ndarray], texts: list[str], repeat: int = 1) -> tuple:
    fn(texts[:8])  # warm up
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(texts)
        best = min(best, time.perf_counter() - t0)
    return out, best


def batched(run: Callable[[dict], np.ndarray], tok: object, batch: int) -> Callable:
    """Sorted by length, padded per batch, mean-pooled over the mask, normalised."""

    def embed(texts: list[str]) -> np.ndarray:
        order = np.argsort([-len(t) for t in texts])
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i in range(0, len(texts), batch):
            idx = order[i : i + batch]
            enc = tok([texts[j] for j in idx], padding=True, truncation=True, max_length=256,
                      return_tensors="np")  # fmt: skip
            feeds = {
                k: enc[k].astype(np.int64)
                for k in ("input_ids", "attention_mask", "token_type_ids")
            }
            hidden = run(feeds)
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
            out[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out

    return embed


def export(model_dir: Path, dest: Path) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    bert = st[0].auto_model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m: torch.nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state  # fmt: skip

    enc = st.tokenizer(["a probe", "a longer probe sentence"], padding=True, return_tensors="pt")
    axes = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(
            Hidden(bert),
            (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]),
            str(dest),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                n: axes
                for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")
            },
            opset_version=17,
            dynamo=False,
        )
    return dest


class OrtSentenceModel:
    """``SentenceTransformer.encode`` over an ONNX Runtime session, for ``WindowedEmbedding``."""

    def __init__(self, session: object, tokenizer: object, max_seq_length: int = 256) -> None:
        self.session, self.tokenizer, self.max_seq_length = session, tokenizer, max_seq_length

    def encode(self, texts: list[str], batch_size: int = 32, **_: object) -> np.ndarray:
        run = batched(lambda f: self.session.run(None, f)[0], self.tokenizer, batch_size)
        return run(list(texts))


def retrieval_mrr(model_path: Path, name: str, cache_dir: Path, books: Path | None) -> dict:
    """``litrag eval retrieval``'s LitSeg offline row (dense windows, BM25, hybrid RSF 0.3 / 0.5)
    with the MiniLM run through ONNX Runtime from ``model_path``."""
    import onnxruntime as ort

    from litrag.eval.embedding_cache import CachedEmbedder, EmbeddingCache
    from litrag.eval.questions import load_questions
    from litrag.eval.retrieval import evaluate_retrieval, parse_modes
    from litrag.models.embedders import WindowedEmbedding

    data = books or Path(__file__).resolve().parents[1] / "data"
    questions = load_questions(data / "gutenqa" / "questions.jsonl")

    def load() -> WindowedEmbedding:
        emb = WindowedEmbedding(backend="torch")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = os.cpu_count() or 2
        sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        emb._model = OrtSentenceModel(sess, emb._model.tokenizer)
        return emb

    cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
    embedder = CachedEmbedder(cache, f"all-MiniLM-L6-v2 {name} (windowed, stride 32)", load)
    run = evaluate_retrieval(
        questions,
        data,
        ["litseg-offline"],
        parse_modes(["dense", "bm25", "hybrid"], [0.3, 0.5]),
        cache_dir=cache_dir,
        embedder=embedder,
        intrinsic=False,
        say=lambda m: print(m, flush=True),
    )
    return {"embed_seconds": round(embedder.seconds, 1), **run.to_json()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--texts", type=int, default=400)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "litrag-runtimes")
    p.add_argument("--json-out", type=Path)
    p.add_argument("--mrr", choices=["fp32", "int8"], help="only: eval retrieval with this model")
    p.add_argument("--data", type=Path, help="the shared data folder (default data/)")
    args = p.parse_args()
    if args.mrr:
        path = args.work / ("minilm.onnx" if args.mrr == "fp32" else "minilm-int8.onnx")
        out = retrieval_mrr(path, f"onnxruntime-{args.mrr}", args.work / "eval-cache", args.data)
        text = json.dumps(out, indent=1, default=str)
        for c in out["chunkers"]:
            mrr = {m: round(v["over_questions"].get("MRR", -1), 4) for m, v in c["modes"].items()}
            print(f"{c['label']}: {c['chunks']} chunks, MRR {mrr}; embed {out['embed_seconds']} s")
        if args.json_out:
            args.json_out.write_text(text)
        return
    import torch
    from sentence_transformers import SentenceTransformer

    from litrag.models.embedders import minilm_path

    torch.set_num_threads(args.threads)
    texts = sample_texts(args.texts)
    words = sum(len(t.split()) for t in texts) / len(texts)
    print(f"{len(texts)} texts, mean {words:.0f} words; {args.threads} threads")
    st = SentenceTransformer(str(minilm_path()), device="cpu")
    results: dict[str, dict] = {}

    def report(name: str, vecs: np.ndarray, secs: float, ref: np.ndarray | None) -> None:
        row = {"seconds": round(secs, 2), "texts_per_s": round(len(texts) / secs, 1)}
        if ref is not None:
            cos = (vecs * ref).sum(1)
            row |= {"cos_mean": round(float(cos.mean()), 5), "cos_min": round(float(cos.min()), 5)}
        results[name] = row
        print(f"| {name} | " + " | ".join(str(v) for v in row.values()) + " |", flush=True)

    print("| runtime | seconds | texts/s | cos to torch (mean) | (min) |\n|---|---|---|---|---|")
    ref = None
    for bs in (16, 32, 64, 128):
        vecs, secs = timed(
            lambda ts, bs=bs: st.encode(ts, batch_size=bs, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False),
            texts,
        )  # fmt: skip
        report(f"torch batch {bs}", vecs, secs, ref)
        if ref is None:
            ref = vecs
    from litrag.models.openvino import OpenVINOSentenceModel, available

    if available():  # the library's own backend (WindowedEmbedding(backend="openvino"))
        for precision in ("f32", "bf16"):
            ov_model = OpenVINOSentenceModel(minilm_path(), threads=args.threads,
                                             precision=precision)  # fmt: skip
            vecs, secs = timed(lambda ts, m=ov_model: m.encode(ts, batch_size=32), texts)
            report(f"litrag openvino {precision} batch 32", vecs, secs, ref)
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        import onnxruntime as ort
    except ImportError:
        print("| onnxruntime | not installed |")
        return finish(args, texts, results)
    fp32 = args.work / "minilm.onnx"
    if not fp32.exists():
        export(minilm_path(), fp32)
    int8 = args.work / "minilm-int8.onnx"

    if not int8.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for name, path in (("onnxruntime fp32", fp32), ("onnxruntime int8", int8)):
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        for bs in (32, 64):
            fn = batched(lambda f, s=sess: s.run(None, f)[0], st.tokenizer, bs)
            vecs, secs = timed(fn, texts)
            report(f"{name} batch {bs}", vecs, secs, ref)
    try:
        import openvino as ov

        core = ov.Core()
        for name, path in (("openvino fp32", fp32), ("openvino int8 (ORT-quantised graph)", int8)):
            try:
                comp = core.compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": args.threads})
            except Exception as exc:  # an op the plugin does not take
                print(f"| {name} | not compiled: {type(exc).__name__} |")
                continue
            out = comp.output(0)
            fn = batched(lambda f, c=comp, o=out: c(f)[o], st.tokenizer, 32)
            vecs, secs = timed(fn, texts)
            report(f"{name} batch 32", vecs, secs, ref)
    except ImportError:
        print("| openvino | not installed |")
    finish(args, texts, results)


def finish(args: argparse.Namespace, texts: list[str], results: dict) -> None:
    if args.json_out:
        args.json_out.write_text(json.dumps({"texts": len(texts), "results": results}, indent=1))


if __name__ == "__main__":
    main()
