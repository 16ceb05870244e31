#!/usr/bin/env bash
# litrag's production models on this GPU machine in one command: `vllm serve` for the generator
# (answers, judging) and the segmenter (LitSeg-Lite), and when asked the embedder and the
# reranker, then one settings file that points litrag at all of them (the LLMs through the vllm
# backend, llama-index-llms-vllm; /v1/embeddings and /v1/rerank directly). See docs/deploy.md.
#
#   bash scripts/deploy_vllm.sh                       # Qwen3.5-9B + Qwen3-4B-Instruct-2507
#   bash scripts/deploy_vllm.sh --all                 # + Qwen3-Embedding-0.6B + Qwen3-Reranker-0.6B
#   bash scripts/deploy_vllm.sh --generator Qwen/Qwen3-8B --segmenter none
#   bash scripts/deploy_vllm.sh --dry-run             # print the commands and the settings only
#   bash scripts/deploy_vllm.sh --stop                # stop what an earlier run started
#   source ~/.litrag/vllm.env && litrag chat
#
# Weights must be on this machine already (a Hugging Face model id found in the local cache, or
# a folder). --embedder / --reranker (or --all) serve Qwen3-Embedding / Qwen3-Reranker too
# (pooling runner): off unless asked for, since a served embedder needs the library embedded by
# it (litrag reembed --served) and the reranker adds a call to every question.
set -euo pipefail

generator="Qwen/Qwen3.5-9B"
segmenter="Qwen/Qwen3-4B-Instruct-2507"
embedder="none"
reranker="none"
host="${LITRAG_VLLM_HOST:-127.0.0.1}"
port="${LITRAG_VLLM_PORT:-8000}"          # generator; segmenter +1, embedder +2, reranker +3
gen_len="${LITRAG_GEN_MAX_LEN:-32768}"
seg_len="${LITRAG_SEG_MAX_LEN:-65536}"    # a LitSeg unit: up to 25,000 words (~33k tokens) + reply
home="${LITRAG_HOME:-$HOME/.litrag}"
settings=""
dry_run=0
stop=0
vllm_bin="${VLLM:-vllm}"

while [ $# -gt 0 ]; do
  case "$1" in
    --generator) generator="$2"; shift 2 ;;
    --segmenter) segmenter="$2"; shift 2 ;;
    --embedder) embedder="$2"; shift 2 ;;
    --reranker) reranker="$2"; shift 2 ;;
    --all)
      [ "$embedder" != none ] || embedder="Qwen/Qwen3-Embedding-0.6B"
      [ "$reranker" != none ] || reranker="Qwen/Qwen3-Reranker-0.6B"
      shift ;;
    --host) host="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --settings) settings="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --stop) stop=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
settings="${settings:-$home/vllm.env}"
run_dir="$home/vllm"
pids="$run_dir/pids"

if [ "$stop" = 1 ]; then
  [ -f "$pids" ] || { echo "nothing to stop ($pids not found)"; exit 0; }
  while read -r pid name; do
    if kill "$pid" 2>/dev/null; then echo "stopped $name (pid $pid)"; fi
  done < "$pids"
  rm -f "$pids"
  exit 0
fi

# The GPU's memory, shared by the models on it: fractions of one GPU (vLLM preallocates its
# share for weights and KV cache). The generator gets the most; pooling models need little.
roles=()
if [ "$segmenter" != none ]; then roles+=(segmenter); fi
if [ "$embedder" != none ]; then roles+=(embedder); fi
if [ "$reranker" != none ]; then roles+=(reranker); fi
gen_share=0.85
case "${#roles[@]}" in
  1) gen_share=0.50 ;;
  2) gen_share=0.45 ;;
  3) gen_share=0.40 ;;
esac
seg_share=0.35
if [ "${#roles[@]}" -gt 1 ]; then seg_share=0.30; fi
pool_share=0.08

key="${LITRAG_LLM_API_KEY:-}"
if [ -z "$key" ]; then
  key="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
fi

commands=()
names=()
add() {  # name, port, model, extra args...
  local name="$1" p="$2" model="$3"
  shift 3
  names+=("$name:$p")
  commands+=("$vllm_bin serve $model --host $host --port $p --api-key \$LITRAG_LLM_API_KEY $*")
}
add generator "$port" "$generator" --served-model-name "$generator" \
  --max-model-len "$gen_len" --gpu-memory-utilization "$gen_share"
