#pragma once
// OpenAI wire format for the simulator: request parsing (only what the timing model needs) and
// the response bodies vLLM sends, built as strings because they are on every request's path.
#include "config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::sim {

struct ApiError {
  int status;
  std::string message;
  std::string type;   // "invalid_request_error", "NotFoundError", ...
  std::string param;  // empty = null
};
std::string error_body(const ApiError& e);

enum class Api { kChat, kCompletions };

struct GenerationRequest {
  Api api = Api::kChat;
  bool stream = false;
  bool include_usage = false;
  std::optional<std::int32_t> max_tokens;
  std::int64_t prompt_tokens = 0;
  std::string echo_text;  // last user message (chat) or the prompt (completions)
  std::uint64_t key = 0;  // seeds the generated words: same prompt + seed => same reply
  // Prefix-cache keys of the prompt as the engine renders it (messages in order, role
  // markers included), in blocks of the timing model's prefix_block_tokens.
  std::vector<std::uint64_t> prefix_blocks;
};

// Fills `out` or returns the error to answer with (400 for bad JSON/fields, 404 unknown model).
std::optional<ApiError> parse_generation(std::string_view body, Api api, const ServerConfig& cfg,
                                         GenerationRequest& out);

// The planned reply: echo pieces first (when --echo), then generated words; exactly n tokens.
struct Reply {
  std::vector<std::string> tokens;
  std::string finish_reason;  // "length" when max_tokens capped it, else "stop"
  std::int64_t cached_tokens = 0;  // prompt tokens the prefix cache held, known at the first token
};
Reply plan_reply(const GenerationRequest& req, const ServerConfig& cfg);
// Output length chosen before submit (the model needs it): max_tokens, else seeded 1..default;
// never shorter than the echo.
std::int32_t planned_length(const GenerationRequest& req, const ServerConfig& cfg, std::int32_t* echo_pieces);

// Streaming: one `data: {...}\n\n` event each.
class ChunkWriter final {
 public:
  ChunkWriter(const GenerationRequest& req, const ServerConfig& cfg, std::string id, std::int64_t created);
  std::string role_event() const;  // chat only: delta {"role":"assistant","content":""}
  std::string token_event(std::string_view token) const;
  std::string finish_event(std::string_view reason) const;
  std::string usage_event(std::int64_t prompt, std::int64_t completion, std::int64_t cached) const;
  static std::string done_event() { return "data: [DONE]\n\n"; }

 private:
  std::string choice_event(std::string_view payload, std::string_view finish_reason_json) const;
  std::string head_;  // {"id":..,"object":..,"created":..,"model":..,"choices":
  Api api_;
};

std::string full_response_body(const GenerationRequest& req, const ServerConfig& cfg, const std::string& id,
                               std::int64_t created, const Reply& reply);

std::optional<ApiError> embeddings_body(std::string_view body, const ServerConfig& cfg, std::string& out,
                                        std::int64_t& prompt_tokens);
std::string models_body(const ServerConfig& cfg, std::int64_t created);

std::string json_quote(std::string_view s);

}  // namespace tidegate::sim
