#!/usr/bin/env bash
# Create .venv (if needed) and install litrag with the extras named in $LITRAG_EXTRAS.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${LITRAG_EXTRAS:-dev,local-llm}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# CPU build of torch that lies on disk on these machines; a bare `torch` would pull CUDA.
# Nothing in the base package needs torch; later extras pin it to this version.
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
