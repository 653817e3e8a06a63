#!/usr/bin/env bash
# The one test command (README, .ci/run): install packages, build everything with warnings as errors (g++ and
# clang), run every test, build the SDK examples out of tree against the installed SDK, drive the HTTP server with the
# official openai npm client and a short load run, and fuzz the GGUF and HTTP request parsers and the KV prefix
# store's entry reader.
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
# The openai_http frontend as the official `openai` npm client sees it (version pinned by the lockfile).
(cd tests/http/node && npm ci --no-audit --no-fund && STRATA_RUNTIME="$PWD/../../../build/bin/runtime" npm test)
# A short load run (16 streaming clients for 10 s, every 10th hanging up mid-stream): no other request may fail, the
# engine must be idle at the end with no KV block still held by a sequence, and the server must exit 0 on SIGINT.
node tools/load/http_load.mjs --smoke --runtime build/bin/runtime \
  --model "${STRATA_MODEL:-${STRATA_SHARED_DIR:-../shared}/models/stories260K-f32.gguf}"
# clang 14 must build everything warning-free too; the same build carries the libFuzzer target for the GGUF parser.
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON \
  -DSTRATA_BUILD_FUZZERS=ON
cmake --build build-clang -j"$jobs"
fuzz_seconds=${STRATA_FUZZ_SECONDS:-60}
# GGUF files: writer-made seeds plus a real model (longer than max_len: the fuzzer sees its header, KVs and tensor
# infos).
bash tools/fuzz/run_fuzz.sh build-clang "$fuzz_seconds" fuzz_gguf 65536 make_fuzz_seeds \
  "${STRATA_SHARED_DIR:-../shared}/models/stories260K-q4_0.gguf"
# Arbitrary bytes as a KV prefix store entry file (48 + 16 + 64 bytes), read through the real store.
bash tools/fuzz/run_fuzz.sh build-clang "$fuzz_seconds" fuzz_kv_entry 4096 make_kv_fuzz_seed
# HTTP request bytes through Beast's parser and the openai_http request parsers.
bash tools/fuzz/run_fuzz.sh build-clang "$fuzz_seconds" fuzz_http_request 65536
echo "strata: all checks passed"
