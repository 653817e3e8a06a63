#!/usr/bin/env bash
# Tensor-parallel ranks as processes against the same ranks in one process and against one process's threads (#16):
# prefill and decode tok/s from the runtime's own timings (`--output json`), a 127-token prompt and 64 tokens, the
# three launches alternated for ROUNDS rounds. Usage:
#   tools/bench/tensor_parallel_processes.sh MODEL.gguf [ROUNDS=3] [BUILD_DIR=build]
# Two ranks of one thread each on this host (mpirun -np 2, oversubscription allowed for small machines).
set -euo pipefail
model=$1
rounds=${2:-3}
build=${3:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
prompt="$(printf 'the little dog ran to the park %.0s' $(seq 18))"
run() {
  "$@" --model "$model" --prompt "$prompt" --max-tokens 64 --ignore-eos --temperature 0 --output json --device cpu \
    2>/dev/null | python3 -c "import json, sys; t = json.load(sys.stdin)['timings']; \
print('%d prompt tokens: prefill %.1f tok/s, decode %.1f tok/s' % (t['prompt_n'], t['prefill_tokens_per_second'], \
t['decode_tokens_per_second']))"
}
for _ in $(seq "$rounds"); do
  echo -n "one process, 2 threads:          "; run "$build/bin/runtime" -t 2
  echo -n "-tp 2 in one process:            "; run "$build/bin/runtime" -tp 2 -t 2
  echo -n "mpirun -np 2, -tp 2 (processes): "; run mpirun -np 2 "$build/bin/runtime" -tp 2 -t 2
done
