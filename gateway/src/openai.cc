#include "openai.h"

#include "request_scan.h"
#include "tidegate/common/openai_error.h"
#include "tidegate/gateway/gateway.h"

#include <algorithm>

namespace tidegate::gateway {
namespace json = boost::json;

std::string error_body(const ApiError& e) { return common::openai_error_body(e.message, e.type, e.code, e.param); }

std::string_view error_type_for_status(int status) {
  if (status == 401) return "authentication_error";
  if (status == 403) return "permission_error";
  if (status == 429) return "rate_limit_error";
  if (status == 400 || status == 404 || status == 405 || status == 413 || status == 431) return "invalid_request_error";
  return "server_error";
}

ApiError api_error(Failure failure, std::string message, std::string param) {
  const auto& s = spec(failure);
  return ApiError{s.status, std::move(message), std::string(s.type), std::move(param), std::string(s.code), 0, {}, failure};
}

LocalReply refusal(Refusal why, std::string message, double retry_after_s) {
  Failure f = Failure::kRateLimited;
  switch (why) {
    case Refusal::kRateLimited: f = Failure::kRateLimited; break;
  }
  const auto e = api_error(f, std::move(message));
  LocalReply r;
  r.status = e.status;
  r.body = error_body(e);
  r.reason = e.code;
  if (retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(static_cast<long>(std::ceil(retry_after_s))));
  return r;
}

namespace {

std::optional<ApiError> wrong_type(const char* field, const char* expected) {
  return api_error(Failure::kInvalidType, std::string("'") + field + "' must be " + expected, field);
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

// Writes `body` with stream_options.include_usage set to true by editing the text in one place,
// so every other byte of the client's body passes untouched. Re-serialising through a DOM would
// not: Boost.JSON 1.81 reads a number of more than 17 digits to within an ulp, not exactly, and
// writes 1e400 back as text no parser accepts (both found by fuzz_request_scan). With repeated
// keys the last stream_options and its last include_usage are edited: the ones the scan records,
// Boost.JSON keeps and a last-key-wins parser upstream reads.
void add_include_usage(std::string_view body, const RequestFacts& f, std::string& out) {
  const auto& so = f.stream_options;
  const auto& iu = f.include_usage;
  auto splice = [&](std::size_t begin, std::size_t end, std::string_view text) {
    out.clear();
    out.append(body.substr(0, begin)).append(text).append(body.substr(end));
  };
  if (so.occurrences == 0) return splice(f.object_end, f.object_end, R"(,"stream_options":{"include_usage":true})");
  if (so.kind != JsonKind::kObject || so.size == 0) return splice(so.begin, so.end, R"({"include_usage":true})");
  // so.begin is the object's '{'; it has members, so the new one goes first with a comma.
  if (iu.occurrences == 0) return splice(so.begin + 1, so.begin + 1, R"("include_usage":true,)");
  splice(iu.begin, iu.end, "true");
}

}  // namespace

std::optional<ApiError> parse_request(Endpoint endpoint, std::string_view body, ParsedRequest& out, bool build_dom) {
  out.endpoint = endpoint;
  RequestFacts f;
  if (!scan_request(body, f)) return api_error(Failure::kInvalidJson, "request body is not valid JSON");
  if (!f.is_object) return api_error(Failure::kInvalidJson, "request body must be a JSON object");
  if (build_dom) {
    json::error_code ec;
    out.json = std::make_shared<const json::value>(parse_body(body, ec));
    if (ec) return api_error(Failure::kInvalidJson, "request body is not valid JSON: " + ec.message());
  }

  if (f.model.kind == JsonKind::kMissing || f.model.kind == JsonKind::kNull)
    return api_error(Failure::kMissingModel, "you must provide a model parameter", "model");
  if (f.model.kind != JsonKind::kString) return wrong_type("model", "a string");
  out.model.clear();
  f.model.text.append_to(out.model);
  if (out.model.empty()) return api_error(Failure::kMissingModel, "'model' must not be empty", "model");

  if (endpoint == Endpoint::kChat) {
    const auto& m = f.messages;
    if (m.kind == JsonKind::kMissing) return api_error(Failure::kMissingMessages, "'messages' is required", "messages");
    if (m.kind != JsonKind::kArray) return wrong_type("messages", "an array");
    if (m.size == 0) return api_error(Failure::kEmptyMessages, "'messages' must not be empty", "messages");
    if (!m.all_objects) return wrong_type("messages", "an array of objects");
    out.prompt_begin = m.begin, out.prompt_end = m.end;
  } else {
    const bool completions = endpoint == Endpoint::kCompletions;
    const auto& v = completions ? f.prompt : f.input;
    const char* name = completions ? "prompt" : "input";
    if (v.kind == JsonKind::kMissing)
      return api_error(completions ? Failure::kMissingPrompt : Failure::kMissingInput, std::string("'") + name + "' is required", name);
    if (v.kind != JsonKind::kString && v.kind != JsonKind::kArray) return wrong_type(name, "a string or an array");
    if ((v.kind == JsonKind::kString && v.text.raw.empty()) || (v.kind == JsonKind::kArray && v.size == 0))
      return api_error(completions ? Failure::kEmptyPrompt : Failure::kEmptyInput, std::string("'") + name + "' must not be empty", name);
    out.prompt_begin = v.begin, out.prompt_end = v.end;
  }

  if (f.stream.kind != JsonKind::kMissing && f.stream.kind != JsonKind::kNull) {
    if (f.stream.kind != JsonKind::kBool) return wrong_type("stream", "a boolean");
    out.stream = f.stream.boolean;
  }
  if (out.stream && endpoint == Endpoint::kEmbeddings) return api_error(Failure::kInvalidValue, "embeddings cannot stream", "stream");
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
      return api_error(Failure::kInvalidValue, std::string("'") + key + "' is too large", key);
    // As OpenAI: 0 asks for an answer of nothing, which engines treat differently (llama.cpp
    // reads it as "no limit"), so it is refused rather than passed on.
    if (m->number.i < 1) return api_error(Failure::kInvalidValue, std::string("'") + key + "' must be >= 1", key);
    out.max_tokens = m->number.i;
  }
  if (f.temperature.kind != JsonKind::kMissing && f.temperature.kind != JsonKind::kNull) {
    if (f.temperature.kind != JsonKind::kNumber) return wrong_type("temperature", "a number");
    const auto& t = f.temperature.number;
    out.temperature = t.kind == JsonNumber::Kind::kInt    ? static_cast<double>(t.i)
                      : t.kind == JsonNumber::Kind::kUint ? static_cast<double>(t.u)
                                                          : t.d;
    if (*out.temperature < 0 || *out.temperature > 2) return api_error(Failure::kInvalidValue, "'temperature' must be between 0 and 2", "temperature");
  }
  if (f.n.kind != JsonKind::kMissing && f.n.kind != JsonKind::kNull) {
    if (f.n.kind != JsonKind::kNumber || f.n.number.kind == JsonNumber::Kind::kDouble) return wrong_type("n", "an integer");
    if (f.n.number.kind == JsonNumber::Kind::kUint || f.n.number.i < 1 || f.n.number.i > 128)
      return api_error(Failure::kInvalidValue, "'n' must be between 1 and 128", "n");
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
    add_include_usage(body, f, out.rewritten_body);
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
