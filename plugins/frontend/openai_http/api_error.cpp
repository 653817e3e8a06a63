#include "api_error.hpp"

#include <nlohmann/json.hpp>

namespace strata::openai_http {

std::string api_error::to_json() const {
    nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) e["param"] = param;
    if (!code.empty()) e["code"] = code;
    return nlohmann::json{{"error", e}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

api_error bad_request(std::string message, std::string param) {
    api_error e;
    e.status = 400;
    e.message = std::move(message);
    e.param = std::move(param);
    return e;
}

} // namespace strata::openai_http
