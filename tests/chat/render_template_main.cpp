// strata_render_template: renders chat templates with Strata's Jinja engine for scripts that compare it with other
// renderers (tests/chat/hf_jinja_reference.mjs). Input, on stdin or in the file named by the one argument, is a JSON
// job or a list of jobs:
//   {"template_file": "x.jinja" | "template": "...", "context": {...}, "now": "2026-01-02T03:04:05"}
// ("now" fixes strftime_now's clock). Output on stdout is a JSON list with one result per job:
//   {"output": "..."}  or  {"error": "...", "raised": true|false, "message": "..."}
// where raised says the template itself called raise_exception(message).
#include "chat/chat_template.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

namespace {

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw strata::error("cannot open " + path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "YYYY-MM-DDTHH:MM:SS" as a local broken-down time (tm_wday and tm_yday filled in by mktime).
std::tm parse_time(const std::string &text) {
    std::tm t{};
    if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min,
                    &t.tm_sec) != 6)
        throw strata::error("\"now\" must look like 2026-01-02T03:04:05, not " + text);
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    t.tm_isdst = -1;
    std::tm normalized = t;
    std::mktime(&normalized);
    t.tm_wday = normalized.tm_wday;
    t.tm_yday = normalized.tm_yday;
    return t;
}

nlohmann::ordered_json run_job(const nlohmann::ordered_json &job,
                               std::map<std::string, strata::chat::template_program> &cache) {
    try {
        std::string key, source, origin;
        if (job.contains("template_file")) {
            origin = job.at("template_file").get<std::string>();
            key = "file:" + origin;
        } else {
            origin = "template";
            key = "text:" + job.at("template").get<std::string>();
            source = job.at("template").get<std::string>();
        }
        auto it = cache.find(key);
        if (it == cache.end()) {
            if (job.contains("template_file")) source = read_file(origin);
            it = cache.emplace(key, strata::chat::template_program::parse(source, origin)).first;
        }
        strata::chat::render_options options;
        if (job.contains("now")) {
            const std::tm now = parse_time(job.at("now").get<std::string>());
            options.now = [now] { return now; };
        }
        const nlohmann::ordered_json context = job.value("context", nlohmann::ordered_json::object());
        return {{"output", it->second.render(context, options)}};
    } catch (const strata::chat::template_exception &e) {
        return {{"error", e.what()}, {"raised", true}, {"message", e.message()}};
    } catch (const std::exception &e) {
        return {{"error", e.what()}, {"raised", false}};
    }
}

} // namespace

int main(int argc, char **argv) {
    try {
        const std::string input =
            argc > 1 ? read_file(argv[1])
                     : std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        const auto request = nlohmann::ordered_json::parse(input);
        const nlohmann::ordered_json jobs = request.is_array()         ? request
                                            : request.contains("jobs") ? request.at("jobs")
                                                                       : nlohmann::ordered_json::array({request});
        std::map<std::string, strata::chat::template_program> cache;
        nlohmann::ordered_json results = nlohmann::ordered_json::array();
        for (const auto &job : jobs) results.push_back(run_job(job, cache));
        std::cout << results.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
        return 0;
    } catch (const std::exception &e) {
        std::cerr << "strata_render_template: " << e.what() << "\n";
        return 1;
    }
}
