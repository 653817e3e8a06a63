#include "engine/engine_api.hpp"
#include "engine/replica_set.hpp"

#include "common/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <exception>
#include <stdexcept>

namespace strata::engine {

namespace {

replica_set &replicas(strata_engine *e) { return *reinterpret_cast<replica_set *>(e); }
// Replica 0: the model, its vocabulary and templates (every replica loads the same file).
engine &self(strata_engine *e) { return replicas(e).front(); }

int32_t report(strata_status *st, int32_t code, const char *what) {
    if (st != nullptr) {
        st->code = code;
        std::snprintf(st->message, sizeof st->message, "%s", what);
    }
    return code;
}

// Runs f, turning exceptions into a status so none crosses into the frontend plugin (a coded_error keeps its code).
template <class F> int32_t guard(strata_status *st, F &&f) noexcept {
    try {
        f();
        return STRATA_OK;
    } catch (const coded_error &e) {
        return report(st, e.code(), e.what());
    } catch (const std::exception &e) {
        return report(st, STRATA_ERR_INVALID_ARGUMENT, e.what());
    } catch (...) {
        return report(st, STRATA_ERR_INTERNAL, "unknown error");
    }
}

int32_t api_submit(strata_engine *e, const strata_request *req, strata_request_id *id, strata_status *st) {
    if (req == nullptr || id == nullptr) return report(st, STRATA_ERR_INVALID_ARGUMENT, "submit: null request");
    return guard(st, [&] { *id = replicas(e).submit(*req); });
}

int32_t api_wait(strata_engine *e, strata_request_id id, strata_request_result *result, strata_status *st) {
    return guard(st, [&] {
        strata_request_result r = replicas(e).wait(id);
        if (result != nullptr) *result = r;
    });
}

void api_cancel(strata_engine *e, strata_request_id id) {
    try {
        replicas(e).cancel(id);
    } catch (...) {
    }
}

// Copies only as much as the caller's struct holds: a frontend built against an older ABI passes a smaller one.
void api_get_stats(strata_engine *e, strata_engine_stats *out) {
    if (out == nullptr) return;
    const strata_engine_stats s = replicas(e).stats();
    const size_t n = out->struct_size == 0 ? offsetof(strata_engine_stats, kv_block_size)
                                           : std::min<size_t>(out->struct_size, sizeof s);
    std::memcpy(out, &s, n);
    out->struct_size = static_cast<uint32_t>(n);
}

int32_t api_tokenize(strata_engine *e, const char *text, int32_t add_bos, int32_t *ids, int32_t cap, int32_t *n,
                     strata_status *st) {
    return guard(st, [&] {
        std::vector<int32_t> toks = self(e).tokenizer().encode(text ? text : "", add_bos != 0, true); // as submit()
        const int32_t count = static_cast<int32_t>(toks.size());
        if (ids != nullptr) std::memcpy(ids, toks.data(), sizeof(int32_t) * static_cast<size_t>(std::min(count, cap)));
        if (n != nullptr) *n = count;
    });
}

int32_t api_detokenize(strata_engine *e, const int32_t *ids, int32_t n_ids, char *text, int32_t cap, int32_t *n,
                       strata_status *st) {
    return guard(st, [&] {
        const auto &tok = self(e).tokenizer();
        for (int32_t i = 0; i < n_ids; ++i) {
            if (ids[i] < 0 || ids[i] >= tok.n_vocab()) throw std::runtime_error("token id out of range");
        }
        std::string s = tok.decode(std::span<const int32_t>(ids, static_cast<size_t>(n_ids)));
        const int32_t len = static_cast<int32_t>(s.size());
        if (text != nullptr) std::memcpy(text, s.data(), static_cast<size_t>(std::min(len, cap)));
        if (n != nullptr) *n = len;
    });
}

int32_t api_apply_chat_template(strata_engine *e, const char *request_json, char *text, int32_t cap, int32_t *n,
                                strata_status *st) {
    if (request_json == nullptr) return report(st, STRATA_ERR_INVALID_ARGUMENT, "apply_chat_template: null request");
    try {
        // A bound on nesting before anything walks the request (templates see it, so its depth is theirs to bear).
        constexpr int max_depth = 128;
        const nlohmann::ordered_json::parser_callback_t depth_limit = [](int depth, nlohmann::ordered_json::parse_event_t,
                                                                        nlohmann::ordered_json &) {
            if (depth > max_depth) throw std::invalid_argument("chat request: JSON nested deeper than 128 levels");
            return true;
        };
        const auto request = nlohmann::ordered_json::parse(request_json, depth_limit, false);
        if (request.is_discarded()) return report(st, STRATA_ERR_INVALID_ARGUMENT, "chat request: not valid JSON");
        const std::string prompt = self(e).chat().render(request);
        const auto len = static_cast<int32_t>(std::min<size_t>(prompt.size(), INT32_MAX));
        if (text != nullptr && cap > 0) std::memcpy(text, prompt.data(), static_cast<size_t>(std::min(len, cap)));
        if (n != nullptr) *n = len;
        return STRATA_OK;
    } catch (const chat::template_exception &ex) {
        // The template's own refusal ("Conversation roles must alternate ..."): its text is for the client.
        return report(st, STRATA_ERR_INVALID_ARGUMENT, ex.message().c_str());
    } catch (const std::exception &ex) {
        return report(st, STRATA_ERR_INVALID_ARGUMENT, ex.what());
    }
}

const char *api_chat_template_source(strata_engine *e, const char *name) {
    const chat::template_source *t = self(e).chat().find(name ? std::string_view(name) : std::string_view());
    return t ? t->text.c_str() : nullptr;
}

const char *api_model_name(strata_engine *e) { return self(e).model_name().c_str(); }
const char *api_model_argument(strata_engine *e) { return self(e).options().model_argument.c_str(); }
int32_t api_max_model_len(strata_engine *e) { return self(e).max_model_len(); }
const char *api_model_metadata(strata_engine *e, const char *key) {
    return key == nullptr ? nullptr : self(e).metadata_string(key);
}

} // namespace

strata_engine_api make_engine_api(replica_set &e) {
    strata_engine_api api{};
    api.struct_size = sizeof api;
    api.engine = reinterpret_cast<strata_engine *>(&e);
    api.submit = api_submit;
    api.wait = api_wait;
    api.cancel = api_cancel;
    api.get_stats = api_get_stats;
    api.tokenize = api_tokenize;
    api.detokenize = api_detokenize;
    api.model_name = api_model_name;
    api.model_argument = api_model_argument;
    api.max_model_len = api_max_model_len;
    api.model_metadata = api_model_metadata;
    api.apply_chat_template = api_apply_chat_template;
    api.chat_template_source = api_chat_template_source;
    return api;
}

} // namespace strata::engine
