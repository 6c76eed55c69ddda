#include "upstream_answer.h"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace tidegate::gateway {
namespace json = boost::json;
namespace {

// The parts of an engine's error body we keep. Engines differ:
//   OpenAI, llama.cpp, vLLM >= 0.10:  {"error":{"message","type","param","code"}}
//   vLLM before 0.10, SGLang:         {"object":"error","message","type","param","code"}
//   TGI:                              {"error":"...","error_type":"validation"}
struct EngineError {
  bool found = false;
  std::string message, type, param, code;  // code: only when the engine sent a string
};

std::string string_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

EngineError read_engine_error(std::string_view body) {
  EngineError e;
  json::error_code ec;
  const auto v = json::parse(body, ec);
  if (ec || !v.is_object()) return e;
  const auto& root = v.get_object();
  const json::object* fields = nullptr;
  if (const auto* err = root.if_contains("error")) {
    if (err->is_object()) {
      fields = &err->get_object();
    } else if (err->is_string()) {  // TGI
      e.found = true;
      e.message = std::string(err->get_string());
      e.type = string_of(root, "error_type");
      return e;
    }
  } else if (string_of(root, "object") == "error") {
    fields = &root;
  }
  if (!fields) return e;
  e.found = true;
  e.message = string_of(*fields, "message");
  e.type = string_of(*fields, "type");
  e.param = string_of(*fields, "param");
  e.code = string_of(*fields, "code");  // an integer code (llama.cpp, vLLM) is just the status again
  return e;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Engines word "prompt longer than the context" differently; OpenAI clients test the code.
bool is_context_overflow(const EngineError& e) {
  if (e.type == "exceed_context_size_error" || e.code == "context_length_exceeded") return true;  // llama.cpp, OpenAI
  const auto m = lower(e.message);
  static constexpr std::array<std::string_view, 6> kPhrases = {
      "maximum context length",      // vLLM: "This model's maximum context length is N tokens"
      "maximum model length",        // vLLM: "longer than the maximum model length of N"
      "context length",              // SGLang: "longer than the model's context length"
      "context size",                // llama.cpp: "exceeds the available context size"
      "max_new_tokens` must be <=",  // TGI: "`inputs` tokens + `max_new_tokens` must be <= N"
      "must have less than",         // TGI: "`inputs` must have less than N tokens"
  };
  return std::any_of(kPhrases.begin(), kPhrases.end(), [&](std::string_view p) { return m.find(p) != std::string::npos; });
}

std::string code_for_status(int status) {
  switch (status) {
    case 400: return "invalid_request";
    case 401: return "invalid_api_key";
    case 403: return "permission_denied";
    case 404: return "not_found";
    case 413: return "request_too_large";
    case 422: return "invalid_request";
    case 429: return "rate_limit_exceeded";
    case 501: return "not_implemented";
    case 503: return "upstream_unavailable";
    default: return status >= 500 ? "upstream_error" : "invalid_request";
  }
}

}  // namespace

UpstreamFault classify_upstream_answer(int status, std::string_view body) {
  if (status < 400) return UpstreamFault::kNone;
  if (status < 500 || status == 501) return UpstreamFault::kRequest;
  if (is_replica_status(status)) return UpstreamFault::kReplica;
  return read_engine_error(body).found ? UpstreamFault::kUnclear : UpstreamFault::kReplica;
}

ApiError normalize_engine_error(int status, std::string_view body) {
  auto e = read_engine_error(body);
  if (!e.found) {
    constexpr std::size_t kShown = 200;
    e.message = "upstream answered " + std::to_string(status);
    if (!body.empty()) e.message += ": " + std::string(body.substr(0, kShown)) + (body.size() > kShown ? "..." : "");
  }
  std::string code;
  if (status < 500 && is_context_overflow(e)) code = "context_length_exceeded";
  else if (!e.code.empty()) code = e.code;
  else code = code_for_status(status);
  ApiError out;
  out.status = status;
  out.message = e.message.empty() ? "upstream answered " + std::to_string(status) : e.message;
  out.type = std::string(error_type_for_status(status));
  out.code = std::move(code);
  if (status == 422) out.type = "invalid_request_error";
  if (status == 501) out.type = "invalid_request_error";  // asked for what this model's engine cannot do
  out.param = e.param;
  return out;
}

}  // namespace tidegate::gateway
