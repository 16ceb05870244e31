#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run all of it.
#   bash scripts/test.sh [pytest args]     the whole suite (CI's command; ~40 minutes on 2 cores)
#   bash scripts/test.sh --quick [args]    the quick tier: `pytest -m quick`, a few real tests in
#                                          every room (parser, ingest, retrieval, answers, the
#                                          local LLM, the API, the CLI); minutes, once set up
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh  # a no-op when this setup is done already (a stamp in .venv)

if [ "${1:-}" = "--quick" ]; then
  shift
  echo "== lint"
  .venv/bin/ruff check litrag tests benchmarks integrations
  .venv/bin/ruff format --check litrag tests benchmarks integrations
  echo "== quick tests (pytest -m quick; the whole suite: bash scripts/test.sh)"
  set +e
  .venv/bin/python -m pytest -m quick "$@"
  rc=$?
  set -e
  if [ "$rc" -eq 5 ]; then
    echo "pytest collected no quick tests: failing" >&2
    exit 1
  fi
  exit "$rc"
fi

# The browser test drives Debian's chromium through playwright (no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing Debian's chromium for the browser test"
  sudo_=""
  if [ "$(id -u)" != 0 ]; then sudo_="sudo"; fi
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq chromium >/dev/null
fi

echo "== base install: 'from litrag import LitSegNodeParser' with base dependencies only"
base="$(mktemp -d)/base-venv"
python3 -m venv "$base"
"$base/bin/python" -m pip install --quiet --upgrade pip
"$base/bin/python" -m pip install --quiet .
(cd "$base" && "$base/bin/python" -c "
from litrag import LitSegNodeParser
from llama_index.core import Document
nodes = LitSegNodeParser().get_nodes_from_documents([Document(text='A dog ran. It barked.')])
assert nodes, 'no nodes'
import importlib.util, litrag.distill.rewards
assert not [m for m in ('trl', 'torch') if importlib.util.find_spec(m)], 'base install pulled trl/torch'
print('base import ok:', len(nodes), 'node(s)')
")

echo "== llama-index-node-parser-litseg: its wheel beside the base install, then its tests"
# The LlamaHub package is built as a wheel and installed into the venv above (litrag's lean base,
# nothing else); its tests run from outside the checkout, so they import what was installed.
integration="$PWD/integrations/llama-index-node-parser-litseg"
work="$(dirname "$base")"
"$base/bin/python" -m pip wheel --quiet --no-deps -w "$work/dist" "$integration"
"$base/bin/python" -m pip install --quiet "$work"/dist/llama_index_node_parser_litseg-*.whl pytest
(cd "$work" && "$base/bin/python" -c "
import sys
import llama_index.node_parser.litseg as package
from llama_index.node_parser.litseg import LitSegNodeParser
assert package.__file__.startswith(sys.prefix), package.__file__
print('integration import ok:', LitSegNodeParser.__module__, 'from', package.__file__)
")
set +e
(cd "$work" && timeout 600 "$base/bin/python" -m pytest -q -p no:cacheprovider \
  --rootdir "$integration" "$integration/tests")
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "the integration's pytest collected no tests: failing" >&2
  exit 1
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
rm -rf "$(dirname "$base")"

echo "== lint"
.venv/bin/ruff check litrag tests benchmarks integrations
.venv/bin/ruff format --check litrag tests benchmarks integrations

echo "== tests"
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
