// The built plugin module itself: load it like the host does, check its info and descriptors, and run a kernel.
#include "ggml_quants.hpp"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace q = strata::quants;

namespace {

class QuantPlugin : public ::testing::Test {
  protected:
    void SetUp() override {
        handle_ = dlopen(STRATA_QUANT_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(handle_, nullptr) << "dlopen " << STRATA_QUANT_PLUGIN_PATH << ": " << dlerror();
        void *symbol = dlsym(handle_, STRATA_PLUGIN_ENTRY_SYMBOL);
        ASSERT_NE(symbol, nullptr) << "missing " << STRATA_PLUGIN_ENTRY_SYMBOL;
        strata_plugin_entry_fn entry = nullptr;
        std::memcpy(&entry, &symbol, sizeof entry); // object pointer -> function pointer without a pedantic cast
        strata_status st{};
        info_ = entry(nullptr, &st);
        ASSERT_NE(info_, nullptr) << st.message;
    }
    void TearDown() override {
        if (handle_ != nullptr) dlclose(handle_);
    }
    const strata_quant_desc *find(const char *name) const {
        for (uint32_t i = 0; i < info_->n_descriptors; ++i) {
            if (std::strcmp(info_->descriptors[i]->name, name) == 0) {
                return reinterpret_cast<const strata_quant_desc *>(info_->descriptors[i]);
            }
        }
        return nullptr;
    }

    void *handle_ = nullptr;
    const strata_plugin_info *info_ = nullptr;
};

TEST_F(QuantPlugin, InfoDescribesThePlugin) {
    EXPECT_EQ(info_->struct_size, sizeof(strata_plugin_info));
    EXPECT_EQ(info_->abi_major, static_cast<uint32_t>(STRATA_ABI_MAJOR));
    EXPECT_LE(info_->abi_minor, static_cast<uint32_t>(STRATA_ABI_MINOR));
    EXPECT_STREQ(info_->name, "ggml_quants");
    EXPECT_STREQ(info_->version, "0.1.0");
    EXPECT_STREQ(info_->license, "MIT");
    EXPECT_NE(info_->description, nullptr);
    EXPECT_EQ(info_->n_config_keys, 0u);
    EXPECT_EQ(info_->n_descriptors, 15u);
}

TEST_F(QuantPlugin, DescriptorsHaveGgmlTypesAndSizes) {
    struct expected {
        const char *name;
        uint32_t type, block_elems, block_bytes;
    };
    for (const expected &e : {expected{"f32", 0, 1, 4}, expected{"f16", 1, 1, 2}, expected{"bf16", 30, 1, 2},
                              expected{"q8_0", 8, 32, 34}, expected{"q4_0", 2, 32, 18}}) {
        const strata_quant_desc *d = find(e.name);
        ASSERT_NE(d, nullptr) << e.name;
        EXPECT_EQ(d->header.kind, static_cast<uint32_t>(STRATA_KIND_QUANT));
        EXPECT_EQ(d->header.struct_size, sizeof(strata_quant_desc));
        EXPECT_EQ(d->header.required_size, offsetof(strata_quant_desc, kernel_name));
        EXPECT_EQ(d->ggml_type, e.type) << e.name;
        EXPECT_EQ(d->block_elems, e.block_elems) << e.name;
        EXPECT_EQ(d->block_bytes, e.block_bytes) << e.name;
        EXPECT_NE(d->dequantize_row, nullptr);
        EXPECT_NE(d->quantize_row, nullptr);
        EXPECT_NE(d->dot_f32, nullptr);
        ASSERT_TRUE(STRATA_HAS_SLOT(d, kernel_name));
        // The plugin picks its kernels the same way this process would (same CPU, same environment).
        EXPECT_STREQ(d->kernel_name(), q::kernel_set_name(q::select_kernel_set()));
    }
}

TEST_F(QuantPlugin, DotThroughThePluginMatchesReference) {
    const int64_t n = 4096;
    std::vector<float> w(n), x(n);
    for (int64_t i = 0; i < n; ++i) {
        w[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
        x[i] = std::cos(0.11f * static_cast<float>(i));
    }
    for (const char *name : {"f32", "f16", "bf16", "q8_0", "q4_0"}) {
        const strata_quant_desc *d = find(name);
        ASSERT_NE(d, nullptr);
        std::vector<uint8_t> row(static_cast<size_t>(n / d->block_elems * d->block_bytes));
        d->quantize_row(w.data(), row.data(), n);
        std::vector<float> deq(n);
        d->dequantize_row(row.data(), deq.data(), n);
        double expected = 0, magnitude = 0;
        for (int64_t i = 0; i < n; ++i) {
            expected += static_cast<double>(deq[i]) * x[i];
            magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
        }
        EXPECT_NEAR(d->dot_f32(row.data(), x.data(), n), expected, 1e-5 * magnitude) << name;
        // The dequantized row is close to the original weights (the format really was applied). The loosest
        // format is Q4_0: up to |d| = max|w|/8 = 3/8 on clamped elements.
        double max_err = 0;
        for (int64_t i = 0; i < n; ++i) max_err = std::fmax(max_err, std::fabs(deq[i] - w[i]));
        EXPECT_LT(max_err, 0.4) << name;
    }
}

// ABI 1.1: the block formats export the integer path; the float formats do not. Through the loaded module, the
// integer dot of a row with quantized activations tracks the float dot (activations lose ~8 bits, as in llama.cpp).
TEST_F(QuantPlugin, IntegerPathThroughThePlugin) {
    EXPECT_GE(info_->abi_minor, 1u);
    for (const char *name : {"f32", "f16", "bf16"}) {
        const strata_quant_desc *d = find(name);
        ASSERT_NE(d, nullptr);
        EXPECT_FALSE(STRATA_HAS_SLOT(d, dot_act)) << name;
        EXPECT_EQ(d->act_block_bytes, 0u) << name;
    }
    const int64_t n = 4096;
    std::vector<float> w(n), x(n);
    for (int64_t i = 0; i < n; ++i) {
        w[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
        x[i] = std::cos(0.11f * static_cast<float>(i));
    }
    for (const char *name : {"q8_0", "q4_0"}) {
        const strata_quant_desc *d = find(name);
        ASSERT_NE(d, nullptr);
        ASSERT_TRUE(STRATA_HAS_SLOT(d, dot_act)) << name;
        ASSERT_TRUE(STRATA_HAS_SLOT(d, quantize_activations)) << name;
        ASSERT_GT(d->act_block_bytes, 0u) << name;
        std::vector<uint8_t> row(static_cast<size_t>(n / d->block_elems * d->block_bytes));
        d->quantize_row(w.data(), row.data(), n);
        std::vector<uint64_t> xq(static_cast<size_t>(n / d->block_elems * d->act_block_bytes / 8 + 1)); // aligned
        d->quantize_activations(x.data(), xq.data(), n);
        double magnitude = 0;
        std::vector<float> deq(n);
        d->dequantize_row(row.data(), deq.data(), n);
        for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
        EXPECT_NEAR(d->dot_act(row.data(), xq.data(), n), d->dot_f32(row.data(), x.data(), n), 1e-2 * magnitude)
            << name;
    }
}

} // namespace
