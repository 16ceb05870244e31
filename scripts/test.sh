#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run all of it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

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
rm -rf "$(dirname "$base")"

echo "== lint"
.venv/bin/ruff check litrag tests benchmarks
.venv/bin/ruff format --check litrag tests benchmarks

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
