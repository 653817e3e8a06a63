#include "model_file/tensor_parallel_shard.hpp"

#include "common/error.hpp"

#include <strata/plugin_abi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace strata {

void tensor_parallel_shard::free_deleter::operator()(unsigned char *p) const { std::free(p); }

tensor_parallel_shard::tensor_parallel_shard(const model_file &whole,
                                             const std::map<std::string, tensor_split_rule> &rules, int32_t rank,
                                             int32_t size, const block_lookup &blocks, bool shapes_only)
    : whole_(whole), rank_(rank), size_(size), shapes_only_(shapes_only) {
    if (size < 1 || rank < 0 || rank >= size) fail("internal: tensor-parallel rank {} of {}", rank, size);
    for (const auto &[name, rule] : rules)
        if (whole.find_tensor(name) == nullptr)
            fail("internal: a tensor-parallel split names tensor '{}', which {} does not hold", name, whole.name());
    tensors_.reserve(whole.tensors().size());
    for (const gguf::tensor_info &t : whole.tensors()) {
        auto it = rules.find(t.name);
        tensors_.push_back(it == rules.end() || it->second.along == tensor_split_rule::axis::none
                               ? t
                               : cut(t, it->second, blocks));
    }
    if (shapes_only && std::any_of(tensors_.begin(), tensors_.end(), [](const auto &t) { return t.data == nullptr; })) {
        uint64_t largest = 1;
        for (const auto &t : tensors_)
            if (t.data == nullptr) largest = std::max(largest, t.n_bytes);
        zeros_ = mapped_file::zeros(static_cast<size_t>(largest));
        for (auto &t : tensors_)
            if (t.data == nullptr) t.data = zeros_.data();
    }
    for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const gguf::tensor_info *tensor_parallel_shard::find_tensor(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t tensor_parallel_shard::tensor_bytes() const {
    return std::accumulate(tensors_.begin(), tensors_.end(), uint64_t{0},
                           [](uint64_t s, const gguf::tensor_info &t) { return s + t.n_bytes; });
}

unsigned char *tensor_parallel_shard::own(uint64_t bytes) {
    // 64-byte aligned, as the file's tensor data is at least 32-byte aligned and the kernels load it with SIMD.
    void *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) fail("tensor parallel: cannot allocate {} bytes for rank {}'s part of the weights", bytes, rank_);
    owned_.emplace_back(static_cast<unsigned char *>(p));
    gathered_bytes_ += bytes;
    return owned_.back().get();
}

// Rank r's piece of every group: rows (contiguous byte ranges of whole rows) or columns (byte ranges inside each row,
// whole blocks of the type). One contiguous range stays a view of the file; more are gathered in order.
gguf::tensor_info tensor_parallel_shard::cut(const gguf::tensor_info &t, const tensor_split_rule &rule,
                                             const block_lookup &blocks) {
    const bool by_rows = rule.along == tensor_split_rule::axis::rows;
    // A 3-D tensor is a stack of matrices (a mixture's experts [cols, rows, n_expert]): its rows are every matrix's,
    // one after another, and a split of its rows must cut each matrix alike (the plugin's groups repeated per matrix).
    if (t.n_dims > 3 || (t.n_dims == 3 && t.ne[3] > 1))
        fail("{}: tensor '{}' has {} dimensions; tensor parallel splits stacks of matrices, matrices and vectors only",
             whole_.name(), t.name, t.n_dims);
    const int64_t stack = t.n_dims == 3 ? t.ne[2] : 1;
    if (t.input_order)
        fail("{}: tensor '{}' has an act-order input order (GPTQ desc_act), which tensor parallel cannot split yet; "
             "run it with tensor_parallel_size 1", whole_.name(), t.name);
    const int64_t cols = t.ne[0], rows = t.ne[1] * stack;
    const int64_t extent = by_rows ? rows : cols;
    if (rule.groups.empty() || std::accumulate(rule.groups.begin(), rule.groups.end(), int64_t{0}) != extent)
        fail("internal: tensor '{}''s split groups do not add up to its {} {}", t.name, extent, by_rows ? "rows" : "columns");
    if (by_rows && stack > 1) {
        const size_t per = rule.groups.size() / static_cast<size_t>(stack);
        bool alike = per > 0 && rule.groups.size() % static_cast<size_t>(stack) == 0;
        for (size_t i = 0; alike && i < rule.groups.size(); ++i) alike = rule.groups[i] == rule.groups[i % per];
        if (!alike)
            fail("internal: tensor '{}''s row split does not cut each of its {} stacked matrices alike", t.name, stack);
    }
    if (rows <= 0 || t.n_bytes % static_cast<uint64_t>(rows) != 0)
        fail("{}: tensor '{}' has {} bytes for {} rows", whole_.name(), t.name, t.n_bytes, rows);
    const auto row_bytes = static_cast<int64_t>(t.n_bytes / static_cast<uint64_t>(rows));
    // The byte ranges of this rank's pieces within one row (columns) or within the tensor (rows).
    std::vector<std::pair<int64_t, int64_t>> ranges; // offset, bytes
    int64_t at = 0, kept = 0;
    for (const int64_t group : rule.groups) {
        int64_t offset = 0, piece = 0;
        strata_split_piece(group, rank_, size_, &offset, &piece);
        if (piece == 0)
            fail("{}: tensor '{}' has {} {} in a part, too few for {} tensor-parallel ranks to hold a piece each",
                 whole_.name(), t.name, group, by_rows ? "rows" : "columns", size_);
        const int64_t first = at + offset;
        if (by_rows) {
            ranges.emplace_back(first * row_bytes, piece * row_bytes);
        } else {
            const auto [elems, bytes] = blocks(t.type);
            if (elems <= 0 || bytes <= 0 || cols % elems != 0)
                fail("{}: tensor '{}' of type {} cannot be cut into columns (its block size is unknown here)",
                     whole_.name(), t.name, t.type);
            if (piece % elems != 0 || first % elems != 0)
                fail("{}: tensor '{}' would give rank {} of {} its columns [{}, {}), not whole {}-element blocks of its "
                     "type; choose a tensor_parallel_size whose share is whole blocks (or a file of another type)",
                     whole_.name(), t.name, rank_, size_, first, first + piece, elems);
            ranges.emplace_back(first / elems * bytes, piece / elems * bytes);
        }
        at += group;
        kept += piece;
    }
    gguf::tensor_info out = t;
    if (by_rows) out.ne[1] = kept / stack;
    else out.ne[0] = kept;
    const int64_t out_rows = by_rows ? kept : rows;
    const int64_t out_row_bytes = by_rows ? row_bytes
                                          : std::accumulate(ranges.begin(), ranges.end(), int64_t{0},
                                                            [](int64_t s, const auto &r) { return s + r.second; });
    out.n_bytes = static_cast<uint64_t>(out_rows) * static_cast<uint64_t>(out_row_bytes);
    // A contiguous part: rows of one group, or a vector's elements of one group.
    if (ranges.size() == 1 && (by_rows || rows == 1)) {
        out.data = t.data != nullptr ? t.data + ranges.front().first : nullptr;
        out.offset = t.offset + static_cast<uint64_t>(ranges.front().first);
        return out;
    }
    if (shapes_only_ || t.data == nullptr) {
        out.data = nullptr; // a plan: nothing is read (the constructor points it at zeros)
        return out;
    }
    unsigned char *dst = own(out.n_bytes);
    if (by_rows) {
        for (const auto &[offset, bytes] : ranges) {
            std::memcpy(dst, t.data + offset, static_cast<size_t>(bytes));
            dst += bytes;
        }
    } else {
        for (int64_t r = 0; r < rows; ++r) {
            const uint8_t *row = t.data + r * row_bytes;
            for (const auto &[offset, bytes] : ranges) {
                std::memcpy(dst, row + offset, static_cast<size_t>(bytes));
                dst += bytes;
            }
        }
    }
    out.data = owned_.back().get();
    gathered_.insert(t.name);
    return out;
}

} // namespace strata
