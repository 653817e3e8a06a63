// `runtime plugins`: the registry's contents as an aligned text table.
#include "plugin_host/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace strata::plugins {

std::string registry::format_listing() const {
    const std::vector<listing_row> rows = list();
    constexpr size_t n_cols = 6;
    const std::array<std::string, n_cols> header{"KIND", "NAME", "VERSION", "ABI", "LICENSE", "PATH"};
    auto cells = [](const listing_row &r) {
        return std::array<const std::string *, n_cols>{&r.kind, &r.name, &r.version, &r.abi, &r.license, &r.path};
    };

    std::array<size_t, n_cols> width{};
    for (size_t c = 0; c < n_cols; ++c) width[c] = header[c].size();
    for (const listing_row &r : rows) {
        const auto row = cells(r);
        for (size_t c = 0; c < n_cols; ++c) width[c] = std::max(width[c], row[c]->size());
    }

    std::string out;
    auto append_line = [&](const std::array<const std::string *, n_cols> &row) {
        for (size_t c = 0; c < n_cols; ++c) {
            if (c + 1 == n_cols) {
                out += *row[c]; // no trailing padding on the last column
            } else {
                out += fmt::format("{:<{}}  ", *row[c], width[c]);
            }
        }
        out += '\n';
    };
    append_line({&header[0], &header[1], &header[2], &header[3], &header[4], &header[5]});
    for (const listing_row &r : rows) append_line(cells(r));
    return out;
}

} // namespace strata::plugins
