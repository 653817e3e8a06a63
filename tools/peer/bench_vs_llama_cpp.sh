#!/usr/bin/env bash
# Strata against llama.cpp on the same GGUF files and the same threads, side by side (issue #15, item 5).
#
# Builds llama-bench and llama-batched-bench from the llama.cpp source node-llama-cpp bundles (build-llama-cpp.sh: a
# cache outside the repository, nothing vendored), then runs the two engines alternately — round r runs llama.cpp
# first when r is odd and Strata first when it is even, so drift on a shared machine reaches both — and prints the
# ratio table (Strata ÷ llama.cpp, best of the rounds for each; above 1 Strata is faster).
#
#   bash tools/peer/bench_vs_llama_cpp.sh [--build DIR] [--threads 1,2] [--prompt 128] [--decode 64] [--rounds 2]
#        [--batched 1,4,16,64] [--batched-prompt 64] [--batched-decode 64] [--busy N] [--kv-cache-dtype f16]
#        MODEL.gguf [MODEL.gguf ...]
#
# Both engines do the same work: the KV cache has the same type on both sides (--kv-cache-dtype, default f16, llama.cpp's
# own default: `-ctk T -ctv T` there, `--kv-cache-dtype T` here; f32, f16, bf16 or q8_0), and llama-bench's decode test
# runs at the depth of the prompt (`-d PROMPT`), as Strata's decode follows its prompt (llama-bench's plain `-n` test
# decodes from an empty context, so it reads fewer KV bytes per token).
# Both measure warm: llama-bench runs an unmeasured warm-up of each test first, and Strata's `bench` runs its request
# once unmeasured (`--warmup 1`) before the measured one (before 2026-12-06 Strata's figure was its first, cold run).
#
# --busy N: a shared machine (issue #15, item 4). N other processes each keep a core busy (a shell loop, at the
# default priority) for the whole run, beside both engines alike; run once with 0 and once with N to see what each
# engine loses when it does not have the machine to itself.
# Single sequence: Strata's `bench` (prefill of a --prompt-token prompt without the prefix cache; greedy decode of
# --decode tokens) against `llama-bench -p PROMPT -n 0` and `llama-bench -p 0 -n DECODE -d PROMPT`. With --batched:
# Strata's `bench-serving` (N distinct prompts at once; decode-phase aggregate and end-to-end generated tokens/s)
# against `llama-batched-bench -npl N` at the largest thread count: its S_TG, and N x TG / T for end to end (its own
# S counts the prompt tokens too, which Strata's end-to-end figure does not). Make the models with make-model (build/bin/make-model --type q8_0 ...).
# Prints the exact commands it ran. A benchmark, not a test: nothing here asserts a speed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build"
threads=1,2
prompt=128
decode=64
rounds=2
batched=""
batched_prompt=64
batched_decode=64
busy=0
kv=f16
models=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --decode) decode=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --batched) batched=$2; shift 2 ;;
    --batched-prompt) batched_prompt=$2; shift 2 ;;
    --batched-decode) batched_decode=$2; shift 2 ;;
    --busy) busy=$2; shift 2 ;;
    --kv-cache-dtype) kv=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    -*) echo "bench_vs_llama_cpp: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ ${#models[@]} -gt 0 ]] || { echo "bench_vs_llama_cpp: name at least one MODEL.gguf (see --help)" >&2; exit 2; }
for m in "${models[@]}"; do [[ -f $m ]] || { echo "bench_vs_llama_cpp: $m: no such file" >&2; exit 2; }; done
for t in bench bench-serving; do
  [[ -x $build/bin/$t ]] || { echo "bench_vs_llama_cpp: $build/bin/$t is missing; build it (cmake --build $build --target $t)" >&2; exit 2; }
done
[[ $rounds -ge 1 ]] || { echo "bench_vs_llama_cpp: --rounds must be at least 1" >&2; exit 2; }
[[ $busy =~ ^[0-9]+$ ]] || { echo "bench_vs_llama_cpp: --busy takes a number of processes" >&2; exit 2; }
case $kv in f32|f16|bf16|q8_0) ;; *) echo "bench_vs_llama_cpp: --kv-cache-dtype is f32, f16, bf16 or q8_0 (both engines have it), not $kv" >&2; exit 2 ;; esac

