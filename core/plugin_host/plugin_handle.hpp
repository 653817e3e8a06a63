// How core holds what plugins give it: descriptors and created objects that keep their library loaded, and calls
// that turn a misbehaving plugin's exception into a strata::error naming the plugin.
#pragma once

#include "common/error.hpp"
#include "plugin_host/abi_rules.hpp"
#include "plugin_host/library.hpp"

#include <exception>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>

namespace strata::plugins {

// A descriptor plus a reference on the library that holds it: the descriptor (static storage in the .so) stays
// valid for as long as the handle lives, even after the registry that produced it is gone.
template <class Desc> struct handle {
    const Desc *desc = nullptr;
    std::shared_ptr<const library> lib;

    explicit operator bool() const { return desc != nullptr; }
    const Desc *operator->() const { return desc; }
};

// Owning pointer to an object a plugin created; its deleter calls the plugin's destroy and then drops the library
// reference, so the code of destroy is still mapped when it runs.
template <class T> using plugin_ptr = std::unique_ptr<T, std::function<void(T *)>>;

template <class T, class Desc> plugin_ptr<T> adopt(T *obj, const handle<Desc> &h, void (*destroy)(T *)) {
    if (obj == nullptr) return plugin_ptr<T>(nullptr, [](T *) {});
    if (destroy == nullptr) fail("adopt: plugin object of {} has no destroy function", h.lib ? h.lib->file_name() : "?");
    std::shared_ptr<const library> keep = h.lib;
    // The reference is dropped right after destroy (not when the deleter itself dies), so reset() unloads too.
    return plugin_ptr<T>(obj, [keep = std::move(keep), destroy](T *p) mutable {
        destroy(p);
        keep.reset();
    });
}

// Runs f() (a call into plugin code) and converts any exception escaping it into a strata::error that names the
// plugin file and the call. strata::error thrown by host code inside f passes through unchanged.
template <class F> auto call_guarded(const library &lib, std::string_view what, F &&f) -> decltype(std::forward<F>(f)()) {
    try {
        return std::forward<F>(f)();
    } catch (const strata::error &) {
        throw;
    } catch (const std::exception &e) {
        fail("plugin {} threw from {}: {} (plugins must not let exceptions cross the C ABI; wrap entry points in "
             "strata::plugin::guarded)",
             lib.file_name(), what, e.what());
    } catch (...) {
        fail("plugin {} threw from {}: a non-standard exception (plugins must not let exceptions cross the C ABI)",
             lib.file_name(), what);
    }
}

// The create/destroy pattern every kind shares: `create(strata_status*)` calls the plugin's create with the
// arguments the caller built, guarded; NULL becomes "plugin <file>: <kind> '<name>' create failed: <status>".
template <class Desc, class Create, class T>
plugin_ptr<T> create_guarded(const handle<Desc> &h, Create &&create, void (*destroy)(T *)) {
    if (!h || !h.lib) fail("create_guarded: empty plugin handle (no such plugin was found)");
    strata_status status{};
    T *obj = call_guarded(*h.lib, "create", [&] { return std::forward<Create>(create)(&status); });
    if (obj == nullptr) {
        status.message[sizeof status.message - 1] = '\0';
        fail("plugin {}: {} '{}' create failed: {} (code {})", h.lib->file_name(), kind_name(h.desc->header.kind),
             h.desc->header.name, status.message[0] != '\0' ? status.message : "no message", status.code);
    }
    return adopt(obj, h, destroy);
}

} // namespace strata::plugins
