#!/usr/bin/env bash
# The one test command (README, .ci/run): install packages, build everything with warnings as errors (g++ and
# clang), run every test, build the SDK examples out of tree against the installed SDK, and fuzz the GGUF parser.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/ci/setup.sh
jobs=$(nproc)
# llama.cpp as a peer (node-llama-cpp's prebuilt CPU build, ~80 MB from the npm registry) for tests/peer; the
# peer test skips with the reason when this install is not possible.
npm ci --prefix tools/peer --omit=optional --no-audit --no-fund || echo "warning: npm ci for tools/peer failed; the peer test will skip"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
bash tools/ci/build_sdk_examples.sh build
# clang 14 must build everything warning-free too; the same build carries the libFuzzer target for the GGUF parser.
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON \
  -DSTRATA_BUILD_FUZZERS=ON
cmake --build build-clang -j"$jobs"
bash tools/fuzz/run_fuzz_gguf.sh build-clang "${STRATA_FUZZ_SECONDS:-60}"
echo "strata: all checks passed"
