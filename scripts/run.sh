#!/usr/bin/env bash
# The main job: set up, then open the chat UI on the library in $LITRAG_HOME (default ~/.litrag).
# An empty library first gets the bundled public-domain novel (offline segmenter); answers come
# from the packaged local LLM (llama.cpp), or pass --no-llm for extractive answers.
#   bash scripts/run.sh [litrag chat options]      the chat UI on http://127.0.0.1:7860
#   bash scripts/run.sh segment [BOOK.txt]          the offline segmentation demo instead
set -euo pipefail
cd "$(dirname "$0")/.."
LITRAG_EXTRAS="${LITRAG_EXTRAS:-app,local-llm}" bash scripts/setup.sh
if [ "${1:-}" = "segment" ]; then
  shift
  exec .venv/bin/litrag segment "$@"
fi
exec .venv/bin/litrag chat "$@"
