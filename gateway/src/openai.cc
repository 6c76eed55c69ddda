#include "openai.h"

#include "request_scan.h"

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

// Writes `body` with stream_options.include_usage set to true. Edits the text where the change
// is local (no stream_options, or a null or empty one), so the client's bytes otherwise pass
// untouched; re-serialises through a DOM in the rare remaining cases (the one already built for
// filters, when there is one). False when boost::json rejects a body the scan accepted.
bool add_include_usage(std::string_view body, const RequestFacts& f, const json::value* dom, std::string& out) {
  constexpr std::string_view kOptions = R"({"include_usage":true})";
  const auto& so = f.stream_options;
  out.clear();
  if (so.occurrences == 0) {
    out.append(body.substr(0, f.object_end)).append(R"(,"stream_options":)").append(kOptions).append(body.substr(f.object_end));
    return true;
  }
  if (so.occurrences == 1 && (so.kind == JsonKind::kNull || (so.kind == JsonKind::kObject && so.size == 0))) {
    out.append(body.substr(0, so.begin)).append(kOptions).append(body.substr(so.end));
    return true;
  }
  json::error_code ec;
  auto copy = dom ? json::value(*dom, json::storage_ptr()) : json::parse(body, ec);
  if (ec || !copy.is_object()) return false;
  auto& options = copy.get_object()["stream_options"];
  if (!options.is_object()) options = json::object();
  options.get_object()["include_usage"] = true;
  out = json::serialize(copy);
  return true;
}

}  // namespace

std::optional<ApiError> parse_request(Endpoint endpoint, std::string_view body, ParsedRequest& out, bool build_dom) {
  out.endpoint = endpoint;
  RequestFacts f;
  if (!scan_request(body, f)) return bad_request("request body is not valid JSON", "", "invalid_json");
  if (!f.is_object) return bad_request("request body must be a JSON object", "", "invalid_json");
  if (build_dom) {
    json::error_code ec;
    out.json = std::make_shared<const json::value>(parse_body(body, ec));
    if (ec) return bad_request("request body is not valid JSON: " + ec.message(), "", "invalid_json");
  }

  if (f.model.kind == JsonKind::kMissing || f.model.kind == JsonKind::kNull)
    return bad_request("you must provide a model parameter", "model", "missing_model");
  if (f.model.kind != JsonKind::kString) return wrong_type("model", "a string");
  out.model.clear();
  f.model.text.append_to(out.model);
  if (out.model.empty()) return bad_request("'model' must not be empty", "model", "missing_model");

  if (endpoint == Endpoint::kChat) {
    const auto& m = f.messages;
    if (m.kind == JsonKind::kMissing) return bad_request("'messages' is required", "messages", "missing_messages");
    if (m.kind != JsonKind::kArray) return wrong_type("messages", "an array");
    if (m.size == 0) return bad_request("'messages' must not be empty", "messages", "empty_messages");
    if (!m.all_objects) return wrong_type("messages", "an array of objects");
    out.prompt_begin = m.begin, out.prompt_end = m.end;
  } else {
    const bool completions = endpoint == Endpoint::kCompletions;
    const auto& v = completions ? f.prompt : f.input;
    const char* name = completions ? "prompt" : "input";
    if (v.kind == JsonKind::kMissing)
      return bad_request(std::string("'") + name + "' is required", name, std::string("missing_") + name);
    if (v.kind != JsonKind::kString && v.kind != JsonKind::kArray) return wrong_type(name, "a string or an array");
    if ((v.kind == JsonKind::kString && v.text.raw.empty()) || (v.kind == JsonKind::kArray && v.size == 0))
      return bad_request(std::string("'") + name + "' must not be empty", name, std::string("empty_") + name);
    out.prompt_begin = v.begin, out.prompt_end = v.end;
  }

  if (f.stream.kind != JsonKind::kMissing && f.stream.kind != JsonKind::kNull) {
    if (f.stream.kind != JsonKind::kBool) return wrong_type("stream", "a boolean");
    out.stream = f.stream.boolean;
  }
  if (out.stream && endpoint == Endpoint::kEmbeddings) return bad_request("embeddings cannot stream", "stream", "invalid_value");
  if (f.stream_options.kind != JsonKind::kMissing && f.stream_options.kind != JsonKind::kNull) {
    if (f.stream_options.kind != JsonKind::kObject) return wrong_type("stream_options", "an object");
    const auto& iu = f.include_usage;
    if (iu.kind != JsonKind::kMissing && iu.kind != JsonKind::kNull) {
      if (iu.kind != JsonKind::kBool) return wrong_type("stream_options.include_usage", "a boolean");
      out.client_wants_usage = iu.boolean;
    }
  }
  for (const auto* m : {&f.max_tokens, &f.max_completion_tokens}) {
    if (m->kind == JsonKind::kMissing || m->kind == JsonKind::kNull) continue;
    const char* key = m == &f.max_tokens ? "max_tokens" : "max_completion_tokens";
    if (m->kind != JsonKind::kNumber || m->number.kind == JsonNumber::Kind::kDouble) return wrong_type(key, "an integer");
    if (m->number.kind == JsonNumber::Kind::kUint)
      return bad_request(std::string("'") + key + "' is too large", key, "invalid_value");
    // As OpenAI: 0 asks for an answer of nothing, which engines treat differently (llama.cpp
    // reads it as "no limit"), so it is refused rather than passed on.
    if (m->number.i < 1) return bad_request(std::string("'") + key + "' must be >= 1", key, "invalid_value");
    out.max_tokens = m->number.i;
  }
  if (f.temperature.kind != JsonKind::kMissing && f.temperature.kind != JsonKind::kNull) {
    if (f.temperature.kind != JsonKind::kNumber) return wrong_type("temperature", "a number");
    const auto& t = f.temperature.number;
    out.temperature = t.kind == JsonNumber::Kind::kInt    ? static_cast<double>(t.i)
                      : t.kind == JsonNumber::Kind::kUint ? static_cast<double>(t.u)
                                                          : t.d;
    if (*out.temperature < 0 || *out.temperature > 2) return bad_request("'temperature' must be between 0 and 2", "temperature", "invalid_value");
  }
  if (f.n.kind != JsonKind::kMissing && f.n.kind != JsonKind::kNull) {
    if (f.n.kind != JsonKind::kNumber || f.n.number.kind == JsonNumber::Kind::kDouble) return wrong_type("n", "an integer");
    if (f.n.number.kind == JsonNumber::Kind::kUint || f.n.number.i < 1 || f.n.number.i > 128)
      return bad_request("'n' must be between 1 and 128", "n", "invalid_value");
    out.n = f.n.number.i;
  }
  if (f.user.kind != JsonKind::kMissing && f.user.kind != JsonKind::kNull) {
    if (f.user.kind != JsonKind::kString) return wrong_type("user", "a string");
    out.user.clear();
    f.user.text.append_to(out.user);
  }

  out.client_body = body;
  if (out.stream && !out.client_wants_usage) {
    // The gateway always learns token counts; the extra usage chunk is stripped later.
    // The scan and boost::json agree on what is valid (ParseRequest.ScanAgreesWithFullParse);
    // should they ever not, boost::json, the parser the rewrite needs, has the last word.
    if (!add_include_usage(body, f, out.json.get(), out.rewritten_body))
      return bad_request("request body is not valid JSON", "", "invalid_json");
    out.usage_injected = true;
  }
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
