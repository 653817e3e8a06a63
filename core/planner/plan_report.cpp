#include "planner/plan_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace strata::planner {

namespace {

// Table sizes: two decimals ("1.23 GiB"), the precision people compare budgets at.
std::string size_text(uint64_t bytes) {
    static constexpr std::array<const char *, 5> units{"B", "KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return fmt::format("{} B", bytes);
    double value = static_cast<double>(bytes);
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < units.size()) {
        value /= 1024.0;
        ++unit;
    }
    return fmt::format("{:.2f} {}", value, units[unit]);
}

std::string home_text(const std::string &home) { return home.empty() ? "(no room)" : home; }

struct segment {
    std::string home;
    mode how;
    uint64_t bytes;
};

// The (home, mode) parts of one layer slot's routed experts (experts) or of its other tensors, in the order they
// first appear.
std::vector<segment> segments_of(const plan &p, int32_t layer, bool experts = false) {
    std::vector<segment> parts;
    for (const auto &pl : p.placements) {
        if (pl.layer != layer || pl.routed_expert != experts) continue;
        auto same = std::find_if(parts.begin(), parts.end(),
                                 [&](const segment &s) { return s.home == pl.home && s.how == pl.how; });
        if (same == parts.end())
            parts.push_back({pl.home, pl.how, pl.bytes});
        else
            same->bytes += pl.bytes;
    }
    return parts;
}

std::string layers_label(int32_t first, int32_t last, bool experts) {
    const char *what = experts ? "experts" : first == last ? "layer" : "layers";
    return first == last ? fmt::format("{} {}", what, first) : fmt::format("{} {}-{}", what, first, last);
}

struct row {
    std::string what, home, how, bytes, detail;
};

} // namespace

std::vector<layer_group> group_layers(const plan &p, const inputs &in) {
    std::vector<layer_group> groups;
    auto edge = [&](int32_t layer, const char *what) {
        for (auto &s : segments_of(p, layer)) groups.push_back({what, layer, layer, s.home, s.how, s.bytes});
    };
    edge(-1, "embedding");
    // The layers' tensors, then their routed experts on rows of their own. Only a group built from whole layers may
    // absorb the next whole layer; split layers stand alone.
    for (const bool experts : {false, true}) {
        bool last_is_whole_layers = false;
        for (int32_t layer = 0; layer < in.n_layer; ++layer) {
            const auto parts = segments_of(p, layer, experts);
            const bool whole = parts.size() == 1;
            if (whole && last_is_whole_layers) {
                auto &last = groups.back();
                if (last.last_layer == layer - 1 && last.home == parts[0].home && last.how == parts[0].how) {
                    last.last_layer = layer;
                    last.bytes += parts[0].bytes;
                    last.what = layers_label(last.first_layer, layer, experts);
                    continue;
                }
            }
            for (const auto &s : parts)
                groups.push_back({layers_label(layer, layer, experts), layer, layer, s.home, s.how, s.bytes, experts});
            last_is_whole_layers = whole;
        }
    }
    edge(in.n_layer, "output");
    return groups;
}