echo "building llama-bench and llama-batched-bench (once; cached)..." >&2
llama_bin=$(bash "$here/build-llama-cpp.sh" llama-bench llama-batched-bench)
log=$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-llama.XXXXXX")
echo "logs in $log" >&2
busy_pids=()
stop_busy() { for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_busy EXIT
for ((i = 0; i < busy; i++)); do
  (while :; do :; done) &
  busy_pids+=($!)
done
[[ $busy == 0 ]] || echo "$busy busy process(es) beside both engines: ${busy_pids[*]}" >&2

run() { # run LOGFILE CMD...: prints the command, runs it into the log
  local out=$1; shift
  echo "\$ $*" >>"$log/commands"
  "$@" >"$out" 2>&1 || { echo "bench_vs_llama_cpp: failed: $* (log $out)" >&2; tail -5 "$out" >&2; exit 1; }
}
best() { awk 'BEGIN {m = 0} {if ($1 + 0 > m) m = $1 + 0} END {printf "%.2f", m}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "-"}'; }

# llama-bench -o json: one object per test; avg_ts of the prompt test from an empty context and of the generation
# test at the prompt's depth.
llama_rates() { # FILE DEPTH -> "prefill decode"
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8").replace(/^[^\[]*/s, ""));
    const depth = Number(process.argv[2]), at = x => (x.n_depth || 0);
    const pp = r.find(x => x.n_prompt > 0 && x.n_gen === 0 && at(x) === 0);
    const tg = r.find(x => x.n_gen > 0 && x.n_prompt === 0 && at(x) === depth);
    console.log((pp ? pp.avg_ts : 0) + " " + (tg ? tg.avg_ts : 0));' "$1" "$2"
}

IFS=, read -r -a thread_list <<<"$threads"
echo
echo "| model | threads | llama.cpp prefill tok/s | Strata prefill tok/s | ratio | llama.cpp decode tok/s | Strata decode tok/s | ratio |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  for t in "${thread_list[@]}"; do
    : >"$log/$name-$t.l"
    : >"$log/$name-$t.s"
    for ((r = 1; r <= rounds; r++)); do
      for engine in $([[ $((r % 2)) == 1 ]] && echo "llama strata" || echo "strata llama"); do
        if [[ $engine == llama ]]; then
          run "$log/lp.json" "$llama_bin/llama-bench" -m "$m" -t "$t" -p "$prompt" -n 0 -ctk "$kv" -ctv "$kv" -r 1 -o json
          run "$log/ld.json" "$llama_bin/llama-bench" -m "$m" -t "$t" -p 0 -n "$decode" -d "$prompt" -ctk "$kv" \
            -ctv "$kv" -r 1 -o json
          echo "$(llama_rates "$log/lp.json" 0 | cut -d' ' -f1) $(llama_rates "$log/ld.json" "$prompt" | cut -d' ' -f2)" \
            >>"$log/$name-$t.l"
        else
          run "$log/s.txt" "$build/bin/bench" --model "$m" --threads "$t" --prompt-tokens "$prompt" \
            --decode-tokens "$decode" --kv-cache-dtype "$kv" --warmup 1 --repeat 1
          echo "$(awk '$1 == "prefill" {print $2}' "$log/s.txt") $(awk '$1 == "decode" {print $2; exit}' "$log/s.txt")" \
            >>"$log/$name-$t.s"
        fi
      done
    done
    lp=$(awk '{print $1}' "$log/$name-$t.l" | best); ld=$(awk '{print $2}' "$log/$name-$t.l" | best)
    sp=$(awk '{print $1}' "$log/$name-$t.s" | best); sd=$(awk '{print $2}' "$log/$name-$t.s" | best)
    echo "| $name | $t | $lp | $sp | $(ratio "$sp" "$lp") | $ld | $sd | $(ratio "$sd" "$ld") |"
  done
done

if [[ -n $batched ]]; then
  t=${thread_list[-1]}
  ctx=$(( (batched_prompt + batched_decode) * $(tr ',' '\n' <<<"$batched" | sort -n | tail -1) + 16 ))
  echo
  echo "Batched: $batched_prompt-token prompts, $batched_decode tokens each, $t threads (decode: aggregate tokens/s once every sequence decodes; end to end: prefill included)"
  echo
  echo "| model | N | llama.cpp decode | Strata decode | ratio | llama.cpp end to end | Strata end to end | ratio |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  for m in "${models[@]}"; do
    name=$(basename "$m" .gguf)
    : >"$log/$name.bl"
    : >"$log/$name.bs"
    for ((r = 1; r <= rounds; r++)); do
      for engine in $([[ $((r % 2)) == 1 ]] && echo "llama strata" || echo "strata llama"); do
        if [[ $engine == llama ]]; then
          run "$log/bl.txt" "$llama_bin/llama-batched-bench" -m "$m" -t "$t" -c "$ctx" -b 2048 -ub 512 \
            -ctk "$kv" -ctv "$kv" -npp "$batched_prompt" -ntg "$batched_decode" -npl "$batched" --output-format jsonl
          grep '^{' "$log/bl.txt" | node -e '
            const lines = require("fs").readFileSync(0, "utf8").trim().split("\n");
            for (const l of lines) { const x = JSON.parse(l); console.log(x.pl + " " + x.speed_tg + " " + x.pl * x.tg / x.t); }' \
            >>"$log/$name.bl"
        else
          run "$log/bs.txt" "$build/bin/bench-serving" --model "$m" --threads "$t" --concurrency "$batched" \
            --kv-cache-dtype "$kv" --prompt-tokens "$batched_prompt" --decode-tokens "$batched_decode" --repeat 1
          awk '/^ *N +decode tok\/s/ {f = 1; next} f && NF == 0 {f = 0} f && $1 ~ /^[0-9]+$/ {print $1, $2, $4}' \
            "$log/bs.txt" >>"$log/$name.bs"
        fi
      done
    done
    IFS=, read -r -a ns <<<"$batched"
    for n in "${ns[@]}"; do
      ld=$(awk -v n="$n" '$1 == n {print $2}' "$log/$name.bl" | best); le=$(awk -v n="$n" '$1 == n {print $3}' "$log/$name.bl" | best)
      sd=$(awk -v n="$n" '$1 == n {print $2}' "$log/$name.bs" | best); se=$(awk -v n="$n" '$1 == n {print $3}' "$log/$name.bs" | best)
      echo "| $name | $n | $ld | $sd | $(ratio "$sd" "$ld") | $le | $se | $(ratio "$se" "$le") |"
    done
  done
fi
echo
[[ $busy == 0 ]] || echo "Measured beside $busy other process(es) each keeping a core busy (--busy $busy)."
echo "Commands (each run once per round, $rounds rounds, engines alternated):"
sort -u "$log/commands" | sed 's/^/    /'
