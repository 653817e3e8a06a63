// What holds on every machine, GPU or not: the plugin passes the registry's ABI checks, declares its config table,
// reports a score without crashing, explains a failed create(), and rejects bad arguments before touching CUDA.
#include "cuda_test_support.hpp"

#include <cstdio>
#include <cstring>

namespace {

using namespace cuda_test;

TEST(CudaPlugin, LoadsThroughTheRegistry) {
    plugins &p = loaded();
    ASSERT_TRUE(p.load_error.empty()) << p.load_error;
    ASSERT_NE(p.cuda, nullptr);
    EXPECT_STREQ(p.cuda->header.name, "cuda");
    EXPECT_TRUE(p.reg.rejections().empty());
}

TEST(CudaPlugin, OffersTheAbi15Slots) {
    const strata_device_desc *d = loaded().cuda;
    ASSERT_NE(d, nullptr);
    EXPECT_TRUE(STRATA_HAS_SLOT(d, kv_store));
    EXPECT_TRUE(STRATA_HAS_SLOT(d, paged_attention));
    EXPECT_TRUE(STRATA_HAS_SLOT(d, copy));
    EXPECT_TRUE(STRATA_HAS_SLOT(d, host_addressable));
    EXPECT_TRUE(STRATA_HAS_SLOT(d, host_register));
    EXPECT_TRUE(STRATA_HAS_SLOT(d, host_unregister));
    EXPECT_TRUE(STRATA_HAS_SLOT(d, mem_info));
    EXPECT_TRUE(STRATA_HAS_SLOT(d, fence_record)) << "ABI 1.7";
    EXPECT_TRUE(STRATA_HAS_SLOT(d, copy_after)) << "ABI 1.7";
}

// Since 1.16/1.17: the expert ops, and `supports`, which answers without a GPU (types, alignment, head sizes, RoPE
// widths: what the kernels take), as the CPU device answers for its own.
TEST(CudaPlugin, OffersTheExpertOpsAndSaysWhatItCannotRun) {
    const strata_device_desc *d = loaded().cuda;
    ASSERT_NE(d, nullptr);
    EXPECT_TRUE(STRATA_HAS_SLOT(d, moe_route) && STRATA_HAS_SLOT(d, matmul_id) && STRATA_HAS_SLOT(d, moe_combine) &&
                STRATA_HAS_SLOT(d, sigmoid_gate_add));
    ASSERT_TRUE(STRATA_HAS_SLOT(d, supports));
    const strata_quant_desc *q8 = loaded().quant(8);
    ASSERT_NE(q8, nullptr);
    strata_tensor_view w{};
    w.struct_size = sizeof w;
    w.ggml_type = 8;
    w.quant = q8;
    w.rows = 64;
    w.cols = 256;
    w.row_bytes = 8 * 34;
    w.name = "blk.0.attn_q.weight";
    strata_support_query q{};
    q.struct_size = sizeof q;
    q.kind = STRATA_SUPPORT_WEIGHT;
    q.weight = &w;
    char why[256] = {0};
    EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 1) << why; // no data yet: the type and shape are asked
    w.ggml_type = 16; // IQ2_XXS: no kernel
    w.quant = nullptr;
    EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 0);
    EXPECT_NE(std::strstr(why, "tensor 'blk.0.attn_q.weight' has ggml type 16"), nullptr) << why;
    q.kind = STRATA_SUPPORT_ATTENTION;
    q.n_heads = 8;
    q.n_kv_heads = 2;
    q.head_dim = 512;
    EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 0);
    EXPECT_NE(std::strstr(why, "head_dim = 512; this device supports up to 256"), nullptr) << why;
    q.head_dim = 128;
    EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 1) << why;
    // ABI 1.20: the KV cache's type; float16, bfloat16, the FP8 types and (1.23) q8_0 are kept, other types refused
    // by number; q8_0 only for heads of whole 32-value groups.
    for (uint32_t t : {uint32_t{STRATA_KV_F16}, uint32_t{STRATA_KV_BF16}, uint32_t{STRATA_KV_FP8_E4M3},
                       uint32_t{STRATA_KV_FP8_E5M2}, uint32_t{STRATA_KV_Q8_0}}) {
        q.kv_type = t;
        EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 1) << why;
    }
    q.kv_type = 9;
    EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 0);
    EXPECT_NE(std::strstr(why, "a KV cache of type 9"), nullptr) << why;
    q.kv_type = STRATA_KV_Q8_0;
    q.head_dim = 80;
    EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 0);
    EXPECT_NE(std::strstr(why, "heads of 80 values are not whole groups"), nullptr) << why;
    q.head_dim = 128;
    q.kv_type = STRATA_KV_F32;
    q.kind = STRATA_SUPPORT_ROPE;
    q.rot_dims = 2048;
    EXPECT_EQ(d->supports(nullptr, &q, why, sizeof why), 0);
    const strata_device_desc *cpu = loaded().cpu;
    ASSERT_TRUE(STRATA_HAS_SLOT(cpu, supports));
    EXPECT_EQ(cpu->supports(nullptr, &q, why, sizeof why), 1) << "the CPU device rotates any width";
    q.kind = STRATA_SUPPORT_WEIGHT;
    EXPECT_EQ(cpu->supports(nullptr, &q, why, sizeof why), 0) << "no quant plugin provides type 16";
    EXPECT_NE(std::strstr(why, "has no quant descriptor"), nullptr) << why;
}

