#!/usr/bin/env bash
# llama.cpp's own HTTP server (llama-server) and its GGUF converter, for the served-rerank tests.
#
#   bash scripts/install_llama_server.sh [PYTHON]        (default: .venv/bin/python)
#
# tests/test_served_rerank.py talks to a real third-party /rerank server: llama-server started
# with --reranking on a tiny cross-encoder the test saves and converts to GGUF. llama-cpp-python's
# wheel has neither (its Python server has no /rerank, and the converter ships only in llama.cpp's
# source), so both come from the llama.cpp that llama-cpp-python's source package vendors: the
# same version as the installed library, built with the same CPU flags, which
# scripts/install_llama_cpp.sh wrote to <venv>/llama-cpp-build.json (run it first).
#
# Installs <venv>/bin/llama-server and <venv>/share/llama.cpp/ (convert_hf_to_gguf.py, conversion/,
# gguf-py/). The build is kept in $LITRAG_WHEELHOUSE (default ~/.cache/litrag/wheels), in a
# folder named by the library's build tag, and copied from there on the next install. Building
# took 11.5 CPU-minutes here (the whole library is compiled again, statically): about 6-10
# minutes on 2 free cores, an hour on cores shared with other work.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:-.venv/bin/python}"
prefix="$("$py" -c 'import sys; print(sys.prefix)')"
stamp="$prefix/llama-cpp-build.json"
if [ ! -f "$stamp" ]; then
  echo "error: $stamp not found: install llama-cpp-python first (bash scripts/install_llama_cpp.sh)" >&2
  exit 1
fi
read -r version tag flags < <("$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["version"], d["tag"], d["cmake_args"])' "$stamp")
house="${LITRAG_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/litrag/wheels}/llama-server-$version-$tag"

if [ ! -x "$house/llama-server" ]; then
  echo "== building llama.cpp's llama-server from llama-cpp-python $version's source (about 10 minutes)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$py" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$tmp"
  tar xzf "$tmp/llama_cpp_python-$version.tar.gz" -C "$tmp"
  src="$tmp/llama_cpp_python-$version/vendor/llama.cpp"
  cmake="$(command -v cmake || true)"
  if [ -z "$cmake" ]; then  # PyPI's cmake, as llama-cpp-python's own build would use
    "$py" -m pip install --quiet cmake
    cmake="$prefix/bin/cmake"
  fi
  # No web UI (it would be fetched from a hub), no TLS, no tests or examples: the server alone.
  # shellcheck disable=SC2086  # $flags is a list of -D options
  "$cmake" -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release $flags -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$tmp/cmake.log" 2>&1 \
    || { tail -20 "$tmp/cmake.log" >&2; exit 1; }
  "$cmake" --build "$tmp/build" --target llama-server -j"$(nproc)" >"$tmp/build.log" 2>&1 \
    || { tail -20 "$tmp/build.log" >&2; exit 1; }
  mkdir -p "$house.part/converter"
  cp "$tmp/build/bin/llama-server" "$house.part/"
  cp -r "$src/convert_hf_to_gguf.py" "$src/conversion" "$src/gguf-py" "$house.part/converter/"
  rm -rf "$house"
  mv "$house.part" "$house"
fi
install -m 755 "$house/llama-server" "$prefix/bin/llama-server"
mkdir -p "$prefix/share/llama.cpp"
cp -r "$house/converter/." "$prefix/share/llama.cpp/"
echo "== llama-server $version installed: $prefix/bin/llama-server"
