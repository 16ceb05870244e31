#!/usr/bin/env bash
# The production path end to end on a GPU machine, with whatever real model is there: `vllm serve`
# it, then through litrag's vllm backend (llama-index-llms-vllm) measure decode and batch
# throughput, segment the bundled novel with LitSeg-Lite, and answer the ten Call of the Wild
# questions (key matches printed). On a machine without a GPU it says so and exits 0.
#
#   bash scripts/gpu_check.sh                        # the first model found (see below)
#   GPU_CHECK_MODEL=/models/Qwen3-4B-Instruct-2507 bash scripts/gpu_check.sh
#
# Model: $GPU_CHECK_MODEL, else the first Qwen3* / Qwen2.5* instruct model in the Hugging Face
# cache ($HF_HOME/hub). Python: $PYTHON (default .venv/bin/python, as scripts/setup.sh makes it,
# with LITRAG_EXTRAS including vllm); vLLM: $VLLM (default: vllm on PATH). Nothing is downloaded.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU on this machine (nvidia-smi finds none): nothing to check"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu: /'

py="${PYTHON:-.venv/bin/python}"
vllm_bin="${VLLM:-vllm}"
command -v "$py" >/dev/null 2>&1 || [ -x "$py" ] || { echo "gpu_check: $py not found (bash scripts/setup.sh)" >&2; exit 2; }
command -v "$vllm_bin" >/dev/null 2>&1 || { echo "gpu_check: vLLM ($vllm_bin) is not installed here" >&2; exit 2; }
echo "vllm: $("$vllm_bin" --version 2>/dev/null | tail -n 1)"

model="${GPU_CHECK_MODEL:-}"
if [ -z "$model" ]; then
  hub="${HF_HOME:-$HOME/.cache/huggingface}/hub"
  for d in "$hub"/models--Qwen--Qwen3*Instruct* "$hub"/models--Qwen--Qwen3-[0-9]*B "$hub"/models--Qwen--Qwen2.5*Instruct*; do
    if [ -d "$d/snapshots" ]; then
      model="$(basename "$d" | sed 's/^models--//; s/--/\//g')"
      break
    fi
  done
fi
if [ -z "$model" ]; then
  echo "gpu_check: no model weights found (set GPU_CHECK_MODEL to a folder or a cached model id)" >&2
  exit 3
fi
echo "model: $model"

work="$(mktemp -d)"
port="${GPU_CHECK_PORT:-8765}"
key="gpu-check-$RANDOM"
log="$work/vllm.log"
HF_HUB_OFFLINE=1 "$vllm_bin" serve "$model" --port "$port" --api-key "$key" \
  --max-model-len "${GPU_CHECK_MAX_LEN:-32768}" --gpu-memory-utilization 0.85 > "$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
t0=$SECONDS
until curl -sf -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/models" >/dev/null; do
  if ! kill -0 $server 2>/dev/null; then
    echo "gpu_check: vllm serve exited while starting:" >&2; tail -n 30 "$log" >&2; exit 1
  fi
  [ $((SECONDS - t0)) -gt 1200 ] && { echo "gpu_check: vllm serve not ready in 20 min" >&2; exit 1; }
  sleep 5
done
echo "vllm serve ready in $((SECONDS - t0)) s"

export LITRAG_HOME="$work/home" LITRAG_LLM_BACKEND=vllm LITRAG_LLM_URL="http://127.0.0.1:$port/v1"
export LITRAG_LLM_MODEL="$model" LITRAG_LLM_API_KEY="$key" LITRAG_LLM_CONTEXT="${GPU_CHECK_MAX_LEN:-32768}"
export LITRAG_LLM_TEMPERATURE=0 PATH="$(dirname "$py"):$PATH"
status=0

echo "== throughput through the vllm backend (VllmChatServer)"
"$py" - <<'EOF' || status=1
import asyncio, os, time
from llama_index.core.base.llms.types import ChatMessage
from litrag.models.served import server_llm

llm = server_llm("vllm", os.environ["LITRAG_LLM_URL"], os.environ["LITRAG_LLM_MODEL"],
                 max_tokens=256, temperature=0.7, api_key=os.environ["LITRAG_LLM_API_KEY"],
                 extra_body={"chat_template_kwargs": {"enable_thinking": False}}, timeout=600)
msg = [ChatMessage(role="user", content="Tell the story of a sled dog in the Klondike.")]
t = time.perf_counter(); r = llm.chat(msg); one = time.perf_counter() - t
n = r.additional_kwargs["completion_tokens"]
print(f"one stream: {n} tokens in {one:.1f} s = {n / one:.0f} tok/s")
async def many(k):
    t = time.perf_counter()
    rs = await asyncio.gather(*(llm.achat(msg) for _ in range(k)))
    return sum(x.additional_kwargs["completion_tokens"] for x in rs), time.perf_counter() - t
for k in (8, 32):
    toks, secs = asyncio.run(many(k))
    print(f"{k} concurrent: {toks} tokens in {secs:.1f} s = {toks / secs:.0f} tok/s")
EOF

echo "== LitSeg-Lite on the bundled novel (The Call of the Wild) through the vllm backend"
"$py" -m litrag.cli segment --llm-url "$LITRAG_LLM_URL" --model "$model" --llm-backend vllm \
  --workers 16 --quiet --out "$work/blocks.jsonl" --cache-dir "$work/cache" || status=1

echo "== the ten Call of the Wild questions (offline-segmented library, answers through vllm)"
LITRAG_LLM_BACKEND=local LITRAG_LLM_URL= "$py" -m litrag.cli ingest litrag/data/pg215_call_of_the_wild.txt -q || status=1
"$py" benchmarks/ask_questions.py --home "$LITRAG_HOME" --book pg215 \
  --questions benchmarks/questions/call_of_the_wild.txt --out "$work/answers.md" > /dev/null || status=1
"$py" - "$work/answers.md" <<'EOF' || status=1
import json, re, sys
keys = [json.loads(l)["key"] for l in open("benchmarks/questions/call_of_the_wild_keyed.jsonl")]
answers = [l for l in open(sys.argv[1]) if re.match(r"\d+\. \*\*", l)]
hits = 0
for key, line in zip(keys, answers):
    answer = line.split("→", 1)[-1].strip()
    ok = bool(re.search(key, answer, re.I)); hits += ok
    print(("match " if ok else "miss  ") + line.strip())
print(f"key matches: {hits} of {len(answers)} (a first grade: read the answers)")
EOF
echo "work folder: $work (server log $log)"
exit $status
