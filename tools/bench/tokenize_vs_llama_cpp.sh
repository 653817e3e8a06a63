#!/usr/bin/env bash
# Tokenization throughput of `runtime tokenize` next to llama.cpp's llama-tokenize on the same vocabulary and text,
# both whole processes (load the vocab, tokenize, print the ids), after checking that they print the same ids.
#   bash tools/bench/tokenize_vs_llama_cpp.sh [BUILD_DIR] [MEGABYTES] [RUNS]
# BUILD_DIR: Strata's build (default build); MEGABYTES: size of the generated text (default 16); RUNS: timed runs of
# each, alternating (default 5). llama-tokenize comes from tools/peer/build-llama-cpp.sh (built on first use).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
megabytes=${2:-16}
runs=${3:-5}
shared=${STRATA_SHARED_DIR:-../shared}
llama_bin=$(bash tools/peer/build-llama-cpp.sh llama-tokenize)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The text: the tests' mixed corpus (scripts, CJK, emoji, code, whitespace runs, digits), joined by newlines.
node -e '
  import("./tests/common/text_corpus.mjs").then(({ makeCorpus }) => {
    const target = Number(process.argv[1]) * 1048576;
    let parts = [], size = 0, seed = 1;
    while (size < target) { for (const s of makeCorpus(5000, seed++)) { parts.push(s); size += Buffer.byteLength(s) + 1; } }
    process.stdout.write(parts.join("\n"));
  });' "$megabytes" > "$work/text.txt"
echo "text: $(wc -c < "$work/text.txt") bytes"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN {print e - s}'; }

for vocab in llama-bpe qwen2 llama-spm; do
  model="$shared/models/vocab/ggml-vocab-$vocab.gguf"
  strata=("$build/bin/runtime" tokenize -m "$model" -f "$work/text.txt" --ids --no-escape)
  llama=("$llama_bin/llama-tokenize" -m "$model" -f "$work/text.txt" --ids --no-escape --log-disable)
  "${strata[@]}" > "$work/strata.ids"
  "${llama[@]}" 2>/dev/null > "$work/llama.ids"
  if ! cmp -s "$work/strata.ids" "$work/llama.ids"; then echo "$vocab: the ids differ; not timing" >&2; exit 1; fi
  tokens=$(tr -cd ',' < "$work/strata.ids" | wc -c)
  : > "$work/ts"; : > "$work/tl"
  for ((i = 0; i < runs; i++)); do
    seconds "${strata[@]}" >> "$work/ts"
    seconds "${llama[@]}" 2>/dev/null >> "$work/tl"
  done
  ts=$(median < "$work/ts"); tl=$(median < "$work/tl")
  awk -v v="$vocab" -v n="$((tokens + 1))" -v ts="$ts" -v tl="$tl" 'BEGIN {
    printf "%-10s %9d tokens  strata %6.2f s (%5.2f M tok/s)  llama.cpp %6.2f s (%5.2f M tok/s)  llama.cpp/strata time %.2f\n",
      v, n, ts, n / ts / 1e6, tl, n / tl / 1e6, tl / ts }'
done
