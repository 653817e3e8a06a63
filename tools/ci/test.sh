#!/usr/bin/env bash
# The one test command (README, .ci/run): install packages, build everything with warnings as errors (g++, and clang
# with AddressSanitizer + UBSan), run every test, build the SDK examples out of tree against the installed SDK, drive
# the HTTP server with the official openai npm client and a short load run, run the whole suite again under clang
# ASan+UBSan and the concurrency suites under g++ ThreadSanitizer, and fuzz every parser of untrusted input
# (tools/fuzz/targets.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/ci/setup.sh
jobs=$(nproc)
# Line tables only (-g1) instead of full debug info: sanitizer and gdb backtraces keep their file:line, and the three
# builds below compile about a quarter faster (CI must stay near 45 minutes on 2 cores).
line_tables=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
# llama.cpp as a peer (node-llama-cpp's prebuilt CPU build, ~80 MB from the npm registry) for tests/peer; the
# peer test skips with the reason when this install is not possible.
npm ci --prefix tools/peer --omit=optional --no-audit --no-fund || echo "warning: npm ci for tools/peer failed; the peer test will skip"
# Hugging Face's JavaScript tokenizers and Jinja engine (with the real Llama 3 and Qwen3 tokenizer.json) as the
# references of tests/reference and tests/chat.
npm ci --prefix tests/reference --no-audit --no-fund || echo "warning: npm ci for tests/reference failed; the Hugging Face reference tests will skip"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON "${line_tables[@]}"
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
bash tools/ci/build_sdk_examples.sh build
# The openai_http frontend as the official `openai` npm client sees it (version pinned by the lockfile).
(cd tests/http/node && npm ci --no-audit --no-fund && STRATA_RUNTIME="$PWD/../../../build/bin/runtime" npm test)
# A short load run (16 streaming clients for 10 s, every 10th hanging up mid-stream, beside 300 half-open connections
# that never finish their header): no other request may fail, the engine must be idle at the end with no KV block
# still held by a sequence, and the server must exit 0 on SIGINT.
node tools/load/http_load.mjs --smoke --half-open 300 --runtime build/bin/runtime \
  --model "${STRATA_MODEL:-${STRATA_SHARED_DIR:-../shared}/models/stories260K-f32.gguf}"
# clang 14 must build everything warning-free too, here with AddressSanitizer and UndefinedBehaviorSanitizer
# (-fno-sanitize-recover: the first finding fails its test); the same build carries the libFuzzer targets.
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON \
  -DSTRATA_BUILD_FUZZERS=ON -DSTRATA_SANITIZE=address,undefined "${line_tables[@]}"
cmake --build build-clang -j"$jobs"
# The two llama.cpp comparisons that drive the runtime through node-llama-cpp for minutes (greedy tokens and the
# vocab vectors) ran in the g++ pass above; here they would only repeat the same runtime paths several times slower.
echo "strata: the suite under clang AddressSanitizer + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-clang --output-on-failure -j"$jobs" -E '^peer_llamacpp_(greedy[.]|tokenize$)'
# The suites whose subject is concurrency (label tsan: engine batching and preemption, device pools, tier and
# prefetch I/O, the HTTP server, the KV store, I/O faults) under g++ ThreadSanitizer, built alone (strata_tsan_suite:
# those tests, the runtime, make-model and the plugins); second_deadlock_stack: both stacks of a lock-order report.
# The CUDA plugin is left out here: nvcc's code is not instrumented and no TSan suite loads it (the g++ build above
# compiles it warning-free, and the ASan+UBSan pass runs its kernels under host emulation).
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WERROR=ON -DSTRATA_SANITIZE=thread \
  -DSTRATA_WITH_CUDA=OFF "${line_tables[@]}"
cmake --build build-tsan -j"$jobs" --target strata_tsan_suite
echo "strata: the concurrency suites under g++ ThreadSanitizer"
# atexit_sleep_ms: TSan's default waits 1 s in every exiting process (each test and each server it starts) for
# threads still running; every component here joins its threads before exit, where TSan sees them, so 50 ms is kept.
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=50 ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L '^tsan$'
# Every fuzz target (tools/fuzz/targets.sh) for STRATA_FUZZ_SECONDS each, two at a time; a finding fails CI and its
# log's end is printed. The long campaigns are docs/FUZZING.md's.
bash tools/fuzz/campaign.sh build-clang --seconds "${STRATA_FUZZ_SECONDS:-36}" --jobs "$jobs"
echo "strata: all checks passed"
