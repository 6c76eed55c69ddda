#pragma once
// Every way a request can fail inside the gateway, in one table: what the client is told
// (status, OpenAI error type and code), what the metrics count, and how the proxy reacts
// (retry on another replica, blame the replica, treat as a deadline). The data path never
// builds an error from loose strings: it names a Failure, and ClientConnection::fail() answers and
// counts it, so no local reply goes uncounted and a label never drifts from its code.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tidegate::gateway {

enum class Failure : std::uint8_t {
  // The client's HTTP.
  kHeaderTooLarge,
  kBodyTooLarge,
  kHeaderTimeout,
  kBadHttp,
  kMethodNotAllowed,
  kNotFound,
  kMaxConnections,
  kClientDisconnected,
  // The request body (OpenAI validation).
  kInvalidJson,
  kInvalidType,
  kInvalidValue,
  kMissingModel,
  kMissingMessages,
  kMissingPrompt,
  kMissingInput,
  kEmptyMessages,
  kEmptyPrompt,
  kEmptyInput,
  // Who may ask what.
  kInvalidApiKey,
  kAdminDisabled,
  kInvalidAdminKey,
  kModelNotFound,
  kRateLimited,  // over a rate_limits: entry (ratelimit/); a filter answers it through gateway::refusal()
  // A request filter threw before it answered (a bug in it: the worker goes on).
  kFilterFailed,
  // Capacity.
  kNoReadyReplica,
  kQueueFull,
  kQueueTimeout,
  // One upstream attempt: before the replica's response head...
  kResolveFailed,
  kConnectFailed,
  kConnectTimeout,
  kWriteFailed,
  kWriteTimeout,
  kFirstByteTimeout,
  kReadFailed,
  kBadStatus,
  // ... and after it.
  kBodyReadFailed,
  kBodyTimeout,
  kStreamIdleTimeout,
  kStreamBroken,
  kStreamEventTooLarge,
  kStreamTruncated,
  kTotalTimeout,
  kUpstreamBodyTooLarge,
  kCount
};

struct FailureSpec {
  Failure failure;
  // The step's own name: the access log's and upstream_errors_total's reason for an upstream
  // attempt, and the error code of a stream that breaks after its head was relayed. For every
  // other failure it equals `code`.
  std::string_view name;
  int status;              // when the failure ends the request before any response byte
  std::string_view type;   // OpenAI error type
  std::string_view code;   // OpenAI error code; tidegate_local_replies_total's reason
  bool replies;            // false: the connection is closed without an answer
  bool upstream;           // an upstream attempt failed (counted per attempt, blames the replica)
  bool retryable;          // nothing of the response was read and the replica is to blame: another may try
  bool deadline;           // a step's deadline fired (when the total budget is what ran out, kTotalTimeout)
};

namespace detail {
constexpr std::string_view kInvalid = "invalid_request_error", kAuth = "authentication_error",
                           kPermission = "permission_error", kRate = "rate_limit_error", kServer = "server_error";
constexpr FailureSpec local(Failure f, std::string_view code, int status, std::string_view type, bool replies = true) {
  return {f, code, status, type, code, replies, false, false, false};
}
enum class Kind { kUnreachable, kFailed, kTimedOut };
// An upstream attempt's failure. What the client gets when it is the last one follows from its
// kind: no connection at all, the fleet is unreachable (503, retried elsewhere even after a
// connect deadline: the host is dead, not slow to answer); the replica failed (502); the
// replica was too slow for the client's budget (504, not retried).
constexpr FailureSpec attempt(Failure f, std::string_view name, Kind kind, bool before_response, bool deadline) {
  return {f, name, kind == Kind::kTimedOut ? 504 : kind == Kind::kUnreachable ? 503 : 502, kServer,
          kind == Kind::kTimedOut ? "upstream_timeout" : kind == Kind::kUnreachable ? "no_ready_replica" : "upstream_error",
          true, true, before_response && kind != Kind::kTimedOut, deadline};
}
}  // namespace detail

