#include "tidegate/common/openai_error.h"

#include <boost/json.hpp>

namespace tidegate::common {

std::string openai_error_body(std::string_view message, std::string_view type, std::string_view code,
                              std::string_view param) {
  namespace json = boost::json;
  auto or_null = [](std::string_view v) { return v.empty() ? json::value(nullptr) : json::value(json::string(v)); };
  json::object err;
  err["message"] = json::string(message);
  err["type"] = json::string(type);
  err["param"] = or_null(param);
  err["code"] = or_null(code);
  json::object root;
  root["error"] = std::move(err);
  return json::serialize(root);
}

}  // namespace tidegate::common
