#!/usr/bin/env bash
# The one test command (README, .ci/run): install packages, build everything with warnings as errors (g++ and
# clang), run every test, build the SDK examples out of tree against the installed SDK, and fuzz the GGUF parser.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/ci/setup.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
bash tools/ci/build_sdk_examples.sh build
# The openai_http frontend as the official `openai` npm client sees it (version pinned by the lockfile).
(cd tests/http/node && npm ci --no-audit --no-fund && STRATA_RUNTIME="$PWD/../../../build/bin/runtime" npm test)
# clang 14 must build everything warning-free too; the same build carries the libFuzzer target for the GGUF parser.
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON \
  -DSTRATA_BUILD_FUZZERS=ON
cmake --build build-clang -j"$jobs"
bash tools/fuzz/run_fuzz_gguf.sh build-clang "${STRATA_FUZZ_SECONDS:-60}"
echo "strata: all checks passed"
