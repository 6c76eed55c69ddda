#pragma once
// Incremental Server-Sent Events parsing for upstream streams. Bytes arrive in arbitrary
// pieces; events come out whole, with their raw bytes, so the proxy forwards them
// unchanged (or drops one, such as a usage chunk the client did not ask for).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tidegate::gateway {

struct SseEvent {
  std::string raw;    // exactly as received, including the blank line that ended it
  std::string data;   // "data:" lines joined with '\n' (leading space after ':' removed)
  std::string event;  // "event:" field, empty if absent
};

class SseParser final {
 public:
  // Each complete event is passed to on_event; partial input is kept until the next feed.
  void feed(std::string_view bytes, const std::function<void(SseEvent&&)>& on_event);
  // Bytes of an incomplete event still buffered (a stream that ends here was cut).
  std::size_t pending_bytes() const { return buffer_.size(); }
  // Guards against an upstream that never sends a blank line.
  static constexpr std::size_t kMaxEventBytes = 4 * 1024 * 1024;
  bool overflowed() const { return overflowed_; }

 private:
  void parse_event(std::string_view raw, const std::function<void(SseEvent&&)>& on_event);
  std::string buffer_;
  bool overflowed_ = false;
};

// What the gateway learns from an OpenAI completion, streamed or not.
struct CompletionSummary {
  std::string content;         // choice 0 text (chat delta.content / completions text)
  std::string finish_reason;   // choice 0
  std::int64_t prompt_tokens = -1;      // -1 = upstream did not say
  std::int64_t completion_tokens = -1;
  bool done = false;           // saw "data: [DONE]"
};

// Classifies and accumulates one streamed chunk's data. Returns true when the chunk carries
// only usage (no choices), i.e. the chunk the gateway strips if it added include_usage.
bool accumulate_stream_chunk(std::string_view data, CompletionSummary& summary);
// Reads usage/content/finish_reason from a whole (non-stream) response body.
void summarize_response_body(std::string_view body, CompletionSummary& summary);

}  // namespace tidegate::gateway
