// Shared helpers for the CUDA device tests. The CUDA, CPU and ggml quant plugins are loaded the way the runtime
// loads them (the registry, with its ABI checks), once per test binary. Tests that need a GPU call
// require_gpu() first, which skips them with the plugin's own reason when no usable GPU is visible.
#pragma once

#include "device_test_numerics.hpp"
#include "plugin_host/registry.hpp"

#include <strata/plugin_abi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace cuda_test {

// Host services that keep what plugins log (create() reports the GPU it found through it).
struct recording_host {
    std::vector<std::string> messages;
    strata_host_services services{};

    recording_host() {
        services.struct_size = sizeof services;
        services.host_abi_major = STRATA_ABI_MAJOR;
        services.host_abi_minor = STRATA_ABI_MINOR;
        services.ctx = this;
        services.log = [](void *ctx, int32_t, const char *plugin, const char *message) {
            static_cast<recording_host *>(ctx)->messages.push_back(std::string(plugin) + ": " + message);
        };
        services.physical_cores = [](void *) { return 2; };
        services.logical_cpus = [](void *) { return 2; };
        services.pinning_cpus = [](void *, int32_t *, int32_t) { return 0; };
    }
    recording_host(const recording_host &) = delete;
    recording_host &operator=(const recording_host &) = delete;
};

// Where a plugin library is: its build path, or the file of the same name in $STRATA_TEST_PLUGIN_DIR when that is
// set (a prebuilt test binary run on another machine, see tools/gpu/pack.sh).
inline std::string plugin_path(const char *built) {
    const char *dir = std::getenv("STRATA_TEST_PLUGIN_DIR");
    if (dir == nullptr || dir[0] == '\0') return built;
    const std::string path(built);
    return std::string(dir) + "/" + path.substr(path.find_last_of('/') + 1);
}

// The plugin libraries (the two devices and the quant formats), loaded once (a failure to load is reported by every test that uses them).
struct plugins {
    recording_host host;
    strata::plugins::registry reg{&host.services};
    std::string load_error;
    const strata_device_desc *cuda = nullptr;
    const strata_device_desc *cpu = nullptr;

    plugins() {
        try {
            reg.load_file(plugin_path(STRATA_CUDA_MODULE_PATH));
            reg.load_file(plugin_path(STRATA_CPU_MODULE_PATH));
            reg.load_file(plugin_path(STRATA_QUANT_MODULE_PATH));
            reg.load_file(plugin_path(STRATA_GROUP_INT_MODULE_PATH));
            reg.load_file(plugin_path(STRATA_FP8_MODULE_PATH));
        } catch (const std::exception &e) {
            load_error = e.what();
        }
        cuda = reg.find_device("cuda").desc;
        cpu = reg.find_device("cpu").desc;
    }
    const strata_quant_desc *quant(uint32_t ggml_type) const { return reg.find_quant_by_type(ggml_type).desc; }
};

inline plugins &loaded() {
    static plugins p;
    return p;
}

struct device_deleter {
    const strata_device_desc *desc;
    void operator()(strata_device *d) const { desc->destroy(d); }
};
using device_ptr = std::unique_ptr<strata_device, device_deleter>;

// A device of `desc` with the default configuration (no config table, recording host); null plus the status when
// create() fails.
inline device_ptr create_device(const strata_device_desc *desc, strata_status *st) {
    strata_device_create_args args{};
    args.struct_size = sizeof args;
    args.host = &loaded().host.services;
    args.config = nullptr;
    return device_ptr(desc->create(&args, st), device_deleter{desc});
}

// The reason a GPU test cannot run here, or "" when the CUDA device can be created. Computed once.
inline const std::string &gpu_unavailable_reason() {
    static const std::string reason = [] {
        plugins &p = loaded();
        if (p.cuda == nullptr) return "the cuda plugin did not load: " + p.load_error;
        if (p.cpu == nullptr) return "the cpu plugin did not load: " + p.load_error;
        if (p.cuda->score() <= 0) {
            strata_status st{};
            device_ptr dev = create_device(p.cuda, &st);
            if (dev != nullptr) return std::string("the cuda device scores 0 but create() succeeded (inconsistent)");
            return std::string("score() = 0; create() says: ") + st.message;
        }
        strata_status st{};
        device_ptr dev = create_device(p.cuda, &st);
        if (dev == nullptr) return std::string("cuda create() failed: ") + st.message;
        return std::string();
    }();
    return reason;
}

