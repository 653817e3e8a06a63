#!/usr/bin/env bash
# Load speed of an HF checkpoint folder next to the same weights as GGUF (#14): time from starting `runtime` to its
# first generated token (process start, open and map, plan, tokenizer, one prompt token, one output token), warm page
# cache, best of N runs each, alternating. Usage:
#   tools/bench/hf_load_vs_gguf.sh [BUILD_DIR=build] [RUNS=5]
# The model: make-model's Llama shape at about 0.8B parameters (dim 2048, 16 layers, ff 5632, Llama 2 vocabulary),
# F16 matrices, written once into ~/.cache/strata/hf-load-bench, and tools/hf-export's copy of it in 3 shards.
set -euo pipefail
build=${1:-build}
runs=${2:-5}
dir=${STRATA_BENCH_DIR:-$HOME/.cache/strata/hf-load-bench}
mkdir -p "$dir"
gguf=$dir/llama-0.8b-f16.gguf
hf=$dir/llama-0.8b-f16-hf
[ -f "$gguf" ] || "$build/bin/make-model" --out "$gguf" --dim 2048 --layers 16 --heads 16 --kv-heads 4 --ff 5632 \
  --ctx 2048 --type f16
[ -f "$hf/config.json" ] || "$build/bin/hf-export" "$gguf" "$hf" --shards 3
cat "$gguf" "$hf"/*.safetensors >/dev/null # warm the page cache
one() { # seconds from start to exit after one generated token
  local t0 t1
  t0=$(date +%s.%N)
  "$build/bin/runtime" --model "$1" --prompt "Hello" --max-tokens 1 --temperature 0 --kv-cache-memory 64MiB \
    --log-level warn >/dev/null 2>&1
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }'
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b ? a : b) }'; }
best_g=999 best_h=999
for _ in $(seq "$runs"); do
  g=$(one "$gguf"); h=$(one "$hf")
  best_g=$(min "$g" "$best_g")
  best_h=$(min "$h" "$best_h")
done
printf 'GGUF  %s: %.3f s to the first token (best of %s)\n' "$(du -h "$gguf" | cut -f1)" "$best_g" "$runs"
printf 'HF    %s in 3 shards: %.3f s (best of %s)\n' "$(du -sh "$hf" | cut -f1)" "$best_h" "$runs"
awk -v h="$best_h" -v g="$best_g" 'BEGIN { printf "HF / GGUF: %.2f\n", h / g }'
