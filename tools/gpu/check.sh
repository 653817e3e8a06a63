#!/usr/bin/env bash
# The GPU check of the cuda device plugin, as one script for a machine with an NVIDIA GPU (issue #6):
#   1. build with CUDA (or use a pack made by tools/gpu/pack.sh),
#   2. run test_cuda_device (every op against the CPU device, paged attention, copies, fences, and the engine on the
#      GPU: stories260K greedy tokens equal to the CPU's, streamed layers, KV swap),
#   3. measure pinned and pageable host<->device bandwidth and device memory bandwidth (gpu-bandwidth),
#   4. run a ~0.9B-parameter Llama-shaped forward pass through the plugin's ops (gpu-decode-bench: prefill, decode),
#   5. make a model of that shape with make-model and measure CPU decode with bench (the baseline on this machine),
#   6. compare greedy stories260K tokens on cpu and cuda (float32, float16, bfloat16, fp8_e4m3 and fp8_e5m2 KV; q8_0 KV
#      on the made model), run the engine on the cuda device (runtime --device cuda),
#      then bench --device cuda with 0, 8 and 16 of the 16
#      layers offloaded to pinned_ram and streamed H2D, against the pinned H2D bound, and with the offloaded 8 computed
#      on the CPU instead (hybrid placement, --offload-compute cpu and auto), against the hybrid bound.
# Every figure comes from a command's own output; nothing is estimated. Logs go to $OUT (default ./gpu-out), at most
# 8 files; the table is printed last and kept in $OUT/summary.txt.
#
#   tools/gpu/check.sh [--prebuilt PACK_DIR | --build-dir DIR [--no-build]] [--jobs 16] [--quick] [--vocab F.gguf]
#                      [--budget 540]
#
# --budget is the wall time (seconds) the whole script may take: each step gets at most what is left (a hung kernel
# cannot eat a device lease), and steps that would start with under 20 s left are reported as not run, so the table
# is always written.
# --prebuilt runs the executables of a pack through its own glibc loader (see pack.sh); the default builds into
# build-gpu with -DSTRATA_WITH_CUDA=ON. --quick skips the f16 forward pass and steps 5-6.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
prebuilt="" build_dir=build-gpu no_build=0 jobs=16 quick=0 vocab="" budget=540
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) no_build=1; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --vocab) vocab=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "check.sh: unknown option $1 (see the header of tools/gpu/check.sh)" >&2; exit 2 ;;
  esac
done