#define REQUIRE_GPU()                                                                                                \
    do {                                                                                                             \
        if (!::cuda_test::gpu_unavailable_reason().empty())                                                          \
            GTEST_SKIP() << "needs a CUDA GPU: " << ::cuda_test::gpu_unavailable_reason();                           \
    } while (0)

// Device memory of the CUDA device, freed on scope exit.
class device_buffer {
  public:
    device_buffer(strata_device *dev, size_t bytes) : dev_(dev), bytes_(bytes) {
        strata_status st{};
        ptr_ = loaded().cuda->mem_alloc(dev, bytes, &st);
        EXPECT_NE(ptr_, nullptr) << st.message;
    }
    device_buffer(const device_buffer &) = delete;
    device_buffer &operator=(const device_buffer &) = delete;
    ~device_buffer() {
        if (ptr_ != nullptr) loaded().cuda->mem_free(dev_, ptr_);
    }
    void *get() const { return ptr_; }
    float *f() const { return static_cast<float *>(ptr_); }
    size_t size() const { return bytes_; }

  private:
    strata_device *dev_;
    void *ptr_ = nullptr;
    size_t bytes_;
};

inline void upload(strata_device *dev, void *dst, const void *src, size_t bytes) {
    strata_status st{};
    ASSERT_EQ(loaded().cuda->copy(dev, dst, src, bytes, STRATA_COPY_H2D, &st), STRATA_OK) << st.message;
}

inline void download(strata_device *dev, void *dst, const void *src, size_t bytes) {
    strata_status st{};
    ASSERT_EQ(loaded().cuda->copy(dev, dst, src, bytes, STRATA_COPY_D2H, &st), STRATA_OK) << st.message;
}

// A device buffer holding a copy of `host`.
template <class T> std::unique_ptr<device_buffer> to_device(strata_device *dev, const std::vector<T> &host) {
    auto buf = std::make_unique<device_buffer>(dev, std::max<size_t>(host.size() * sizeof(T), 1));
    if (buf->get() != nullptr && !host.empty()) upload(dev, buf->get(), host.data(), host.size() * sizeof(T));
    return buf;
}

inline std::vector<float> floats_from(strata_device *dev, const void *src, size_t n) {
    std::vector<float> out(n, NAN);
    download(dev, out.data(), src, n * sizeof(float));
    return out;
}

using device_test::attention_args;
using device_test::attention_case;
using device_test::attention_data;
using device_test::elementwise_error;
using device_test::make_attention_data;
using device_test::normwise_error;
using device_test::random_floats;
using device_test::reference_product;

struct quantized_matrix {
    std::vector<unsigned char> bytes;
    int64_t rows = 0, cols = 0, row_bytes = 0;
    std::vector<float> dequantized; // what the format's reference dequantize_row gives back
};

inline quantized_matrix quantize(const strata_quant_desc &q, const std::vector<float> &w, int64_t rows,
                                 int64_t cols) {
    quantized_matrix m;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = cols / q.block_elems * q.block_bytes;
    m.bytes.resize(static_cast<size_t>(rows * m.row_bytes));
    m.dequantized.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        q.quantize_row(w.data() + r * cols, m.bytes.data() + r * m.row_bytes, cols);
        q.dequantize_row(m.bytes.data() + r * m.row_bytes, m.dequantized.data() + r * cols, cols);
    }
    return m;
}

inline strata_tensor_view view_of(const strata_quant_desc &q, const quantized_matrix &m, const void *data) {
    strata_tensor_view v{};
    v.struct_size = sizeof v;
    v.ggml_type = q.ggml_type;
    v.quant = &q;
    v.data = data;
    v.rows = m.rows;
    v.cols = m.cols;
    v.row_bytes = m.row_bytes;
    v.name = "test.weight";
    return v;
}

} // namespace cuda_test