std::string to_table(const plan &p, const inputs &in) {
    std::vector<row> rows;
    for (const auto &g : group_layers(p, in))
        rows.push_back(
            {g.what, home_text(g.home), g.home.empty() ? "-" : std::string(to_string(g.how)), size_text(g.bytes), ""});
    rows.push_back({"KV cache", "device", "", size_text(p.device_kv),
                    fmt::format("{} tokens x {}/token", p.kv_capacity_tokens, size_text(p.kv_bytes_per_token))});
    rows.push_back({"activations", "device", "", size_text(p.device_activation), ""});
    const uint64_t largest_streamed = p.staging_ring_bytes / (static_cast<uint64_t>(in.prefetch_depth) + 1);
    rows.push_back({"staging ring", "device", "", size_text(p.staging_ring_bytes),
                    p.staging_ring_bytes ? fmt::format("{} x {}", in.prefetch_depth + 1, size_text(largest_streamed))
                                         : std::string("nothing streamed")});
    if (p.on_cpu_ring_bytes > 0) {
        const uint64_t largest = p.on_cpu_ring_bytes / (static_cast<uint64_t>(in.prefetch_depth) + 1);
        rows.push_back({"ring, cpu layers", "device", "", size_text(p.on_cpu_ring_bytes),
                        fmt::format("{} x {}, for large batches", in.prefetch_depth + 1, size_text(largest))});
    }
    rows.push_back({"overhead", "device", "", size_text(p.device_overhead), ""});

    const uint64_t device_used = p.device_weights + p.device_kv + p.device_activation + p.device_overhead +
                                 p.staging_ring_bytes + p.on_cpu_ring_bytes;
    const size_t first_total = rows.size();
    rows.push_back(
        {"total", "device", "", size_text(device_used), fmt::format("of {} budget", size_text(p.device_budget))});
    for (const auto &t : in.tiers) {
        const auto used = p.tier_used.count(t.name) ? p.tier_used.at(t.name) : 0;
        std::string detail = fmt::format("of {} capacity", size_text(t.capacity));
        if (t.read_bandwidth > 0)
            detail += fmt::format(", reads {}/s", size_text(static_cast<uint64_t>(t.read_bandwidth)));
        rows.push_back({"total", t.name, "", size_text(used), detail});
    }

    row header{"what", "home", "how", "bytes", ""};
    size_t w_what = header.what.size(), w_home = header.home.size(), w_how = header.how.size(),
           w_bytes = header.bytes.size();
    for (const auto &r : rows) {
        w_what = std::max(w_what, r.what.size());
        w_home = std::max(w_home, r.home.size());
        w_how = std::max(w_how, r.how.size());
        w_bytes = std::max(w_bytes, r.bytes.size());
    }
    auto line = [&](const row &r) {
        std::string text = fmt::format("  {:<{}} | {:<{}} | {:<{}} | {:>{}}", r.what, w_what, r.home, w_home, r.how,
                                       w_how, r.bytes, w_bytes);
        if (!r.detail.empty()) text += " | " + r.detail;
        return text + "\n";
    };
    auto rule = [&] {
        return fmt::format("  {}-+-{}-+-{}-+-{}\n", std::string(w_what, '-'), std::string(w_home, '-'),
                           std::string(w_how, '-'), std::string(w_bytes, '-'));
    };

    std::string out =
        fmt::format("Memory plan for the {} device (budget {})\n", p.device_kind, size_text(p.device_budget));
    out += line(header);
    out += rule();
    for (size_t i = 0; i < rows.size(); ++i) {
        if (i == first_total) out += rule();
        out += line(rows[i]);
    }
    // Paged KV: sequences take blocks as they grow, so the capacity is shared; the figures say how many sequences of
    // the full max_model_len would fit on the device at once.
    out += fmt::format("KV capacity {} tokens on the device: {} sequences of max_model_len {} at once; largest "
                       "fitting max_model_len {}\n",
                       p.kv_capacity_tokens, p.max_fitting_concurrency, p.max_model_len, p.max_fitting_model_len);
    out += p.fits ? "fits: yes\n" : "fits: NO\n";
    for (const auto &problem : p.problems) out += "problem: " + problem + "\n";
    for (const auto &note : p.notes) out += "note: " + note + "\n";
    if (p.offloaded_bytes > 0)
        out += fmt::format("Using CPU offload with {}\n", size_text(p.offloaded_bytes));
    return out;
}

nlohmann::json to_json(const plan &p, const inputs &in) {
    using nlohmann::json;
    auto home_json = [](const std::string &home) { return home.empty() ? json(nullptr) : json(home); };
    json placements = json::array();
    for (const auto &pl : p.placements)
        placements.push_back({{"tensor", pl.tensor},
                              {"layer", pl.layer},
                              {"bytes", pl.bytes},
                              {"home", home_json(pl.home)},
                              {"mode", to_string(pl.how)},
                              {"routed_expert", pl.routed_expert}});
    json groups = json::array();
    for (const auto &g : group_layers(p, in))
        groups.push_back({{"what", g.what},
                          {"first_layer", g.first_layer},
                          {"last_layer", g.last_layer},
                          {"home", home_json(g.home)},
                          {"mode", to_string(g.how)},
                          {"bytes", g.bytes},
                          {"experts", g.experts}});
    json tiers = json::array();
    for (const auto &t : in.tiers)
        tiers.push_back({{"name", t.name},
                         {"capacity", t.capacity},
                         {"used", p.tier_used.count(t.name) ? p.tier_used.at(t.name) : 0},
                         {"read_bandwidth", t.read_bandwidth},
                         {"addressable", t.addressable}});
    return {
        {"device_kind", p.device_kind},
        {"device_budget", p.device_budget},
        {"device_weights", p.device_weights},
        {"device_kv", p.device_kv},
        {"device_activation", p.device_activation},
        {"device_overhead", p.device_overhead},
        {"staging_ring_bytes", p.staging_ring_bytes},
        {"on_cpu_ring_bytes", p.on_cpu_ring_bytes},
        {"prefetch_depth", in.prefetch_depth},
        {"tier_used", p.tier_used},
        {"kv_bytes_per_token", p.kv_bytes_per_token},
        {"kv_capacity_tokens", p.kv_capacity_tokens},
        {"max_model_len", p.max_model_len},
        {"max_num_seqs", p.max_num_seqs},
        {"max_fitting_model_len", p.max_fitting_model_len},
        {"max_fitting_concurrency", p.max_fitting_concurrency},
        {"offloaded_bytes", p.offloaded_bytes},
        {"offloaded_layers", p.offloaded_layers},
        {"embedding_output_offloaded", p.embedding_output_offloaded},
        {"fits", p.fits},
        {"problems", p.problems},
        {"notes", p.notes},
        {"placements", std::move(placements)},
        {"groups", std::move(groups)},
        {"tiers", std::move(tiers)},
    };
}

} // namespace strata::planner
