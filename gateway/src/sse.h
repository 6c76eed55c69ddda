#pragma once
// Incremental Server-Sent Events parsing for upstream streams. Bytes arrive in arbitrary
// pieces; events come out whole, as views of their raw bytes, so the proxy forwards them
// unchanged (or drops one, such as a usage chunk the client did not ask for).
#include <cstdint>
#include <string>
#include <string_view>

namespace tidegate::gateway {

// Views into the parser: valid until the next feed() or next() call.
struct SseEvent {
  std::string_view raw;    // exactly as received, including the blank line that ended it
  std::string_view data;   // "data:" lines joined with '\n' (leading space after ':' removed)
  std::string_view event;  // "event:" field, empty if absent
};

// Pull style (feed, then next() until false) so the hot path has no callback or per-event
// allocation: a one-line event's data is a view of its raw bytes; only multi-line data is
// joined into a scratch string the parser reuses.
class SseParser final {
 public:
  void feed(std::string_view bytes);
  bool next(SseEvent& ev);
  // Ready for a new stream; keeps the buffers' capacity.
  void reset() {
    buffer_.clear();
    start_ = search_ = 0;
    overflowed_ = false;
  }
  // Bytes of an incomplete event still buffered (a stream that ends here was cut).
  std::size_t pending_bytes() const { return buffer_.size() - start_; }
  // Guards against an upstream that never sends a blank line.
  static constexpr std::size_t kMaxEventBytes = 4 * 1024 * 1024;
  bool overflowed() const { return overflowed_; }

 private:
  void parse_event(std::string_view raw, SseEvent& ev);
  std::string buffer_;
  std::size_t start_ = 0;   // first byte of the current (incomplete) event
  std::size_t search_ = 0;  // where to look for the next '\n'
  std::string joined_;      // multi-line data
  bool overflowed_ = false;
};

// What the gateway learns from an OpenAI completion, streamed or not.
struct CompletionSummary {
  std::string content;         // choice 0 text (chat delta.content / completions text)
  std::string finish_reason;   // choice 0
  std::int64_t prompt_tokens = -1;      // -1 = upstream did not say
  std::int64_t completion_tokens = -1;
  std::int64_t cached_prompt_tokens = -1;  // -1 = upstream did not say
  bool done = false;           // saw "data: [DONE]"
};

struct ChunkKind {
  bool usage_only = false;   // usage object and no choices: what the gateway strips
  bool has_choices = false;  // a non-empty "choices" array
  // Choice 0 carries text. Role-only and finish chunks (which vLLM and llama.cpp send too)
  // carry none: counting only these keeps a count of chunks at or below the token count.
  bool has_content = false;
};

// Classifies and accumulates one streamed chunk's data. Reads the JSON with a validating,
// non-allocating scan that only decodes the fields it needs (usage token counts, choice 0's
// delta.content / text and finish_reason); invalid JSON changes nothing, as a full parse
// that failed would. Use it instead of boost::json::parse on every event.
ChunkKind accumulate_stream_chunk(std::string_view data, CompletionSummary& summary);
// Reads usage/content/finish_reason from a whole (non-stream) response body, same scan.
void summarize_response_body(std::string_view body, CompletionSummary& summary);

}  // namespace tidegate::gateway
