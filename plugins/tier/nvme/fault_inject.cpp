// TEST ONLY: the nvme tier's fault plans (see fault_inject.hpp).
#include "fault_inject.hpp"

#include <strata/plugin.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace strata::nvme {

namespace {

constexpr uint64_t page = 4096;

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    size_t at = 0;
    for (;;) {
        const size_t next = s.find(sep, at);
        out.push_back(s.substr(at, next == std::string::npos ? std::string::npos : next - at));
        if (next == std::string::npos) return out;
        at = next + 1;
    }
}

bool parse_count(const std::string &text, uint64_t &out) {
    if (text.empty() || text.size() > 18) return false;
    for (char c : text)
        if (c < '0' || c > '9') return false;
    out = std::strtoull(text.c_str(), nullptr, 10);
    return true;
}

// Presents the inner queue's completions plus the ones the plan made up, never more than depth() in flight.
class fault_queue final : public io_queue {
  public:
    fault_queue(std::unique_ptr<io_queue> inner, fault_plan *plan)
        : io_queue(inner->depth()), inner_(std::move(inner)), plan_(plan), made_up_(inner_->depth()) {}

    void push(const io_request &r) override {
        ++in_flight_;
        if (std::optional<io_completion> c = plan_->decide(r)) {
            made_up_[(head_ + n_made_up_) % depth_] = *c;
            ++n_made_up_;
            return;
        }
        inner_->push(r);
    }

    io_completion wait_one() override {
        --in_flight_;
        if (n_made_up_ > 0) {
            const io_completion c = made_up_[head_];
            head_ = (head_ + 1) % depth_;
            --n_made_up_;
            return c;
        }
        return inner_->wait_one();
    }

  private:
    std::unique_ptr<io_queue> inner_;
    fault_plan *plan_;
    std::vector<io_completion> made_up_; // ring, in push order
    uint32_t head_ = 0;
    uint32_t n_made_up_ = 0;
};

} // namespace

std::unique_ptr<fault_plan> fault_plan::parse(const std::string &spec, const strata_host_services *host,
                                              std::string *error) {
    error->clear();
    if (spec.empty()) return nullptr;
    auto plan = std::make_unique<fault_plan>();
    plan->spec_ = spec;
    plan->host_ = host;
    for (const std::string &text : split(spec, ';')) {
        const std::vector<std::string> f = split(text, ':');
        auto bad = [&](const std::string &why) {
            *error = "nvme: [nvme] inject_faults rule \"" + text + "\": " + why +
                     " (expected read|write|any : eio|enospc|short [:after=N] [:count=M])";
            return nullptr;
        };
        if (f.size() < 2) return bad("needs an operation and a kind");
        rule &r = plan->rules_.emplace_back();
        r.text = text;
        if (f[0] == "any") r.any = true;
        else if (f[0] == "read") r.op = io_kind::read;
        else if (f[0] == "write") r.op = io_kind::write;
        else return bad("unknown operation \"" + f[0] + "\"");
        if (f[1] == "eio") r.error = EIO;
        else if (f[1] == "enospc") r.error = ENOSPC;
        else if (f[1] == "short") {
            r.error = ENODATA;
            r.short_transfer = true;
        } else return bad("unknown kind \"" + f[1] + "\"");
        for (size_t i = 2; i < f.size(); ++i) {
            const size_t eq = f[i].find('=');
            const std::string key = f[i].substr(0, eq);
            const std::string value = eq == std::string::npos ? std::string() : f[i].substr(eq + 1);
            uint64_t n = 0;
            if (!parse_count(value, n)) return bad("\"" + f[i] + "\" is not key=<count>");
            if (key == "after") r.after = n;
            else if (key == "count") r.count = n;
            else return bad("unknown parameter \"" + key + "\"");
        }
    }
    return plan;
}

std::optional<io_completion> fault_plan::decide(const io_request &r) {
    for (rule &x : rules_) {
        if (!x.any && x.op != r.kind) continue;
        const uint64_t n = x.seen.fetch_add(1);
        if (n < x.after || (x.count != 0 && n - x.after >= x.count)) continue;
        io_completion c{r.tag, x.error, r.file_offset, r.length};
        if (x.short_transfer) {
            const uint64_t kept = r.length / 2 / page * page;
            c.file_offset += kept;
            c.length -= kept;
        }
        const uint64_t total = injected_.fetch_add(1) + 1;
        plugin::log(host_, STRATA_LOG_WARN, "nvme",
                    "TEST ONLY: injected fault #%llu (inject_faults rule \"%s\"): %s of %llu bytes at file offset %llu reports %s",
                    static_cast<unsigned long long>(total), x.text.c_str(), r.kind == io_kind::read ? "read" : "write",
                    static_cast<unsigned long long>(r.length), static_cast<unsigned long long>(r.file_offset),
                    x.short_transfer ? "a short transfer (the file ends halfway)" : std::strerror(x.error));
        return c;
    }
    return std::nullopt;
}

std::unique_ptr<io_queue> with_faults(std::unique_ptr<io_queue> q, fault_plan *plan) {
    return std::make_unique<fault_queue>(std::move(q), plan);
}

} // namespace strata::nvme
