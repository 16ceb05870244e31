#!/usr/bin/env bash
# Create .venv (if needed) and install litrag with the extras named in $LITRAG_EXTRAS.
set -euo pipefail
cd "$(dirname "$0")/.."
# rerank-server (llama.cpp's llama-server, 6-10 minutes of compiling on 2 cores) is not among the
# defaults: CI's budget. LITRAG_EXTRAS=...,rerank-server adds it; tests/test_served_rerank.py's
# real-server tests skip without it (its fallback tests need no server and always run).
extras="${LITRAG_EXTRAS:-dev,app,server,local-llm,eval,vllm,openai,distill,narrative,quality,scale}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# Done already? A stamp in .venv names what the last complete setup installed: these extras from
# this pyproject.toml by these scripts. The same again is a no-op (seconds, not minutes), so
# `scripts/test.sh --quick` and `scripts/run.sh` start at once; LITRAG_SETUP_FORCE=1 reinstalls.
stamp_key="$(cat pyproject.toml scripts/setup.sh scripts/install_llama_cpp.sh \
  scripts/install_llama_server.sh | sha256sum | cut -c1-16)-$(printf %s "$extras" | sha256sum | cut -c1-8)"
stamp=".venv/.litrag-setup-$stamp_key"
if [ -f "$stamp" ] && [ "${LITRAG_SETUP_FORCE:-0}" != 1 ]; then
  echo "== setup: up to date ($stamp)"
  exit 0
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# CPU build of torch that lies on disk on these machines; a bare `torch` would pull CUDA.
# Installed first so no extra can pull another build; the base package itself needs no torch.
case ",$extras," in
  *,embeddings,*|*,app,*|*,eval,*|*,distill,*|*,rerank-server,*) .venv/bin/python -m pip install --quiet torch==2.13.0 ;;
esac
# llama.cpp built for a portable CPU baseline, never -march=native (see the script), before the
# extra that names it, so pip finds it installed and neither builds nor reuses a cached native wheel.
case ",$extras," in
  *,local-llm,*|*,quality,*|*,rerank-server,*) bash scripts/install_llama_cpp.sh .venv/bin/python ;;
esac
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
# llama.cpp's own server for the served-rerank tests, from the same llama.cpp as the library
# above (built once, ~10 minutes; kept in the wheelhouse beside the library's wheel).
case ",$extras," in
  *,rerank-server,*) bash scripts/install_llama_server.sh .venv/bin/python ;;
esac

# METEOR's synonym stage reads WordNet from disk (nothing downloads it at run time): Debian's
# wordnet-base dictionary in /usr/share/wordnet. Without it METEOR says so and matches exact and
# stemmed words only. Needs root (CI and these machines are root); elsewhere, install it yourself
# or point LITRAG_WORDNET at any WordNet 3.0 dict folder.
case ",$extras," in
  *,eval,*)
    if [ ! -f /usr/share/wordnet/data.noun ] && command -v apt-get >/dev/null; then
      if [ "$(id -u)" = 0 ]; then
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
          -o DPkg::Lock::Timeout=300 --no-install-recommends wordnet-base >/dev/null \
          || echo "warning: apt-get install wordnet-base failed: METEOR will run without WordNet" >&2
      else
        echo "note: METEOR wants WordNet: sudo apt-get install wordnet-base (or set LITRAG_WORDNET)" >&2
      fi
    fi ;;
esac

touch "$stamp"
