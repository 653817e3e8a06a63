// A checkpoint as `runtime plan` sees it before the download (config.json and the shard index only), next to the
// same checkpoint loaded: the plan must hold every loaded tensor at its real shape, type and size.
#pragma once

#include "model_file/model_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace strata::testing {

// A copy of `folder`'s config.json (and model.safetensors.index.json when it has one) in a fresh test-models/<name>.
inline std::string config_only_copy(const std::string &folder, const std::string &name) {
    namespace fs = std::filesystem;
    const fs::path only = fs::path(STRATA_BINARY_DIR) / "test-models" / name;
    fs::remove_all(only);
    fs::create_directories(only);
    for (const char *f : {"config.json", "model.safetensors.index.json"})
        if (fs::exists(fs::path(folder) / f)) fs::copy_file(fs::path(folder) / f, only / f);
    return only.string();
}

// Every tensor of `loaded` is in `planned` with the same dimensions, type, bytes and input order, and nothing more.
inline void expect_plan_matches(const model_file &loaded, const model_file &planned) {
    for (const auto &t : loaded.tensors()) {
        const gguf::tensor_info *p = planned.find_tensor(t.name);
        ASSERT_NE(p, nullptr) << t.name;
        EXPECT_EQ(p->ne, t.ne) << t.name;
        EXPECT_EQ(p->type, t.type) << t.name;
        EXPECT_EQ(p->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(p->input_order, t.input_order) << t.name;
    }
    EXPECT_EQ(planned.tensors().size(), loaded.tensors().size());
}

} // namespace strata::testing