if [ "$segmenter" != none ]; then
  add segmenter "$((port + 1))" "$segmenter" --served-model-name "$segmenter" \
    --max-model-len "$seg_len" --gpu-memory-utilization "$seg_share"
fi
if [ "$embedder" != none ]; then
  add embedder "$((port + 2))" "$embedder" --runner pooling --gpu-memory-utilization "$pool_share"
fi
if [ "$reranker" != none ]; then
  add reranker "$((port + 3))" "$reranker" --runner pooling --gpu-memory-utilization "$pool_share" \
    --hf_overrides "'{\"architectures\": [\"Qwen3ForSequenceClassification\"], \"classifier_from_token\": [\"no\", \"yes\"], \"is_original_qwen3_reranker\": true}'"
fi

write_settings() {
  mkdir -p "$(dirname "$settings")"
  umask 077  # it holds the API key
  {
    echo "# litrag settings for the vLLM servers started by scripts/deploy_vllm.sh ($(date -u +%F))"
    echo "# use: source $settings && litrag chat"
    echo "export LITRAG_LLM_BACKEND=vllm"
    echo "export LITRAG_LLM_URL=http://$host:$port/v1"
    echo "export LITRAG_LLM_MODEL=$generator"
    echo "export LITRAG_LLM_API_KEY=$key"
    echo "export LITRAG_LLM_CONTEXT=$gen_len"
    if [ "$segmenter" != none ]; then
      echo "export LITRAG_SEGMENT_URL=http://$host:$((port + 1))/v1"
      echo "export LITRAG_SEGMENT_MODEL=$segmenter"
    fi
    if [ "$embedder" != none ]; then
      echo "# $embedder embeds instead of the in-process model: a library built by another"
      echo "# embedder is refused until it is embedded again (litrag reembed --served)"
      echo "export LITRAG_EMBED_URL=http://$host:$((port + 2))/v1"
      echo "export LITRAG_EMBED_API_KEY=$key"
    fi
    if [ "$reranker" != none ]; then
      echo "# $reranker reranks the fused candidates of every question (/v1/rerank)"
      echo "export LITRAG_RERANK_URL=http://$host:$((port + 3))/v1"
      echo "export LITRAG_RERANK_API_KEY=$key"
    fi
  } > "$settings"
}

if [ "$dry_run" = 1 ]; then
  for i in "${!commands[@]}"; do echo "${names[$i]}: ${commands[$i]}"; done
  write_settings
  echo "settings: $settings"
  cat "$settings"
  exit 0
fi

if ! command -v "$vllm_bin" >/dev/null; then
  echo "error: $vllm_bin not found: install vLLM on this GPU machine (pip install vllm) or set VLLM" >&2
  exit 2
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "error: no NVIDIA GPU visible (nvidia-smi): vllm serve needs one" >&2
  exit 2
fi
mkdir -p "$run_dir"
: > "$pids"
export LITRAG_LLM_API_KEY="$key"
for i in "${!commands[@]}"; do
  name="${names[$i]%%:*}"
  log="$run_dir/$name.log"
  echo "starting $name: ${commands[$i]}  (log $log)"
  nohup bash -c "exec ${commands[$i]}" > "$log" 2>&1 &
  echo "$! $name" >> "$pids"
done
deadline=$((SECONDS + ${LITRAG_VLLM_STARTUP:-1800}))  # loading weights and compiling: minutes
for i in "${!names[@]}"; do
  name="${names[$i]%%:*}"
  p="${names[$i]##*:}"
  until curl -sf -H "Authorization: Bearer $key" "http://$host:$p/v1/models" >/dev/null; do
    pid="$(awk -v n="$name" '$2 == n {print $1}' "$pids")"
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "error: $name exited while starting; last lines of $run_dir/$name.log:" >&2
      tail -n 20 "$run_dir/$name.log" >&2
      exit 1
    fi
    if [ "$SECONDS" -gt "$deadline" ]; then
      echo "error: $name did not answer on port $p in time (log $run_dir/$name.log)" >&2
      exit 1
    fi
    sleep 5
  done
  echo "ready: $name on http://$host:$p/v1"
done
write_settings
echo "settings: $settings   (source it, then: litrag doctor && litrag chat)"
echo "stop with: bash scripts/deploy_vllm.sh --stop"