// Since 1.7: the GPU says where it sits on PCI (for pinned memory on its nearest NUMA node); the CPU device has no
// bus id and leaves the slot empty.
TEST(CudaPlugin, OffersPciBusIdAndTheCpuDeviceDoesNot) {
    const plugins &p = loaded();
    ASSERT_NE(p.cuda, nullptr);
    ASSERT_NE(p.cpu, nullptr);
    EXPECT_TRUE(STRATA_HAS_SLOT(p.cuda, pci_bus_id));
    EXPECT_FALSE(STRATA_HAS_SLOT(p.cpu, pci_bus_id));
}

// The bus id as the GPU reports it: "dddd:bb:dd.f" in hex (some drivers write an 8-digit domain); a buffer too small
// for all of it gets nothing rather than a cut-off id that would name another device.
TEST(CudaPlugin, PciBusIdIsAWholeBusIdOrNothing) {
    REQUIRE_GPU();
    strata_status st{};
    device_ptr dev = create_device(loaded().cuda, &st);
    ASSERT_NE(dev, nullptr) << st.message;
    char id[64];
    std::memset(id, 'x', sizeof id);
    ASSERT_EQ(loaded().cuda->pci_bus_id(dev.get(), id, sizeof id), 1);
    unsigned domain = 0, bus = 0, slot = 0, function = 0;
    int consumed = 0;
    ASSERT_EQ(std::sscanf(id, "%x:%x:%x.%x%n", &domain, &bus, &slot, &function, &consumed), 4) << id;
    EXPECT_EQ(static_cast<size_t>(consumed), std::strlen(id)) << id;
    EXPECT_LT(bus, 256u);
    EXPECT_LT(slot, 32u);
    EXPECT_LT(function, 8u);
    std::printf("cuda device 0 is at PCI %s\n", id);

    char small[6];
    std::memset(small, 'x', sizeof small);
    EXPECT_EQ(loaded().cuda->pci_bus_id(dev.get(), small, sizeof small), 0);
    EXPECT_EQ(small[0], '\0');
}

TEST(CudaPlugin, DeclaresDeviceIndexInItsTable) {
    bool found = false;
    for (const auto &[table, keys] : loaded().reg.config_tables()) {
        if (table != "cuda") continue;
        for (uint32_t i = 0; i < keys.second; ++i)
            if (std::strcmp(keys.first[i].name, "device_index") == 0) {
                found = true;
                EXPECT_EQ(keys.first[i].type, static_cast<uint32_t>(STRATA_CONFIG_INT));
                EXPECT_STREQ(keys.first[i].default_value, "0");
            }
    }
    EXPECT_TRUE(found) << "the [cuda] table has no device_index key";
}

