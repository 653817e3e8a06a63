// Example frontend plugin: greets with the loaded model's name and exits. A real frontend (CLI, HTTP server) has the
// same shape: create() keeps the borrowed engine API, run() serves until done or request_stop(), destroy() cleans up.
#include <strata/plugin.hpp>

#include <atomic>
#include <cstdio>
#include <new>
#include <string>

namespace {

constexpr const char *plugin_name = "example_frontend";

struct frontend {
    const strata_engine_api *engine = nullptr; // borrowed: the host guarantees it outlives the frontend
    std::string greeting;                      // owned copy: config strings are only borrowed
    std::atomic<bool> stop{false};
};

strata_frontend *create(const strata_frontend_create_args *args, strata_status *st) {
    if (args == nullptr || args->engine == nullptr) {
        strata::plugin::fail(st, STRATA_ERR_INVALID_ARGUMENT, "example_frontend: create needs the engine API");
        return nullptr;
    }
    // guarded_create turns exceptions (std::string may throw bad_alloc) into a status: none may cross the C ABI.
    auto *fe = strata::plugin::guarded_create<frontend>(st, [&] {
        auto *f = new frontend;
        f->engine = args->engine;
        // The host validated [example_frontend] against config_keys below and fills in defaults; the fallback only
        // matters when a host passes no config view at all.
        f->greeting = strata::plugin::config(args->config).get_string("greeting").value_or("hello from frontend");
        return f;
    });
    if (fe != nullptr) strata::plugin::ok(st);
    return reinterpret_cast<strata_frontend *>(fe); // caller owns; frees with destroy
}

int32_t run(strata_frontend *handle, strata_status *st) {
    auto *fe = reinterpret_cast<frontend *>(handle);
    if (fe->stop.load()) return 0;
    const strata_engine_api *api = fe->engine;
    const char *model = api->model_name != nullptr ? api->model_name(api->engine) : nullptr; // borrowed string
    std::printf("%s: %s\n", fe->greeting.c_str(), model != nullptr ? model : "(no model)");
    std::fflush(stdout);
    strata::plugin::ok(st);
    return 0; // the process exit code
}

void request_stop(strata_frontend *handle) { reinterpret_cast<frontend *>(handle)->stop.store(true); }

void destroy(strata_frontend *handle) { delete reinterpret_cast<frontend *>(handle); }

const strata_frontend_desc &descriptor() {
    static const strata_frontend_desc desc = [] {
        strata_frontend_desc d{};
        // A frontend has no optional slots: required_size is the whole descriptor.
        d.header = strata::plugin::make_header<strata_frontend_desc>(STRATA_KIND_FRONTEND, "example",
                                                                     sizeof(strata_frontend_desc));
        d.create = &create;
        d.run = &run;
        d.request_stop = &request_stop;
        d.destroy = &destroy;
        return d;
    }();
    return desc;
}

// Keys of the TOML table [example_frontend]; the host validates them and shows them in `runtime --help`.
const strata_config_key config_keys[] = {
    {"greeting", STRATA_CONFIG_STRING, "\"hello from frontend\"", 0, 0, "what to print before the model name",
     "--greeting", nullptr},
};

const strata_plugin_info &plugin_info() {
    static const strata_descriptor_header *const descriptors[] = {&descriptor().header};
    // make_info takes the counts from the arrays and the ABI version from the SDK it is built against.
    static const strata_plugin_info info = strata::plugin::make_info(plugin_name, "0.1.0", "MIT", "SDK example: prints a greeting with the model name", descriptors, config_keys);
    return info;
}

} // namespace

STRATA_PLUGIN_DEFINE(plugin_info())
