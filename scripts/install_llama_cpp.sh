#!/usr/bin/env bash
# Install llama-cpp-python built to run on any CPU of this architecture, not only the build machine's.
#
#   bash scripts/install_llama_cpp.sh [PYTHON]        (default: .venv/bin/python)
#
# llama-cpp-python compiles llama.cpp from source with GGML_NATIVE=ON by default: `-march=native`
# bakes in every instruction the build machine advertises (AVX-512, AMX, ...). Such a build dies
# with "Illegal instruction" on a CPU without them, and on machines whose hypervisor advertises
# them but faults. This script builds with a fixed baseline instead:
#   x86-64: SSE4.2, AVX, AVX2, FMA, F16C, BMI2 (every x86-64 CPU since 2013-2015), nothing newer;
#   arm64 and others: GGML_NATIVE=OFF (the compiler's baseline for the architecture: NEON on arm64).
# LITRAG_LLAMA_CMAKE_ARGS replaces the flags (e.g. "-DGGML_NATIVE=ON" for a machine-tuned build).
#
# pip caches a built wheel by its name and version only, so a native wheel cached by an earlier
# install would be reused silently. The wheel is therefore built without pip's cache into a
# wheelhouse whose folder name carries a hash of the version, the Python tag and the flags
# ($LITRAG_WHEELHOUSE, default ~/.cache/litrag/wheels), and installed from there; the build's
# flags are written to <venv>/llama-cpp-build.json, which `litrag doctor` reports.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:-.venv/bin/python}"
version="0.3.36"

arch="$(uname -m)"
case "$arch" in
  x86_64|amd64)
    default_flags="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON"
    default_flags+=" -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF"
    default_flags+=" -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"
    default_flags+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    baseline="x86-64 AVX2 (SSE4.2 AVX AVX2 FMA F16C BMI2)" ;;
  *)
    default_flags="-DGGML_NATIVE=OFF"
    baseline="$arch compiler baseline (GGML_NATIVE=OFF)" ;;
esac
flags="${LITRAG_LLAMA_CMAKE_ARGS:-$default_flags}"
if [ -n "${LITRAG_LLAMA_CMAKE_ARGS:-}" ]; then baseline="custom (LITRAG_LLAMA_CMAKE_ARGS)"; fi

pytag="$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
tag="$(printf '%s|%s|%s|%s' "$version" "$pytag" "$arch" "$flags" | sha256sum | cut -c1-12)"
house="${LITRAG_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/litrag/wheels}/llama-cpp-python-$version-$tag"
prefix="$("$py" -c 'import sys; print(sys.prefix)')"
stamp="$prefix/llama-cpp-build.json"

if [ -f "$stamp" ] && grep -q "\"tag\": \"$tag\"" "$stamp" \
   && "$py" -c "import importlib.metadata as m; assert m.version('llama-cpp-python') == '$version'" \
      2>/dev/null; then
  exit 0  # this build is installed already
fi

wheel="$(ls "$house"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  echo "== building llama-cpp-python $version for $baseline (about 5 minutes on 2 cores)"
  tmp="$(mktemp -d)"
  CMAKE_ARGS="$flags" FORCE_CMAKE=1 "$py" -m pip wheel --quiet --no-deps --no-cache-dir \
    --no-binary llama-cpp-python "llama-cpp-python==$version" -w "$tmp"
  mkdir -p "$house"
  mv "$tmp"/llama_cpp_python-*.whl "$house"/
  rm -rf "$tmp"
  wheel="$(ls "$house"/llama_cpp_python-"$version"-*.whl | head -n1)"
fi
"$py" -m pip install --quiet --force-reinstall --no-deps "$wheel"
cat > "$stamp" <<EOF
{"package": "llama-cpp-python", "version": "$version", "tag": "$tag", "arch": "$arch",
 "baseline": "$baseline", "cmake_args": "$flags", "wheel": "$wheel"}
EOF
echo "== llama-cpp-python $version installed: $baseline"
