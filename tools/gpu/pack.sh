#!/usr/bin/env bash
# Builds what tools/gpu/check.sh runs (CI's flags: RelWithDebInfo, warnings as errors; CUDA on; debug info stripped) and packs it into one folder together with every shared
# library it loads, glibc and its loader included, so it runs on a GPU machine whose image lacks this project's build
# dependencies (Boost, fmt, hwloc, toml++, GoogleTest) or has another glibc. Run it on the development machine:
#
#   tools/gpu/pack.sh [PACK_DIR]          default PACK_DIR: build-gpu-pack (ignored, like every build* folder)
#
# The build folder is build-gpu ($STRATA_GPU_BUILD_DIR); JOBS sets the parallelism (default: all cores).
#
# then carry PACK_DIR to the GPU machine and run `tools/gpu/check.sh --prebuilt PACK_DIR` there.
#
# Layout: bin/ (executables), plugins/ (the plugins the runtime and bench load, tiers included), lib/ (their shared
# libraries), glibc/ (ld-linux,
# libc, libm, ... of this machine), vocab/ (the SPM vocabulary make-model copies into the model) and models/
# (stories260K-f32.gguf, found as $pack/models by check.sh). check.sh starts
# every executable through glibc/ld-linux-x86-64.so.2; such a process sees /proc/self/exe as the loader, so the
# executables' "<exe dir>/../plugins" is PACK_DIR/plugins, which is why glibc/ and plugins/ are siblings.
set -euo pipefail
cd "$(dirname "$0")/../.."
pack=${1:-build-gpu-pack}
build=${STRATA_GPU_BUILD_DIR:-build-gpu}
jobs=${JOBS:-$(nproc)}
shared=${STRATA_SHARED_DIR:-../shared}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_WITH_CUDA=ON -DSTRATA_WERROR=ON
executables=(runtime bench make-model test_cuda_device gpu-bandwidth gpu-decode-bench)
plugins=(strata_cuda strata_device_cpu strata_quant_ggml strata_model_decoder strata_frontend_cli strata_tier_numa_ram
         strata_tier_pinned_ram strata_tier_nvme)
cmake --build "$build" -j"$jobs" --target "${executables[@]}" "${plugins[@]}"

rm -rf "$pack"
mkdir -p "$pack"/{bin,plugins,lib,glibc,vocab}
for e in "${executables[@]}"; do cp "$build/bin/$e" "$pack/bin/"; done
for p in "${plugins[@]}"; do cp "$build/plugins/lib${p}.so" "$pack/plugins/"; done
strip --strip-unneeded "$pack"/bin/* "$pack"/plugins/*

# Every library ldd resolves for them; the C library and its loader go to glibc/, the rest to lib/.
is_glibc() { [[ "$1" =~ ^(ld-linux.*|libc\.so.*|libm\.so.*|libpthread\.so.*|libdl\.so.*|librt\.so.*|libresolv\.so.*|libutil\.so.*|libmvec\.so.*)$ ]]; }
for f in "$pack"/bin/* "$pack"/plugins/*; do
  ldd "$f" | awk '/=> \// {print $3} /^[ \t]*\/.*ld-linux/ {print $1}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  if is_glibc "$name"; then cp -L "$lib" "$pack/glibc/$name"; else cp -L "$lib" "$pack/lib/$name"; fi
done
[ -e "$pack/glibc/ld-linux-x86-64.so.2" ] || { echo "pack: no ld-linux-x86-64.so.2 found by ldd" >&2; exit 1; }
# The driver (libcuda.so.1, loaded later by the CUDA runtime) may name glibc's compatibility stubs; they must come
# from this glibc too, not the GPU machine's.
libc_dir=$(dirname "$(ldd "$pack/bin/runtime" | awk '/libc\.so\.6 => / {print $3}')")
for stub in libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1 libresolv.so.2; do
  if [ -e "$libc_dir/$stub" ]; then cp -L "$libc_dir/$stub" "$pack/glibc/"; fi
done

# stories260K for the engine tests on the GPU (test_cuda_device's CudaEngine.*, check.sh step 6): the GPU machine
# sees only the repository, not ../shared.
mkdir -p "$pack/models"
stories="$shared/models/stories260K-f32.gguf"
if [ -f "$stories" ]; then cp "$stories" "$pack/models/"; else echo "pack: warning: $stories not found; the GPU engine tests will skip" >&2; fi
vocab="$shared/models/vocab/ggml-vocab-llama-spm.gguf"
if [ -f "$vocab" ]; then cp "$vocab" "$pack/vocab/"; else echo "pack: warning: $vocab not found; check.sh will need --vocab" >&2; fi
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- . || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(ldd --version | head -1)"
  echo "cuda $(nvcc --version | tail -1)"
} >"$pack/MANIFEST.txt"

git check-ignore -q "$pack" || echo "pack: warning: $pack is not ignored by git; a GPU lease carries only ignored paths" >&2
size=$(du -sm "$pack" | cut -f1)
echo "pack: $pack is ${size} MiB"
if [ "$size" -gt 56 ]; then
  echo "pack: larger than the 56 MiB a GPU lease can carry beside the working tree" >&2
  exit 1
fi
