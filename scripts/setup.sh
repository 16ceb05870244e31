#!/usr/bin/env bash
# Create .venv (if needed) and install litrag with the extras named in $LITRAG_EXTRAS.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${LITRAG_EXTRAS:-dev,app,server,local-llm}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# CPU build of torch that lies on disk on these machines; a bare `torch` would pull CUDA.
# Installed first so no extra can pull another build; the base package itself needs no torch.
case ",$extras," in
  *,embeddings,*|*,app,*) .venv/bin/python -m pip install --quiet torch==2.13.0 ;;
esac
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