inline constexpr std::array<FailureSpec, static_cast<std::size_t>(Failure::kCount)> kFailures = [] {
  using namespace detail;
  using F = Failure;
  return std::array<FailureSpec, static_cast<std::size_t>(F::kCount)>{{
      local(F::kHeaderTooLarge, "header_too_large", 431, kInvalid),
      local(F::kBodyTooLarge, "body_too_large", 413, kInvalid),
      local(F::kHeaderTimeout, "header_timeout", 408, kInvalid, false),  // a slow-loris client gets no more of our time
      local(F::kBadHttp, "bad_http", 400, kInvalid),
      local(F::kMethodNotAllowed, "method_not_allowed", 405, kInvalid),
      local(F::kNotFound, "not_found", 404, kInvalid),
      local(F::kMaxConnections, "max_connections", 503, kServer),
      local(F::kClientDisconnected, "client_disconnected", 499, kInvalid, false),  // nobody left to answer
      local(F::kInvalidJson, "invalid_json", 400, kInvalid),
      local(F::kInvalidType, "invalid_type", 400, kInvalid),
      local(F::kInvalidValue, "invalid_value", 400, kInvalid),
      local(F::kMissingModel, "missing_model", 400, kInvalid),
      local(F::kMissingMessages, "missing_messages", 400, kInvalid),
      local(F::kMissingPrompt, "missing_prompt", 400, kInvalid),
      local(F::kMissingInput, "missing_input", 400, kInvalid),
      local(F::kEmptyMessages, "empty_messages", 400, kInvalid),
      local(F::kEmptyPrompt, "empty_prompt", 400, kInvalid),
      local(F::kEmptyInput, "empty_input", 400, kInvalid),
      local(F::kInvalidApiKey, "invalid_api_key", 401, kAuth),
      local(F::kAdminDisabled, "admin_disabled", 403, kPermission),
      local(F::kInvalidAdminKey, "invalid_admin_key", 401, kAuth),
      local(F::kModelNotFound, "model_not_found", 404, kInvalid),
      local(F::kRateLimited, "rate_limit_exceeded", 429, kRate),  // with Retry-After: the end of the window
      local(F::kFilterFailed, "filter_failed", 500, kServer),
      local(F::kNoReadyReplica, "no_ready_replica", 503, kServer),
      local(F::kQueueFull, "queue_full", 429, kRate),  // the client may come back: Retry-After
      local(F::kQueueTimeout, "queue_timeout", 503, kServer),  // not 429: the client did nothing wrong
      attempt(F::kResolveFailed, "resolve_failed", Kind::kUnreachable, true, false),
      attempt(F::kConnectFailed, "connect_failed", Kind::kUnreachable, true, false),
      attempt(F::kConnectTimeout, "connect_timeout", Kind::kUnreachable, true, true),
      attempt(F::kWriteFailed, "write_failed", Kind::kFailed, true, false),
      attempt(F::kWriteTimeout, "write_timeout", Kind::kTimedOut, true, true),
      attempt(F::kFirstByteTimeout, "first_byte_timeout", Kind::kTimedOut, true, true),
      attempt(F::kReadFailed, "read_failed", Kind::kFailed, true, false),
      attempt(F::kBadStatus, "bad_status", Kind::kFailed, true, false),
      attempt(F::kBodyReadFailed, "body_read_failed", Kind::kFailed, false, false),
      attempt(F::kBodyTimeout, "body_timeout", Kind::kTimedOut, false, true),
      attempt(F::kStreamIdleTimeout, "stream_idle_timeout", Kind::kTimedOut, false, true),
      attempt(F::kStreamBroken, "stream_broken", Kind::kFailed, false, false),
      attempt(F::kStreamEventTooLarge, "stream_event_too_large", Kind::kFailed, false, false),
      attempt(F::kStreamTruncated, "stream_truncated", Kind::kFailed, false, false),
      // The total budget ran out during some step: neither that step nor another replica is to blame.
      attempt(F::kTotalTimeout, "total_timeout", Kind::kTimedOut, false, true),
      // The replica answered, too much: not its health's fault, and not retried (the same request
      // would bring the same body), so not an attempt failure.
      {F::kUpstreamBodyTooLarge, "body_too_large", 502, kServer, "upstream_body_too_large", true, false, false, false},
  }};
}();

constexpr const FailureSpec& spec(Failure f) { return kFailures[static_cast<std::size_t>(f)]; }

// The table is in the enum's order (spec() indexes it).
static_assert([] {
  for (std::size_t i = 0; i < kFailures.size(); ++i)
    if (static_cast<std::size_t>(kFailures[i].failure) != i) return false;
  return true;
}());

}  // namespace tidegate::gateway
