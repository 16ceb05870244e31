"""Prefill and decode speed of llama.cpp builds side by side on the packaged model.

Each build is a folder holding a ``llama_cpp`` package (``pip install --target DIR --no-deps
WHEEL``), or ``installed`` for the one in this environment. Every run is a fresh child process
(the build is chosen by ``PYTHONPATH``), and builds take turns run by run so that a machine
getting busier or cooler does not favour one of them.

    python benchmarks/bench_llama_build.py --build portable=installed \\
        --build native=/tmp/native-site --model qwen2.5-coder-1.5b --repeats 5

Prints, per build, the compile-time CPU features and the median (min-max) of prefill and decode
tokens per second, then each build's ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
import llama_cpp
path, text = sys.argv[1], sys.argv[5]
n_prompt, n_gen, threads = (int(x) for x in sys.argv[2:5])
llm = llama_cpp.Llama(model_path=path, n_ctx=n_prompt + n_gen + 16, n_batch=512, n_threads=threads,
                      logits_all=False, verbose=False)
ids = llm.tokenize(open(text, encoding="utf-8").read().encode(), add_bos=True)[:n_prompt]
t0 = time.perf_counter(); llm.eval(ids); t1 = time.perf_counter()
for _ in range(n_gen):
    tok = llm.sample(temp=0.0)
    llm.eval([tok])
t2 = time.perf_counter()
print(json.dumps({"prefill_tps": len(ids) / (t1 - t0), "decode_tps": n_gen / (t2 - t1),
                  "system_info": llama_cpp.llama_print_system_info().decode(errors="replace")}))
"""


def model_path(name: str) -> Path:
    if Path(name).is_file():
        return Path(name)
    from litrag.models.llama_server import local_model_path

    return local_model_path(name)


def run_once(site: str, model: Path, args: argparse.Namespace, text: Path) -> dict:
    env = dict(os.environ)
    if site != "installed":
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [
        sys.executable, "-c", CHILD, str(model), str(args.prompt_tokens), str(args.gen_tokens),
        str(args.threads), str(text),
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"build at {site} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", action="append", required=True, help="NAME=DIR or NAME=installed")
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="packaged model name or GGUF path")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--gen-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    builds = [tuple(b.split("=", 1)) for b in args.build]
    model = model_path(args.model)
    text = Path(__file__).resolve().parent.parent / "litrag" / "data" / "pg215_call_of_the_wild.txt"
    runs: dict[str, list[dict]] = {name: [] for name, _ in builds}
    for r in range(args.repeats):
        for name, site in builds:
            runs[name].append(run_once(site, model, args, text))
            last = runs[name][-1]
            print(
                f"run {r + 1} {name}: prefill {last['prefill_tps']:.1f} tok/s, "
                f"decode {last['decode_tps']:.1f} tok/s",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"model {model.name}, {args.prompt_tokens}-token prompt, {args.gen_tokens} tokens "
        f"decoded, {args.threads} threads, {args.repeats} runs each"
    )
    base: dict[str, float] = {}
    for name, site in builds:
        rs = runs[name]
        print(f"\n{name} ({site}): {rs[0]['system_info'].strip()}")
        for key in ("prefill_tps", "decode_tps"):
            xs = [x[key] for x in rs]
            med = statistics.median(xs)
            base.setdefault(key, med)
            print(
                f"  {key.split('_')[0]:<8} median {med:7.1f} tok/s  (min {min(xs):.1f}, "
                f"max {max(xs):.1f})  ratio to {builds[0][0]}: {med / base[key]:.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
