#include "openai.h"

#include <algorithm>

namespace tidegate::gateway {
namespace json = boost::json;

std::string error_body(const ApiError& e) {
  json::object err;
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? json::value(nullptr) : json::value(e.param);
  err["code"] = e.code.empty() ? json::value(nullptr) : json::value(e.code);
  json::object root;
  root["error"] = std::move(err);
  return json::serialize(root);
}

ApiError bad_request(std::string message, std::string param, std::string code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code), 0};
}

ApiError error_with_status(int status, std::string message, std::string code) {
  std::string type = "server_error";
  if (status == 401) type = "authentication_error";
  else if (status == 403) type = "permission_error";
  else if (status == 404 || status == 400 || status == 413 || status == 405 || status == 431) type = "invalid_request_error";
  else if (status == 429) type = "rate_limit_error";
  return ApiError{status, std::move(message), std::move(type), "", std::move(code), 0};
}

namespace {

std::optional<ApiError> wrong_type(const char* field, const char* expected) {
  return bad_request(std::string("'") + field + "' must be " + expected, field, "invalid_type");
}

// Parses a request body into a DOM whose nodes come from one arena rather than one malloc
// each. The arena is reference-counted by the values themselves, so a part a filter copies
// out keeps it alive; it goes with the last of them. The parser (and its work stack) is the
// thread's, reused request after request.
json::value parse_body(std::string_view body, json::error_code& ec) {
  thread_local json::parser parser;
  parser.reset(json::make_shared_resource<json::monotonic_resource>(std::max<std::size_t>(1024, 2 * body.size())));
  parser.write(body.data(), body.size(), ec);
  if (ec) {
    parser.reset();  // drop the partial document and its arena now
    return nullptr;
  }
  return parser.release();
}

// A prompt/input is "empty" if it is "", [] or missing.
bool empty_text_or_array(const json::value& v) {
  if (v.is_string()) return v.get_string().empty();
  if (v.is_array()) return v.get_array().empty();
  return false;
}

}  // namespace

std::optional<ApiError> parse_request(Endpoint endpoint, std::string_view body, ParsedRequest& out) {
  out.endpoint = endpoint;
  json::error_code ec;
  auto parsed = std::make_shared<const json::value>(parse_body(body, ec));
  if (ec) return bad_request("request body is not valid JSON: " + ec.message(), "", "invalid_json");
  if (!parsed->is_object()) return bad_request("request body must be a JSON object", "", "invalid_json");
  out.json = parsed;
  const auto& obj = parsed->get_object();

  const auto* model = obj.if_contains("model");
  if (!model || model->is_null()) return bad_request("you must provide a model parameter", "model", "missing_model");
  if (!model->is_string()) return wrong_type("model", "a string");
  out.model = model->get_string();
  if (out.model.empty()) return bad_request("'model' must not be empty", "model", "missing_model");

  if (endpoint == Endpoint::kChat) {
    const auto* messages = obj.if_contains("messages");
    if (!messages) return bad_request("'messages' is required", "messages", "missing_messages");
    if (!messages->is_array()) return wrong_type("messages", "an array");
    if (messages->get_array().empty()) return bad_request("'messages' must not be empty", "messages", "empty_messages");
    for (const auto& m : messages->get_array())
      if (!m.is_object()) return wrong_type("messages", "an array of objects");
  } else if (endpoint == Endpoint::kCompletions) {
    const auto* prompt = obj.if_contains("prompt");
    if (!prompt) return bad_request("'prompt' is required", "prompt", "missing_prompt");
    if (!prompt->is_string() && !prompt->is_array()) return wrong_type("prompt", "a string or an array");
    if (empty_text_or_array(*prompt)) return bad_request("'prompt' must not be empty", "prompt", "empty_prompt");
  } else {
    const auto* input = obj.if_contains("input");
    if (!input) return bad_request("'input' is required", "input", "missing_input");
    if (!input->is_string() && !input->is_array()) return wrong_type("input", "a string or an array");
    if (empty_text_or_array(*input)) return bad_request("'input' must not be empty", "input", "empty_input");
  }

  if (const auto* s = obj.if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return wrong_type("stream", "a boolean");
    out.stream = s->get_bool();
  }
  if (out.stream && endpoint == Endpoint::kEmbeddings) return bad_request("embeddings cannot stream", "stream", "invalid_value");
  if (const auto* so = obj.if_contains("stream_options"); so && !so->is_null()) {
    if (!so->is_object()) return wrong_type("stream_options", "an object");
    if (const auto* iu = so->get_object().if_contains("include_usage"); iu && !iu->is_null()) {
      if (!iu->is_bool()) return wrong_type("stream_options.include_usage", "a boolean");
      out.client_wants_usage = iu->get_bool();
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (const auto* mt = obj.if_contains(key); mt && !mt->is_null()) {
      if (!mt->is_int64() && !mt->is_uint64()) return wrong_type(key, "an integer");
      const auto v = mt->to_number<std::int64_t>();
      if (v < 0) return bad_request(std::string("'") + key + "' must be >= 0", key, "invalid_value");
      out.max_tokens = v;
    }
  }
  if (const auto* t = obj.if_contains("temperature"); t && !t->is_null()) {
    if (!t->is_number()) return wrong_type("temperature", "a number");
    out.temperature = t->to_number<double>();
    if (*out.temperature < 0 || *out.temperature > 2) return bad_request("'temperature' must be between 0 and 2", "temperature", "invalid_value");
  }
  if (const auto* n = obj.if_contains("n"); n && !n->is_null()) {
    if (!n->is_int64() && !n->is_uint64()) return wrong_type("n", "an integer");
    out.n = n->to_number<std::int64_t>();
    if (out.n < 1 || out.n > 128) return bad_request("'n' must be between 1 and 128", "n", "invalid_value");
  }
  if (const auto* u = obj.if_contains("user"); u && !u->is_null()) {
    if (!u->is_string()) return wrong_type("user", "a string");
    out.user = u->get_string();
  }

  if (out.stream && !out.client_wants_usage) {
    // The gateway always learns token counts; the extra usage chunk is stripped later.
    json::object copy = obj;
    auto& so = copy["stream_options"];
    if (!so.is_object()) so = json::object();
    so.get_object()["include_usage"] = true;
    out.rewritten_body = json::serialize(copy);
    out.usage_injected = true;
  }
  out.client_body = body;
  return std::nullopt;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Length differences are folded into the result instead of returning early.
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace tidegate::gateway