deadline=$(($(date +%s) + budget))
# limit N: a step's timeout, N seconds or what is left of the budget (0 when under 20 s are left).
limit() {
  local left=$((deadline - $(date +%s) - 5))
  if [ "$left" -lt 20 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
out_of_time="not run: the --budget of ${budget} s is spent"

declare -a rows=()
row() { rows+=("$1|$2"); }
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
# Value of `key value` in a log (empty when absent).
value_of() { awk -v k="$1" '$1 == k {sub("^[^ ]+ ", ""); print; exit}' "$2" 2>/dev/null; }

note "strata GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if command -v nvidia-smi >/dev/null 2>&1; then
  note "$(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | head -4)"
else
  note "nvidia-smi: not found"
fi
command -v nvcc >/dev/null 2>&1 && note "$(nvcc --version | tail -1)"

# ---- 1. the executables ----
if [ -n "$prebuilt" ]; then
  pack=$(cd "$prebuilt" && pwd) || { echo "check.sh: no pack at $prebuilt" >&2; exit 2; }
  bin_dir=$pack/bin
  plugin_dir=$pack/plugins
  loader=$pack/glibc/ld-linux-x86-64.so.2
  # cmd EXE: the command line that starts EXE, in the array CMD.
  cmd() { CMD=("$loader" --library-path "$pack/glibc:$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin_dir/$1"); }
  [ -z "$vocab" ] && [ -f "$pack/vocab/ggml-vocab-llama-spm.gguf" ] && vocab=$pack/vocab/ggml-vocab-llama-spm.gguf
  row "build" "prebuilt pack ($(head -1 "$pack/MANIFEST.txt" 2>/dev/null))"
else
  bin_dir=$root/$build_dir/bin
  plugin_dir=$root/$build_dir/plugins
  cmd() { CMD=("$bin_dir/$1"); }
  if [ "$no_build" = 1 ]; then
    row "build" "existing $build_dir (--no-build)"
  else
    start=$(date +%s)
    {
      # No -Werror here: another compiler's new warnings must not stop a measurement (CI enforces them).
      cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WITH_CUDA=ON &&
        cmake --build "$build_dir" -j"$jobs" --target runtime bench make-model test_cuda_device gpu-bandwidth \
          gpu-decode-bench strata_cuda strata_device_cpu strata_quant_ggml strata_model_decoder strata_frontend_cli \
          strata_tier_numa_ram strata_tier_pinned_ram strata_tier_nvme
    } >"$OUT/build.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      row "build" "FAILED (rc $rc, see build.log: $(grep -m1 -iE 'error|could not' "$OUT/build.log" | cut -c1-120))"
    else
      row "build" "ok in $(($(date +%s) - start)) s (-j$jobs)"
    fi
  fi
fi
have() { [ -x "$bin_dir/$1" ]; }
# The shared models (stories260K for the engine tests and step 6): $STRATA_SHARED_DIR, a pack's own copy (pack.sh),
# or the checkout's neighbours.
shared_dir=""
for d in "${STRATA_SHARED_DIR:-}" "${pack:-/nonexistent}" "$root/shared" "$root/../shared"; do
  if [ -n "$d" ] && [ -f "$d/models/stories260K-f32.gguf" ]; then shared_dir=$(cd "$d" && pwd); break; fi
done

# ---- 2. tests ----
if have test_cuda_device; then
  cmd test_cuda_device
  t=$(limit 240)
  if [ "$t" = 0 ]; then echo "$out_of_time" >"$OUT/tests.log"; rc=124; else
    STRATA_TEST_PLUGIN_DIR=$plugin_dir STRATA_SHARED_DIR=$shared_dir timeout "$t" "${CMD[@]}" >"$OUT/tests.log" 2>&1
    rc=$?
  fi
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$OUT/tests.log" | grep -oE '[0-9]+$')
  failed=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$OUT/tests.log" | grep -oE '[0-9]+' | head -1)
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$OUT/tests.log" | grep -oE '[0-9]+' | head -1)
  skip_note=""
  [ "${skipped:-0}" != 0 ] && skip_note="; skipped tests mean no usable GPU, see their reason in tests.log"
  if [ "$t" = 0 ]; then row "test_cuda_device" "$out_of_time"
  else row "test_cuda_device" "rc $rc: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped$skip_note"; fi
else
  row "test_cuda_device" "not run: no test_cuda_device in $bin_dir"
fi

# ---- 3. bandwidth ----
bw="$OUT/bandwidth.log"
cmd gpu-bandwidth
t=$(limit 120)
[ "$t" = 0 ] && echo "$out_of_time" >"$bw"
if have gpu-bandwidth && [ "$t" != 0 ] && timeout "$t" "${CMD[@]}" --mib 1024 --repeat 5 >"$bw" 2>&1; then
  for k in h2d_pinned d2h_pinned h2d_pageable d2h_pageable; do
    row "$k" "$(value_of ${k}_gbps "$bw") GB/s (1 GiB copies, best of 5)"
  done
  row "device memory" "$(value_of device_memory_gbps "$bw") GB/s (device-to-device copy, bytes read + written)"
elif [ "$t" = 0 ]; then
  row "bandwidth" "$out_of_time"
else
  row "bandwidth" "FAILED: $(tail -1 "$bw" 2>/dev/null)"
fi
device_gbps=$(value_of device_memory_gbps "$bw")

# ---- 4. forward passes through the plugin's ops ----
# The same shape as the model of step 5: 16 layers, dim 2048, ff 5632, vocab 32000 (about 0.89B parameters with an
# untied output matrix; make-model ties it to the embedding).
fb="$OUT/decode_bench.log"
: >"$fb"
types=(q8_0 q4_0)
[ "$quick" = 0 ] && types+=(f16)
for t in "${types[@]}"; do
  one="$OUT/.decode_$t"
  cmd gpu-decode-bench
  lim=$(limit 120)
  [ "$lim" = 0 ] && echo "$out_of_time" >"$one"
  if [ "$lim" != 0 ] && timeout "$lim" "${CMD[@]}" --dim 2048 --layers 16 --heads 16 --kv-heads 16 --ff 5632 \
      --vocab 32000 --type "$t" --context 512 --tokens 64 >"$one" 2>&1; then
    gbps=$(value_of decode_weight_gbps "$one")
    pct=""
    [ -n "$device_gbps" ] && pct=$(awk -v a="$gbps" -v b="$device_gbps" 'BEGIN {if (b > 0) printf ", %.0f%% of device memory bandwidth", 100 * a / b}')
    row "ops decode $t" "$(value_of decode_tokens_per_s "$one") tok/s ($(value_of decode_ms_per_token "$one") ms/token, weights read at $gbps GB/s$pct; logits finite: $(value_of logits_finite "$one"))"
    row "ops prefill $t" "$(value_of prefill_tokens_per_s "$one") tok/s (512-token batch)"
  elif [ "$lim" = 0 ]; then
    row "ops $t" "$out_of_time"
  else
    row "ops $t" "FAILED: $(tail -1 "$one")"
  fi
  { echo "== $t"; cat "$one"; } >>"$fb"
  rm -f "$one"
done

# ---- 5. CPU baseline on a model of that shape ----
model_dir=${TMPDIR:-/tmp}/strata-gpu-check
model=$model_dir/model-1b-q8_0.gguf
cb="$OUT/cpu_bench.log"
if [ "$quick" = 1 ]; then
  row "CPU decode q8_0 (bench)" "not measured: --quick"
else
  for f in "$vocab" "${STRATA_SHARED_DIR:-}/models/vocab/ggml-vocab-llama-spm.gguf" \
           "$root/shared/models/vocab/ggml-vocab-llama-spm.gguf" "$root/../shared/models/vocab/ggml-vocab-llama-spm.gguf"; do
    if [ -n "$f" ] && [ -f "$f" ]; then vocab=$f; break; fi
  done
  mkdir -p "$model_dir"
  if [ -z "$vocab" ] || [ ! -f "$vocab" ]; then
    row "CPU decode q8_0 (bench)" "not measured: no vocabulary GGUF for make-model (pass --vocab)"
  elif [ "$(limit 180)" = 0 ]; then
    row "CPU decode q8_0 (bench)" "$out_of_time"
  elif ! { cmd make-model && timeout "$(limit 180)" "${CMD[@]}" --out "$model" --dim 2048 --layers 16 --heads 16 \
      --kv-heads 16 --ff 5632 --ctx 2048 --type q8_0 --vocab-from "$vocab" >"$cb" 2>&1; }; then
    row "CPU decode q8_0 (bench)" "not measured: make-model failed: $(tail -1 "$cb")"
  else
    threads=$(nproc)
    cmd bench
    if [ "$(limit 240)" = 0 ]; then
      row "CPU decode q8_0 (bench)" "$out_of_time"
    elif timeout "$(limit 240)" "${CMD[@]}" --model "$model" --threads "$threads" --prompt-tokens 128 \
        --decode-tokens 32 --repeat 1 >>"$cb" 2>&1; then
      row "CPU decode q8_0 (bench)" "$(awk '$1 == "decode" {print $2, $3; exit}' "$cb") on $threads threads ($(awk '$1 == "ratio" {print $2; exit}' "$cb") of the CPU memory-bandwidth bound)"
      row "CPU prefill q8_0 (bench)" "$(awk '$1 == "prefill" {print $2, $3; exit}' "$cb") (128-token prompt)"
    else
      row "CPU decode q8_0 (bench)" "FAILED: $(tail -1 "$cb")"
    fi
  fi
fi

# ---- 6. the engine on the GPU ----
# Greedy tokens of the real stories260K f32 model must be identical on the CPU and the GPU (issue #6).
stories=""
[ -n "$shared_dir" ] && stories=$shared_dir/models/stories260K-f32.gguf
gt="$OUT/engine_gpu.log"
if [ -z "$stories" ]; then
  row "greedy stories260K cpu=cuda" "not run: stories260K-f32.gguf not found (set STRATA_SHARED_DIR)"
elif [ "$(limit 60)" = 0 ]; then
  row "greedy stories260K cpu=cuda" "$out_of_time"
else
  cmd runtime
  tok_cpu=$(timeout "$(limit 30)" "${CMD[@]}" --model "$stories" --device cpu --prompt 'Once upon a time' \
    --temperature 0 --max-tokens 200 --output json 2>>"$gt" | grep -oE '"completion_tokens":\[[0-9,]*\]')
  tok_gpu=$(timeout "$(limit 30)" "${CMD[@]}" --model "$stories" --device cuda --prompt 'Once upon a time' \
    --temperature 0 --max-tokens 200 --output json 2>>"$gt" | grep -oE '"completion_tokens":\[[0-9,]*\]')
  if [ -z "$tok_gpu" ]; then
    row "greedy stories260K cpu=cuda" "FAILED: no tokens from --device cuda ($(grep -m1 -iE 'error' "$gt" | cut -c1-90))"
  elif [ "$tok_cpu" = "$tok_gpu" ]; then
    row "greedy stories260K cpu=cuda" "identical ($(echo "$tok_gpu" | tr -cd ',' | wc -c | awk '{print $1 + 1}') tokens)"
  else
    row "greedy stories260K cpu=cuda" "DIFFERENT: cpu $(echo "$tok_cpu" | cut -c1-60)… cuda $(echo "$tok_gpu" | cut -c1-60)…"
  fi
  # The 16-bit (ABI 1.20) and FP8 (1.21) KV caches: both devices store the same rounded bits.
  for kvt in float16 bfloat16 fp8_e4m3 fp8_e5m2; do
    k_cpu=$(timeout "$(limit 30)" "${CMD[@]}" --model "$stories" --device cpu --kv-cache-dtype $kvt \
      --prompt 'Once upon a time' --temperature 0 --max-tokens 200 --output json 2>>"$gt" | grep -oE '"completion_tokens":\[[0-9,]*\]')
    k_gpu=$(timeout "$(limit 30)" "${CMD[@]}" --model "$stories" --device cuda --kv-cache-dtype $kvt \
      --prompt 'Once upon a time' --temperature 0 --max-tokens 200 --output json 2>>"$gt" | grep -oE '"completion_tokens":\[[0-9,]*\]')
    if [ -z "$k_gpu" ]; then
      row "greedy $kvt KV cpu=cuda" "FAILED: no tokens from --device cuda ($(grep -m1 -iE 'error' "$gt" | cut -c1-90))"
    elif [ "$k_cpu" = "$k_gpu" ]; then
      row "greedy $kvt KV cpu=cuda" "identical$([ "$k_gpu" = "$tok_gpu" ] && echo ', and equal to float32 KV' || echo ', not equal to float32 KV')"
    else
      row "greedy $kvt KV cpu=cuda" "DIFFERENT: cpu $(echo "$k_cpu" | cut -c1-60)… cuda $(echo "$k_gpu" | cut -c1-60)…"
    fi
  done
fi
# The q8_0 KV cache (ABI 1.23) keeps heads in groups of 32 values (stories260K's heads have 8): on the made model.
if [ ! -f "${model:-}" ]; then
  row "greedy q8_0 KV cpu=cuda" "not run: no model was made"
elif [ "$(limit 90)" = 0 ]; then
  row "greedy q8_0 KV cpu=cuda" "$out_of_time"
else
  cmd runtime
  q_cpu=$(timeout "$(limit 45)" "${CMD[@]}" --model "$model" --device cpu --kv-cache-dtype q8_0 --max-model-len 512 \
    --prompt 'Once upon a time' --temperature 0 --max-tokens 32 --output json 2>>"$gt" | grep -oE '"completion_tokens":\[[0-9,]*\]')
  q_gpu=$(timeout "$(limit 45)" "${CMD[@]}" --model "$model" --device cuda --kv-cache-dtype q8_0 --max-model-len 512 \
    --prompt 'Once upon a time' --temperature 0 --max-tokens 32 --output json 2>>"$gt" | grep -oE '"completion_tokens":\[[0-9,]*\]')
  if [ -z "$q_gpu" ]; then
    row "greedy q8_0 KV cpu=cuda" "FAILED: no tokens from --device cuda ($(grep -m1 -iE 'error' "$gt" | cut -c1-90))"
  elif [ "$q_cpu" = "$q_gpu" ]; then
    row "greedy q8_0 KV cpu=cuda" "identical (32 tokens of the made model)"
  else
    row "greedy q8_0 KV cpu=cuda" "DIFFERENT: cpu $(echo "$q_cpu" | cut -c1-60)… cuda $(echo "$q_gpu" | cut -c1-60)…"
  fi
fi
eg="$OUT/engine_gpu.log"
if [ "$quick" = 1 ] || [ ! -f "$model" ]; then
  row "engine decode on cuda" "not measured: no model was made$([ "$quick" = 1 ] && echo ' (--quick)')"
elif [ "$(limit 120)" = 0 ]; then
  row "engine decode on cuda" "$out_of_time"
else
  cmd runtime
  timeout "$(limit 120)" "${CMD[@]}" --model "$model" --device cuda --prompt 'Once upon a time' --max-tokens 64 \
    --temperature 0 --ignore-eos >"$eg" 2>&1
  rc=$?
  rate=$(grep -oE 'generated \([0-9.]+ tok/s\)' "$eg" | grep -oE '[0-9.]+' | head -1)
  if [ $rc -eq 0 ] && [ -n "$rate" ]; then
    row "engine decode on cuda" "$rate tok/s (runtime --device cuda, 64 tokens; engine_gpu.log)"
  else
    row "engine decode on cuda" "FAILED: runtime --device cuda (rc $rc: $(grep -m1 -iE 'error|fault|abort' "$eg" | cut -c1-100))"
  fi
fi
# Decode with 0%, 50% and 100% of the layers streamed H2D from pinned RAM through the prefetch ring, against the H2D
# bound: streamed bytes per token / measured pinned H2D bandwidth.
sb="$OUT/streamed_bench.log"
h2d=$(value_of h2d_pinned_gbps "$bw")
if [ "$quick" = 1 ] || [ ! -f "$model" ]; then
  row "streamed layers to GPU" "not measured: no model was made$([ "$quick" = 1 ] && echo ' (--quick)')"
else
  cmd bench
  for layers in 0 8 16; do
    if [ "$(limit 120)" = 0 ]; then row "streamed $layers/16 layers" "$out_of_time"; continue; fi
    one="$OUT/.streamed_$layers"
    if [ "$layers" = 0 ]; then
      timeout "$(limit 120)" "${CMD[@]}" --model "$model" --device cuda --prompt-tokens 64 --decode-tokens 32 --repeat 1 >"$one" 2>&1
    else
      timeout "$(limit 120)" "${CMD[@]}" --model "$model" --device cuda --prompt-tokens 64 --decode-tokens 32 --repeat 1 \
        --offload-layers "$layers" --tier pinned_ram --stream >"$one" 2>&1
    fi
    rc=$?
    { echo "== $layers layers streamed (rc $rc)"; cat "$one"; } >>"$sb"
    tps=$(awk '$1 == "decode" {v=$2} END {print v}' "$one")
    mib=$(awk '$1 == "streamed" {print $2; exit}' "$one")
    if [ $rc -ne 0 ] || [ -z "$tps" ]; then
      row "streamed $layers/16 layers" "FAILED (rc $rc): $(grep -m1 -iE 'error' "$one" | cut -c1-100)"
    elif [ -n "$mib" ] && [[ "$h2d" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
      row "streamed $layers/16 layers" "$tps tok/s, $mib MiB/token; $(awk -v t="$tps" -v m="$mib" -v b="$h2d" 'BEGIN {printf "%.0f%% of the H2D bound (%.2f GB/s pinned)", 100 * t * m * 1048576 / (b * 1e9), b}')"
    else
      row "streamed $layers/16 layers" "$tps tok/s"
    fi
    rm -f "$one"
  done
fi
# Hybrid placement: the offloaded half computed on the CPU where it lives (pinned RAM), against the hybrid bound
# (all-resident GPU compute + the CPU half's bytes at the measured memory bandwidth), and with `auto`'s own choice.
hb="$OUT/streamed_bench.log" # the streamed runs' log: at most 8 files under $OUT
if [ "$quick" = 1 ] || [ ! -f "$model" ]; then
  row "hybrid 8/16 layers on CPU" "not measured: no model was made$([ "$quick" = 1 ] && echo ' (--quick)')"
else
  cmd bench
  for how in cpu auto; do
    if [ "$(limit 120)" = 0 ]; then row "hybrid 8/16 ($how)" "$out_of_time"; continue; fi
    one="$OUT/.hybrid_$how"
    timeout "$(limit 120)" "${CMD[@]}" --model "$model" --device cuda --prompt-tokens 64 --decode-tokens 32 --repeat 1 \
      --offload-layers 8 --tier pinned_ram --offload-compute "$how" >"$one" 2>&1
    rc=$?
    { echo "== hybrid, --offload-compute $how (rc $rc)"; cat "$one"; } >>"$hb"
    tps=$(awk '/^offload/ {on=1} on && $1 == "decode" {print $2; exit}' "$one")
    ratio=$(awk '$1 == "hybrid" && $2 == "ratio" {print $3; exit}' "$one")
    if [ $rc -ne 0 ] || [ -z "$tps" ]; then
      row "hybrid 8/16 ($how)" "FAILED (rc $rc): $(grep -m1 -iE 'error' "$one" | cut -c1-100)"
    elif [ -n "$ratio" ]; then
      row "hybrid 8/16 ($how)" "$tps tok/s, $ratio of the hybrid bound ($(awk '$1 == "hybrid" && $2 == "bound" {print $3, $4; exit}' "$one"))"
    else
      row "hybrid 8/16 ($how)" "$tps tok/s (auto chose to stream: $(grep -m1 -oE 'offload_compute = auto:[^;]*' "$one" | cut -c1-90))"
    fi
    rm -f "$one"
  done
fi
rm -f "$model"

# ---- the table ----
{
  echo
  printf '| %-28s | %s\n' "what" "result"
  printf '| %-28s | %s\n' "----------------------------" "------"
  for r in "${rows[@]}"; do printf '| %-28s | %s\n' "${r%%|*}" "${r#*|}"; done
} | tee -a "$summary"
