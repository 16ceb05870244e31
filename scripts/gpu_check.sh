#!/usr/bin/env bash
# The production path end to end on a GPU machine, with whatever real model is there: `vllm serve`
# it, then through litrag's vllm backend (llama-index-llms-vllm) measure decode and batch
# throughput, segment the bundled novel with LitSeg-Lite, and answer the ten Call of the Wild
# questions (key matches printed). Where an embedding and a reranking model are cached too, it
# serves them beside the generator (pooling runner) and measures embedding throughput through
# LITRAG_EMBED_URL and reranking cost through LITRAG_RERANK_URL, then answers through both: every
# figure docs/deploy.md gives as an estimate. On a machine without a GPU it says so and exits 0.
# About 10 minutes with 0.6-9B models on one H100-class GPU (most of it vllm serve starting).
#
#   bash scripts/gpu_check.sh                        # the first models found (see below)
#   GPU_CHECK_MODEL=/models/Qwen3-4B-Instruct-2507 bash scripts/gpu_check.sh
#   GPU_CHECK_EMBED_MODEL=none GPU_CHECK_RERANK_MODEL=none bash scripts/gpu_check.sh  # LLM only
#
# Embedder: $GPU_CHECK_EMBED_MODEL, else the first Qwen3-Embedding* in the cache; reranker:
# $GPU_CHECK_RERANK_MODEL, else the first Qwen3-Reranker* (served with vLLM's Qwen3-Reranker
# recipe) or bge-reranker* (a plain cross-encoder).
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
cached() {  # the first cached model id matching the patterns, or nothing
  local hub="${HF_HOME:-$HOME/.cache/huggingface}/hub" d
  for pat in "$@"; do
    for d in "$hub"/models--$pat; do
      if [ -d "$d/snapshots" ]; then basename "$d" | sed 's/^models--//; s/--/\//g'; return; fi
    done
  done
}
embed_model="${GPU_CHECK_EMBED_MODEL:-$(cached 'Qwen--Qwen3-Embedding*')}"
rerank_model="${GPU_CHECK_RERANK_MODEL:-$(cached 'Qwen--Qwen3-Reranker*' 'BAAI--bge-reranker*')}"
[ "$embed_model" = none ] && embed_model=""
[ "$rerank_model" = none ] && rerank_model=""
echo "embedder: ${embed_model:-none found}; reranker: ${rerank_model:-none found}"

work="$(mktemp -d)"
port="${GPU_CHECK_PORT:-8765}"
key="gpu-check-$RANDOM"
log="$work/vllm.log"
share=0.85
if [ -n "$embed_model$rerank_model" ]; then share=0.65; fi
servers=()
serve() {  # log, port, model, args...: vllm serve in the background, all started at once
  local out="$1" p="$2" m="$3"
  shift 3
  HF_HUB_OFFLINE=1 "$vllm_bin" serve "$m" --port "$p" --api-key "$key" "$@" > "$out" 2>&1 &
  servers+=($!)
}
serve "$log" "$port" "$model" --max-model-len "${GPU_CHECK_MAX_LEN:-32768}" \
  --gpu-memory-utilization "$share"
if [ -n "$embed_model" ]; then
  serve "$work/embed.log" $((port + 2)) "$embed_model" --runner pooling --gpu-memory-utilization 0.1
fi
if [ -n "$rerank_model" ]; then
  recipe=()
  case "$rerank_model" in
    *Qwen3-Reranker*) recipe=(--hf_overrides '{"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"], "is_original_qwen3_reranker": true}') ;;
  esac
  serve "$work/rerank.log" $((port + 3)) "$rerank_model" --runner pooling \
    --gpu-memory-utilization 0.1 "${recipe[@]}"
fi
trap 'kill "${servers[@]}" 2>/dev/null; wait "${servers[@]}" 2>/dev/null' EXIT
t0=$SECONDS
for p in "$port" ${embed_model:+$((port + 2))} ${rerank_model:+$((port + 3))}; do
  until curl -sf -H "Authorization: Bearer $key" "http://127.0.0.1:$p/v1/models" >/dev/null; do
    for pid in "${servers[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "gpu_check: a vllm serve exited while starting:" >&2
        tail -n 30 "$log" "$work"/embed.log "$work"/rerank.log 2>/dev/null >&2; exit 1
      fi
    done
    [ $((SECONDS - t0)) -gt 1200 ] && { echo "gpu_check: vllm serve not ready in 20 min" >&2; exit 1; }
    sleep 5
  done