// Score 0 must mean create() fails with a message saying why (here: no driver or no GPU); a positive score must mean
// a device can be made and used for memory. The CPU device stays the choice where CUDA scores 0.
TEST(CudaPlugin, ScoreAgreesWithCreate) {
    plugins &p = loaded();
    ASSERT_NE(p.cuda, nullptr);
    ASSERT_NE(p.cpu, nullptr);
    const int32_t score = p.cuda->score();
    EXPECT_GE(score, 0);
    EXPECT_EQ(p.cuda->score(), score) << "score() must be stable";
    strata_status st{};
    device_ptr dev = create_device(p.cuda, &st);
    if (score == 0) {
        EXPECT_EQ(dev, nullptr);
        EXPECT_NE(st.code, STRATA_OK);
        EXPECT_EQ(std::strncmp(st.message, "cuda create: ", 13), 0) << st.message;
        EXPECT_GT(std::strlen(st.message), 20u) << st.message;
        EXPECT_EQ(p.reg.best_device().desc, p.cpu);
        std::printf("cuda score 0 here; create() says: %s\n", st.message);
    } else {
        ASSERT_NE(dev, nullptr) << st.message;
        EXPECT_GT(score, p.cpu->score());
        EXPECT_EQ(p.reg.best_device().desc, p.cuda);
        EXPECT_EQ(p.cuda->host_addressable(dev.get()), 0);
        std::printf("cuda score %d; %s\n", score,
                    p.host.messages.empty() ? "(no log)" : p.host.messages.back().c_str());
    }
}

// Every slot checks its device argument first, so none of this reaches the CUDA runtime.
TEST(CudaPlugin, SlotsRejectANullDevice) {
    const strata_device_desc *d = loaded().cuda;
    ASSERT_NE(d, nullptr);
    float buf[4] = {};
    int32_t ids[1] = {0};
    strata_tensor_view w{};
    w.struct_size = sizeof w;
    strata_attention_args attn{};
    attn.struct_size = sizeof attn;
    strata_kv_store_args store{};
    store.struct_size = sizeof store;
    strata_paged_attention_args paged{};
    paged.struct_size = sizeof paged;

    auto expect_invalid = [](int32_t rc, const strata_status &st, const char *what) {
        EXPECT_EQ(rc, STRATA_ERR_INVALID_ARGUMENT) << what;
        EXPECT_NE(std::strstr(st.message, "device is NULL"), nullptr) << what << ": " << st.message;
    };
    strata_status st{};
    expect_invalid(d->matmul(nullptr, &w, buf, 1, buf, &st), st, "matmul");
    expect_invalid(d->embedding(nullptr, &w, ids, 1, buf, &st), st, "embedding");
    expect_invalid(d->rms_norm(nullptr, buf, buf, 1, 4, 1e-5f, buf, &st), st, "rms_norm");
    expect_invalid(d->rope(nullptr, buf, 1, 1, 4, 4, ids, 10000.0f, 0, &st), st, "rope");
    expect_invalid(d->attention(nullptr, &attn, &st), st, "attention");
    expect_invalid(d->swiglu(nullptr, buf, buf, 4, buf, &st), st, "swiglu");
    expect_invalid(d->add(nullptr, buf, buf, 4, buf, &st), st, "add");
    expect_invalid(d->softmax(nullptr, buf, 1, 4, &st), st, "softmax");
    expect_invalid(d->kv_store(nullptr, &store, &st), st, "kv_store");
    expect_invalid(d->paged_attention(nullptr, &paged, &st), st, "paged_attention");
    expect_invalid(d->copy(nullptr, buf, buf, 4, STRATA_COPY_D2D, &st), st, "copy");
    uint64_t fence = 0;
    expect_invalid(d->fence_record(nullptr, &fence, &st), st, "fence_record");
    expect_invalid(d->copy_after(nullptr, 1, buf, buf, 4, STRATA_COPY_D2D, &st), st, "copy_after");
    EXPECT_EQ(d->mem_alloc(nullptr, 16, &st), nullptr);
    EXPECT_NE(std::strstr(st.message, "device is NULL"), nullptr) << st.message;
    char id[32] = "unchanged";
    EXPECT_EQ(d->pci_bus_id(nullptr, id, sizeof id), 0);
    EXPECT_EQ(id[0], '\0');
    d->mem_free(nullptr, nullptr); // must not crash
    d->destroy(nullptr);
}

} // namespace
