#!/usr/bin/env bash
# The main job: set up, then cut the bundled public-domain novel into plot blocks, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
LITRAG_EXTRAS="${LITRAG_EXTRAS:-app}" bash scripts/setup.sh
exec .venv/bin/litrag segment "$@"
