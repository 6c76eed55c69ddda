#pragma once
// A validating, non-allocating scan of an OpenAI completion object (a stream chunk or a
// whole response body). It walks the whole JSON text, so malformed input is rejected as a
// full parser would reject it, but it decodes only the few fields the gateway reads; every
// other value is skipped in place. A full boost::json::parse of each SSE event was the
// largest cost of relaying a stream.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "json_scanner.h"

namespace tidegate::gateway {

struct ChoiceFacts {
  bool delta_is_object = false;
  bool message_is_object = false;
  JsonString delta_content;    // choices[i].delta.content
  JsonString message_content;  // choices[i].message.content
  JsonString text;             // choices[i].text
  JsonString finish_reason;    // choices[i].finish_reason
};

struct ChunkFacts {
  bool usage_is_object = false;
  bool has_choices = false;  // "choices" is a non-empty array
  std::optional<std::int64_t> prompt_tokens;      // usage.*, when integers in int64 range
  std::optional<std::int64_t> completion_tokens;
  // Prompt tokens the engine found in its prefix cache: usage.prompt_tokens_details.cached_tokens
  // (OpenAI's field; vLLM with --enable-prompt-tokens-details, SGLang), else llama.cpp's
  // timings.cache_n.
  std::optional<std::int64_t> cached_tokens;
  std::optional<std::int64_t> timings_cache_n;  // llama.cpp's, folded into cached_tokens
  // The first object in "choices" whose "index" is absent or the integer 0.
  std::optional<ChoiceFacts> choice;
};

// False when `text` is not one valid JSON object (facts are then meaningless). Nesting is
// limited to 32 levels, as boost::json::parse's default.
bool scan_chunk(std::string_view text, ChunkFacts& facts);

}  // namespace tidegate::gateway
