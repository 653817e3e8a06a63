#include "config/config_view.hpp"
#include "example_schema.hpp"

#include <strata/plugin.hpp>

#include <gtest/gtest.h>

#include <cstring>

using namespace strata::config;

namespace {

schema schema_with_plugin() {
    schema s = test_support::example_schema();
    static const strata_config_key keys[] = {
        {"threads", STRATA_CONFIG_INT, "0", 0, 0, "0 = one per core", nullptr, nullptr},
        {"pin", STRATA_CONFIG_BOOL, "true", 0, 0, "pin workers", nullptr, nullptr},
        {"ratio", STRATA_CONFIG_FLOAT, "0.5", 0, 1, "a fraction", nullptr, nullptr},
        {"kernel", STRATA_CONFIG_STRING, "\"auto\"", 0, 0, "kernel", nullptr, "auto|avx2|scalar"},
        {"arena", STRATA_CONFIG_BYTES, "\"64MiB\"", 0, 0, "scratch", nullptr, nullptr},
        {"devices", STRATA_CONFIG_STRING_LIST, nullptr, 0, 0, "devices", nullptr, nullptr},
    };
    s.add_plugin_table("cpu", keys, 6);
    return s;
}

} // namespace

TEST(ConfigView, RoundTripsEveryTypeThroughTheCAbi) {
    const schema s = schema_with_plugin();
    document doc = document::from_string("[cpu]\nthreads = 8\nkernel = \"avx2\"\ndevices = [\"a\", \"bb\"]\n", "x.toml");
    doc.set_override("cpu.pin=false", "--set");
    doc.validate(s);
    const plugin_config_view holder(doc, s, "cpu");
    const strata_config_view *v = holder.view();
    ASSERT_EQ(v->struct_size, sizeof(strata_config_view));

    int64_t i = 0;
    ASSERT_EQ(v->get_int(v->ctx, "threads", &i), 1);
    EXPECT_EQ(i, 8);
    ASSERT_EQ(v->get_int(v->ctx, "arena", &i), 1); // BYTES keys read through get_int
    EXPECT_EQ(i, 64LL << 20);
    int32_t b = 1;
    ASSERT_EQ(v->get_bool(v->ctx, "pin", &b), 1);
    EXPECT_EQ(b, 0);
    double f = 0;
    ASSERT_EQ(v->get_float(v->ctx, "ratio", &f), 1);
    EXPECT_DOUBLE_EQ(f, 0.5);
    const char *str = nullptr;
    ASSERT_EQ(v->get_string(v->ctx, "kernel", &str), 1);
    EXPECT_STREQ(str, "avx2");
    const char *again = nullptr;
    ASSERT_EQ(v->get_string(v->ctx, "kernel", &again), 1);
    EXPECT_EQ(str, again); // the same borrowed storage, stable for the view's lifetime
    ASSERT_EQ(v->get_list_size(v->ctx, "devices"), 2);
    EXPECT_STREQ(v->get_list_item(v->ctx, "devices", 1), "bb");
    EXPECT_EQ(v->get_list_item(v->ctx, "devices", 2), nullptr);

    // Unknown keys, wrong getters and other tables' keys read as "not set" and leave the output alone.
    i = -7;
    EXPECT_EQ(v->get_int(v->ctx, "nope", &i), 0);
    EXPECT_EQ(v->get_int(v->ctx, "kernel", &i), 0);
    EXPECT_EQ(v->get_int(v->ctx, "top_k", &i), 0);
    EXPECT_EQ(v->get_int(v->ctx, nullptr, &i), 0);
    EXPECT_EQ(i, -7);
    EXPECT_EQ(v->get_list_size(v->ctx, "kernel"), 0);

    // The SDK's C++ helper sees the same values.
    const strata::plugin::config cfg(v);
    EXPECT_EQ(cfg.get_int("threads"), 8);
    EXPECT_EQ(cfg.get_bool("pin"), false);
}

TEST(ConfigView, UnsetListAndInvalidValuesReadAsNotSet) {
    const schema s = schema_with_plugin();
    const document doc = document::from_string("[cpu]\nthreads = \"many\"\n", "x.toml"); // not validated
    const plugin_config_view holder(doc, s, "cpu");
    const strata_config_view *v = holder.view();
    EXPECT_EQ(v->get_list_size(v->ctx, "devices"), 0);
    int64_t i = 0;
    EXPECT_EQ(v->get_int(v->ctx, "threads", &i), 0); // an error inside never crosses the C boundary
}
