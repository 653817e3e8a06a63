#!/usr/bin/env bash
# Builds llama.cpp's own command-line tools (llama-tokenize, llama-bench, ...) from the source node-llama-cpp ships
# (tools/peer/node_modules/node-llama-cpp/llama/gitRelease.bundle, the same llama.cpp as the peer), CPU only, into a
# cache outside the repo, for side-by-side benchmarks. Prints the folder holding the binaries.
#   bash tools/peer/build-llama-cpp.sh [TARGET ...]     (default: llama-tokenize llama-bench)
#   STRATA_LLAMA_CPP_CACHE overrides the cache folder (default: ${XDG_CACHE_HOME:-~/.cache}/strata/llama.cpp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle="$here/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[[ -f $bundle ]] || { echo "build-llama-cpp: $bundle is missing; run: npm ci --prefix tools/peer --omit=optional" >&2; exit 77; }
cache=${STRATA_LLAMA_CPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/llama.cpp}
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(llama-tokenize llama-bench)
if [[ ! -d $cache/src/.git ]]; then
  mkdir -p "$cache"
  git clone -q "$bundle" "$cache/src" >&2
fi
commit=$(git -C "$cache/src" rev-parse --short HEAD)
build="$cache/build-$commit"
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$cache/src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >&2
fi
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)" >&2
echo "$build/bin"