done
echo "vllm serve ready in $((SECONDS - t0)) s (every server)"

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

if [ -n "$embed_model$rerank_model" ]; then
  echo "== embedding and reranking throughput through the served endpoints"
  GC_EMBED="${embed_model:+http://127.0.0.1:$((port + 2))/v1}" \
  GC_RERANK="${rerank_model:+http://127.0.0.1:$((port + 3))/v1}" "$py" - <<'EOF' || status=1
import os, statistics, time
from litrag.ingestion.gutenberg import load_book
from litrag.models.served_embeddings import ServedEmbedding
from litrag.retrieval.rerank import ServedReranker

key = os.environ["LITRAG_LLM_API_KEY"]
text = load_book("litrag/data/pg215_call_of_the_wild.txt").text
chunks, cur = [], []
for p in (" ".join(p.split()) for p in text.split("\n\n")):  # ~300-word passages: a block
    if p:
        cur.append(p)
    if sum(len(c.split()) for c in cur) >= 300:
        chunks.append(" ".join(cur))
        cur = []
words = sum(len(c.split()) for c in chunks)
if os.environ.get("GC_EMBED"):
    embed = ServedEmbedding.from_server(os.environ["GC_EMBED"], api_key=key, batch_size=64)
    t = time.perf_counter()
    embed.get_text_embedding_batch(chunks)
    secs = time.perf_counter() - t
    print(f"embedding: the novel's {len(chunks)} passages ({words} words) in {secs:.1f} s = "
          f"{len(chunks) / secs:.0f} passages/s, {words / secs:,.0f} words/s ({embed.model_name})")
if os.environ.get("GC_RERANK"):
    rerank = ServedReranker(url=os.environ["GC_RERANK"], api_key=key, timeout=60)
    questions = [q.strip() for q in open("data/questions/call_of_the_wild.txt") if q.strip()]
    times = []
    for i, q in enumerate(questions * 2):
        docs = [chunks[(7 * i + 13 * j) % len(chunks)] for j in range(20)]
        t = time.perf_counter()
        rerank.rank(q, docs, 5)
        times.append(time.perf_counter() - t)
    p50 = statistics.median(times)
    print(f"rerank: 20 passages a question, {len(times)} questions: p50 {p50:.3f} s, "
          f"max {max(times):.3f} s = {20 / p50:.0f} passages/s ({rerank.served_model()})")
EOF
  # the ten questions below are then ingested and answered through both servers
  if [ -n "$embed_model" ]; then
    export LITRAG_EMBED_URL="http://127.0.0.1:$((port + 2))/v1" LITRAG_EMBED_API_KEY="$key"
  fi
  if [ -n "$rerank_model" ]; then
    export LITRAG_RERANK_URL="http://127.0.0.1:$((port + 3))/v1" LITRAG_RERANK_API_KEY="$key"
  fi
fi

echo "== LitSeg-Lite on the bundled novel (The Call of the Wild) through the vllm backend"
"$py" -m litrag.cli segment --llm-url "$LITRAG_LLM_URL" --model "$model" --llm-backend vllm \
  --workers 16 --quiet --out "$work/blocks.jsonl" --cache-dir "$work/cache" || status=1

echo "== the ten Call of the Wild questions (offline-segmented library, answers through vllm)"
t1=$SECONDS
LITRAG_LLM_BACKEND=local LITRAG_LLM_URL= "$py" -m litrag.cli ingest litrag/data/pg215_call_of_the_wild.txt -q || status=1
echo "ingest (offline segmenter, ${LITRAG_EMBED_URL:+served }embedding): $((SECONDS - t1)) s"
"$py" benchmarks/ask_questions.py --home "$LITRAG_HOME" --book pg215 \
  --questions data/questions/call_of_the_wild.txt --out "$work/answers.md" > /dev/null || status=1
"$py" - "$work/answers.md" <<'EOF' || status=1
import json, re, sys
keys = [json.loads(l)["key"] for l in open("data/questions/call_of_the_wild_keyed.jsonl")]
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
