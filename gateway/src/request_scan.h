#pragma once
// Reads the members of a client's request body that routing needs, validating the whole text
// as boost::json::parse would (grammar, UTF-8, depth) but building no DOM: most deployments
// run no filter that reads the body, and parsing a small chat request into a DOM cost more
// than the rest of the gateway's work on it.
#include <cstddef>
#include <string_view>

#include "json_scanner.h"

namespace tidegate::gateway {

enum class JsonKind { kMissing, kNull, kBool, kNumber, kString, kArray, kObject };

// One member, as the last occurrence of its key left it (boost::json keeps the last too).
struct JsonMember {
  JsonKind kind = JsonKind::kMissing;
  bool boolean = false;
  JsonNumber number;
  JsonString text;
  std::size_t begin = 0, end = 0;  // the value's bytes in the body
  std::size_t size = 0;            // elements of an array, members of an object
  bool all_objects = true;         // every element of an array is an object
  int occurrences = 0;
};

struct RequestFacts {
  bool is_object = false;  // the body is an object (else valid JSON of another kind)
  std::size_t object_end = 0;  // offset of the top-level closing brace
  JsonMember model, messages, prompt, input, stream, stream_options, max_tokens, max_completion_tokens,
      temperature, n, user;
  JsonMember include_usage;  // stream_options.include_usage, when stream_options is an object
};

// The top-level keys scan_request records, and where: one table for the scanner and for the
// fuzz target that checks it against boost::json.
struct RequestFactSlot {
  std::string_view key;
  JsonMember RequestFacts::*member;
};
inline constexpr RequestFactSlot kRequestFactSlots[] = {
    {"model", &RequestFacts::model},
    {"messages", &RequestFacts::messages},
    {"prompt", &RequestFacts::prompt},
    {"input", &RequestFacts::input},
    {"stream", &RequestFacts::stream},
    {"stream_options", &RequestFacts::stream_options},
    {"max_tokens", &RequestFacts::max_tokens},
    {"max_completion_tokens", &RequestFacts::max_completion_tokens},
    {"temperature", &RequestFacts::temperature},
    {"n", &RequestFacts::n},
    {"user", &RequestFacts::user},
};

// False when `body` is not valid JSON.
bool scan_request(std::string_view body, RequestFacts& facts);

}  // namespace tidegate::gateway
