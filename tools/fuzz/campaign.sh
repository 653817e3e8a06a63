#!/usr/bin/env bash
# A fuzz campaign: every libFuzzer target (targets.sh) for a number of executions or a time, then one table of
# executions, coverage, corpus size and crashes per target (what docs/FUZZING.md records).
# Usage: tools/fuzz/campaign.sh <build_dir> [--runs N] [--seconds S] [--jobs J] [--only T1,T2] [--out FILE]
#   <build_dir>: configured with CC=clang CXX=clang++ -DSTRATA_BUILD_FUZZERS=ON -DSTRATA_SANITIZE=address,undefined.
#   A target stops at N executions (default 10^7) or after S seconds (default 4 hours), whichever comes first. J
#   targets run at once (default 1); --only runs just the named targets; --report runs nothing and prints the table
#   of the logs already there. Logs go to <build_dir>/campaign/<target>.log; the table goes to stdout and FILE.
#   Exits nonzero on any crash, after printing the end of that target's log. CI (tools/ci/test.sh) runs it with
#   --seconds and --jobs 2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=targets.sh
source "$here/targets.sh"

[[ $# -ge 1 ]] || { echo "usage: $0 <build_dir> [--runs N] [--seconds S] [--jobs J] [--only T1,T2] [--out FILE]" >&2; exit 2; }
build_dir=$(cd "$1" && pwd)
shift
runs=10000000 seconds=14400 jobs=1 out="" only="" report_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    --report) report_only=1; shift ;;
    *) echo "campaign: unknown option $1" >&2; exit 2 ;;
  esac
done
logs="$build_dir/campaign"
mkdir -p "$logs"

run_one() { # <target> <max_len> <maker> [seeds...]
  local target=$1 max_len=$2 maker=$3
  shift 3
  [[ $maker == - ]] && maker=""
  FUZZ_RUNS=$runs bash "$here/run_fuzz.sh" "$build_dir" "$seconds" "$target" "$max_len" "$maker" "$@" \
    >"$logs/$target.log" 2>&1 && echo 0 >"$logs/$target.rc" || echo $? >"$logs/$target.rc"
}

mapfile -t lines < <(strata_fuzz_targets | while read -r t rest; do
  [[ -z $only || $only == *",$t,"* ]] && echo "$t $rest"
done)
[[ ${#lines[@]} -gt 0 ]] || { echo "campaign: no target matches --only" >&2; exit 2; }
if [[ $report_only == 0 ]]; then
  # Every target and seed maker is built once, before any fuzzer starts (parallel runs must not share a ninja call).
  mapfile -t to_build < <(for line in "${lines[@]}"; do read -r t _ m _ <<<"$line"; echo "$t"; [[ $m == - ]] || echo "$m"; done | sort -u)
  ninja -C "$build_dir" "${to_build[@]}"
  export FUZZ_SKIP_BUILD=1
  for line in "${lines[@]}"; do
    # shellcheck disable=SC2086
    run_one $line &
    while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n || true; done
  done
  wait
fi

failed=0
table="| target | executions | seconds | exec/s | coverage (edges) | features | corpus files | crashes | slow units |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for line in "${lines[@]}"; do
  read -r target _ <<<"$line"
  log="$logs/$target.log"
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 | awk '{print $5}' || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  # A run still going (or killed) has no final stats yet: its last progress line says how far it got.
  [[ $execs == "?" && -n $last ]] && execs="$(grep -o '^#[0-9]*' <<<"$last" | tr -d '#') (running)"
  corpus=$(find "$build_dir/${target}_corpus" -type f | wc -l)
  # Findings are crash-, leak-, timeout- and oom- files; slow-unit- files are inputs that took over 10 s once (on a
  # loaded machine, often just starved), counted apart.
  crashes=$(find "$build_dir/${target}_artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | wc -l)
  slow=$(find "$build_dir/${target}_artifacts" -type f -name 'slow-unit-*' | wc -l)
  rate="?"
  [[ -n $secs && $secs -gt 0 && $execs != "?" ]] && rate=$((execs / secs))
  if [[ $(cat "$logs/$target.rc") != 0 || $crashes != 0 ]]; then
    failed=1
    echo "campaign: $target failed (exit $(cat "$logs/$target.rc"), $crashes finding(s)); the end of $log:" >&2
    tail -n 80 "$log" >&2
  fi
  table+=$'\n'"| $target | $execs | ${secs:-?} | $rate | $cov | $ft | $corpus | $crashes | $slow |"
done
echo "$table"
[[ -n $out ]] && echo "$table" >"$out"
exit $failed
