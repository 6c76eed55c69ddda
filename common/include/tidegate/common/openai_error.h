#pragma once
// The OpenAI error object, {"error": {"message", "type", "param", "code"}}, which every error
// Tidegate answers on its HTTP APIs carries (the data path's local replies, the admin routes, the
// cost report), so clients such as the official SDKs parse them all the same way. An empty
// `param` or `code` is written as null, as OpenAI does.
#include <string>
#include <string_view>

namespace tidegate::common {

std::string openai_error_body(std::string_view message, std::string_view type, std::string_view code = {},
                              std::string_view param = {});

}  // namespace tidegate::common
