// An error as the OpenAI API reports it: an HTTP status plus {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <cstdint>
#include <string>

namespace strata::openai_http {

struct api_error {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param; // empty = null
    std::string code;  // empty = null
    int64_t retry_after_s = 0; // > 0: sent as a Retry-After header (a 503 the client may retry)

    // The response body.
    std::string to_json() const;
};

api_error bad_request(std::string message, std::string param = {});

} // namespace strata::openai_http
