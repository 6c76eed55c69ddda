#pragma once
// The OpenAI wire format as far as the gateway needs it: reading the few request fields
// routing uses, rewriting stream_options, and error objects.
#include <boost/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "failure.h"

namespace tidegate::gateway {

enum class Endpoint { kChat, kCompletions, kEmbeddings };

// OpenAI-shaped error: {"error":{"message","type","param","code"}}.
struct ApiError {
  int status = 500;
  std::string message;
  std::string type;   // invalid_request_error, authentication_error, rate_limit_error, server_error...
  std::string param;  // empty -> null
  std::string code;   // machine-readable reason; also the metrics/log "reason"
  double retry_after_s = 0;  // >0: Retry-After header
  std::string challenge;     // non-empty: WWW-Authenticate header (a browser then asks for the key)
  Failure failure = Failure::kBadHttp;  // the row of failure.h it comes from
};

std::string error_body(const ApiError& e);
// The error a Failure gives the client (status, type and code from its row), with the words.
ApiError api_error(Failure failure, std::string message, std::string param = {});
// OpenAI's error type for an HTTP status (for an engine's own error, relayed).
std::string_view error_type_for_status(int status);

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  bool stream = false;
  bool client_wants_usage = false;  // stream_options.include_usage was true
  std::optional<std::int64_t> max_tokens;
  std::optional<double> temperature;
  std::int64_t n = 1;
  std::string user;
  // The prompt's bytes in the client's body (chat: the `messages` array, completions: `prompt`,
  // embeddings: `input`), for prefix-aware routing. Empty when absent.
  std::size_t prompt_begin = 0, prompt_end = 0;
  // The body to send upstream: the client's bytes untouched (a view: the caller keeps them for
  // the request's tries), or rewritten when include_usage had to be added.
  std::string_view upstream_body() const { return usage_injected ? std::string_view(rewritten_body) : client_body; }
  std::string_view client_body;
  std::string rewritten_body;
  bool usage_injected = false;
  // The parsed body, for filters (cache key, prompt text). Held by pointer: its nodes live in
  // their own arena, and assigning a value across storages would copy it node by node.
  std::shared_ptr<const boost::json::value> json;
};

// Validates what routing needs and builds the upstream body. Returns an error for bad JSON,
// wrong types, a missing model, empty messages/prompt/input.
// With `build_dom`, out.json is the parsed body too (for filters that read it); validation is
// the same either way.
std::optional<ApiError> parse_request(Endpoint endpoint, std::string_view body, ParsedRequest& out,
                                      bool build_dom = true);

// Compares secrets without early exit, so timing does not reveal how much of a key matched.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace tidegate::gateway
