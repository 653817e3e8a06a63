// Shared helpers for the CPU device tests: a config view and host stand-ins, an F32 quant format, devices with a
// chosen thread count / kernel set, random data and error metrics.
#pragma once

#include "cpu_device.hpp"
#include "device_test_numerics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace cpu_test {

inline const strata_device_desc &ops() { return *strata_cpu_device_descriptor(); }

// A [cpu] table with optional values; unset keys report "not set" so the plugin uses its defaults.
struct fake_config {
    std::optional<int64_t> threads;
    std::optional<bool> pin_threads;
    std::optional<bool> separate_memory;

    strata_config_view view() {
        strata_config_view v{};
        v.struct_size = sizeof v;
        v.ctx = this;
        v.get_bool = [](void *ctx, const char *key, int32_t *out) -> int32_t {
            auto *self = static_cast<fake_config *>(ctx);
            const std::optional<bool> &v = std::strcmp(key, "pin_threads") == 0       ? self->pin_threads
                                           : std::strcmp(key, "separate_memory") == 0 ? self->separate_memory
                                                                                      : std::optional<bool>();
            if (!v) return 0;
            *out = *v ? 1 : 0;
            return 1;
        };
        v.get_int = [](void *ctx, const char *key, int64_t *out) -> int32_t {
            auto *self = static_cast<fake_config *>(ctx);
            if (std::strcmp(key, "threads") != 0 || !self->threads) return 0;
            *out = *self->threads;
            return 1;
        };
        return v;
    }
};

// Host services with a chosen core count and pinning list.
struct fake_host {
    int32_t cores = 2;
    std::vector<int32_t> pin_cpus;

    strata_host_services services() {
        strata_host_services h{};
        h.struct_size = sizeof h;
        h.host_abi_major = STRATA_ABI_MAJOR;
        h.host_abi_minor = STRATA_ABI_MINOR;
        h.ctx = this;
        h.log = [](void *, int32_t, const char *, const char *) {};
        h.physical_cores = [](void *ctx) -> int32_t { return static_cast<fake_host *>(ctx)->cores; };
        h.logical_cpus = [](void *ctx) -> int32_t { return static_cast<fake_host *>(ctx)->cores; };
        h.pinning_cpus = [](void *ctx, int32_t *cpus, int32_t cap) -> int32_t {
            const auto &list = static_cast<fake_host *>(ctx)->pin_cpus;
            const int32_t n = std::min<int32_t>(cap, static_cast<int32_t>(list.size()));
            std::copy_n(list.begin(), n, cpus);
            return n;
        };
        return h;
    }
};

struct device_deleter {
    void operator()(strata_device *d) const { ops().destroy(d); }
};
using device_ptr = std::unique_ptr<strata_device, device_deleter>;

// A device with `threads` workers (config key) and the given kernel set (through STRATA_FORCE_SCALAR, restored).
inline device_ptr make_device(int threads, bool force_scalar = false, bool separate_memory = false) {
    const char *old = std::getenv("STRATA_FORCE_SCALAR");
    const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
    if (force_scalar) setenv("STRATA_FORCE_SCALAR", "1", 1);
    else unsetenv("STRATA_FORCE_SCALAR");

    fake_config cfg;
    cfg.threads = threads;
    cfg.pin_threads = false;
    if (separate_memory) cfg.separate_memory = true;
    const strata_config_view view = cfg.view();
    strata_device_create_args args{};
    args.struct_size = sizeof args;
    args.config = &view;
    strata_status st{};
    device_ptr dev(ops().create(&args, &st));

    if (saved) setenv("STRATA_FORCE_SCALAR", saved->c_str(), 1);
    else unsetenv("STRATA_FORCE_SCALAR");
    EXPECT_NE(dev, nullptr) << st.message;
    return dev;
}

// F32 weights as a quant format: block of 1 element, 4 bytes; dot accumulates in float like a real kernel.
inline const strata_quant_desc &f32_quant() {
    static const strata_quant_desc desc = [] {
        strata_quant_desc d{};
        d.header.struct_size = sizeof d;
        d.header.required_size = offsetof(strata_quant_desc, kernel_name);
        d.header.kind = STRATA_KIND_QUANT;
        d.header.name = "f32";
        d.ggml_type = 0;
        d.block_elems = 1;
        d.block_bytes = 4;
        d.dequantize_row = [](const void *src, float *dst, int64_t n) {
            std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
        };
        d.quantize_row = [](const float *src, void *dst, int64_t n) {
            std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
        };
        d.dot_f32 = [](const void *row, const float *x, int64_t n) {
            const auto *w = static_cast<const float *>(row);
            float sum = 0.0f;
            for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
            return sum;
        };
        return d;
    }();
    return desc;
}

inline strata_tensor_view f32_view(const std::vector<float> &data, int64_t rows, int64_t cols) {
    strata_tensor_view v{};
    v.struct_size = sizeof v;
    v.ggml_type = 0;
    v.quant = &f32_quant();
    v.data = data.data();
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = cols * 4;
    v.name = "test.weight";
    return v;
}

using device_test::attention_args;
using device_test::attention_case;
using device_test::attention_data;
using device_test::elementwise_error;
using device_test::make_attention_data;
using device_test::normwise_error;
using device_test::random_floats;
using device_test::reference_product;

} // namespace cpu_test
