// The CPU device plugin ("cpu"): memory is plain host memory, ops run on a persistent thread pool with AVX2+FMA
// kernels when the CPU has them (scalar otherwise, or when STRATA_FORCE_SCALAR is set to anything but "" or "0").
//
// Threading: a device owns `threads` workers including the thread that calls an op (it joins the work), so an op
// wakes threads-1 helpers. Ops on one device are serialised by a mutex; use one device per concurrent caller.
//
// Paged KV (ABI 1.5): kv_store and paged_attention work on blocks anywhere in host memory (host_addressable is 1);
// paged_attention shares attention's inner kernel, so per token both give the same bits for the same rows.
//
// Fences (ABI 1.7): fence_record returns increasing ids and copy_after is `copy` (ops complete on return); they are
// offered in every mode so the prefetch ring's fence path runs on the CPU device's `separate_memory` test mode.
//
// Memory: no op allocates, with two documented exceptions: attention and paged_attention keep a per-thread score
// buffer (preallocated for 4096 positions in create()) and grow it the first time they see a longer context, and
// matmul's integer path keeps one buffer of quantized activations (64 KiB preallocated) that grows the first time a
// batch needs more. Growth at least doubles a buffer, so it happens O(log size) times per device, never per token
// in steady state.
//
// Matmul: when the weight's quant format offers the integer dot path (ABI 1.1 slots quantize_activations/dot_act),
// activations are quantized once per call (to Q8_0 blocks for ggml's formats, as llama.cpp does) and rows are
// dotted in integers; otherwise the format's dot_f32 runs against the float activations.
#pragma once

#include <strata/plugin_abi.h>

// The device descriptor ("cpu") and the plugin library info ("cpu", one descriptor, config table [cpu]).
const strata_device_desc *strata_cpu_device_descriptor();
const strata_plugin_info *strata_cpu_plugin_info();

// Not part of the ABI, for tests and diagnostics: the kernel set a device uses ("avx2+fma" or "scalar").
const char *strata_cpu_device_kernel_name(const strata_device *dev);
