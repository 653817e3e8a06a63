// An error as the OpenAI API reports it: an HTTP status plus {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <string>

namespace strata::openai_http {

struct api_error {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param; // empty = null
    std::string code;  // empty = null

    // The response body.
    std::string to_json() const;
};

api_error bad_request(std::string message, std::string param = {});

} // namespace strata::openai_http
