#include "engine/tensor_check.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"

#include <fmt/format.h>

#include <set>

namespace strata::engine {

void check_tensors(const model_file &file, const plugins::registry &registry, const std::string &path) {
    uint64_t total = 0;
    for (const auto &t : file.tensors()) total += t.n_bytes;
    progress bar(fmt::format("checking {:.1f} MiB of weights for NaN/inf (--check-tensors)",
                             static_cast<double>(total) / 1048576.0),
                 total);
    uint64_t done = 0;
    std::set<std::string> unchecked;
    for (const auto &t : file.tensors()) {
        const auto q = registry.find_quant_by_type(t.type);
        if (q.desc == nullptr || !STRATA_HAS_SLOT(q.desc, find_nonfinite) || q.desc->find_nonfinite == nullptr) {
            unchecked.insert(q.desc != nullptr ? q.desc->header.name : fmt::format("type {}", t.type));
            done += t.n_bytes;
            continue;
        }
        const int64_t cols = t.ne[0];
        const int64_t rows = cols > 0 ? t.n_elements() / cols : 0;
        const uint64_t row_bytes = rows > 0 ? (t.n_bytes - t.input_order_bytes()) / static_cast<uint64_t>(rows) : 0;
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t at = q.desc->find_nonfinite(t.data + static_cast<uint64_t>(r) * row_bytes, cols);
            if (at >= 0) {
                fail("{}: tensor '{}' ({}) row {}: the block at element {} has a NaN or infinite scale or value; the "
                     "file is damaged (download it again, or quantize it again from the original weights)",
                     path, t.name, q.desc->header.name, r, at);
            }
            done += row_bytes;
            if ((r & 255) == 0) bar.update(done);
        }
    }
    bar.update(total);
    if (!unchecked.empty()) {
        std::string names;
        for (const auto &n : unchecked) names += (names.empty() ? "" : ", ") + n;
        log::warn("engine", "--check-tensors: no loaded quant plugin can check {} tensors (its plugin predates ABI 1.10)", names);
    }
}

} // namespace strata::engine
