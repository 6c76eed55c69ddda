#include "chunk_scan.h"

#include "json_scanner.h"

namespace tidegate::gateway {
namespace {

// The members of a completion object the gateway reads; everything else is skipped.
class ChunkScanner {
 public:
  explicit ChunkScanner(std::string_view s) : s_(s) {}

  bool document(ChunkFacts& f) {
    if (s_.peek() != '{') return false;
    if (!s_.object(1, [&](const JsonString& key) { return top_member(key, f); })) return false;
    return s_.at_end();
  }

 private:
  bool top_member(const JsonString& key, ChunkFacts& f) {
    if (JsonScanner::key_is(key, "usage")) {
      // A repeated key: the last one wins, as in boost::json (the fuzzer's K2).
      f.prompt_tokens.reset();
      f.completion_tokens.reset();
      f.cached_tokens.reset();
      if (s_.peek() != '{') {
        f.usage_is_object = false;
        return s_.skip(1);
      }
      f.usage_is_object = true;
      return s_.object(2, [&](const JsonString& k) {
        if (JsonScanner::key_is(k, "prompt_tokens")) return int_field(f.prompt_tokens, 2);
        if (JsonScanner::key_is(k, "completion_tokens")) return int_field(f.completion_tokens, 2);
        if (JsonScanner::key_is(k, "prompt_tokens_details")) {
          f.cached_tokens.reset();
          if (s_.peek() != '{') return s_.skip(2);
          return s_.object(3, [&](const JsonString& d) {
            return JsonScanner::key_is(d, "cached_tokens") ? int_field(f.cached_tokens, 3) : s_.skip(3);
          });
        }
        return s_.skip(2);
      });
    }
    if (JsonScanner::key_is(key, "timings")) {  // llama.cpp: its own block beside usage
      if (s_.peek() != '{') return s_.skip(1);
      return s_.object(2, [&](const JsonString& k) {
        if (JsonScanner::key_is(k, "cache_n")) return int_field(f.timings_cache_n, 2);
        return s_.skip(2);
      });
    }
    if (JsonScanner::key_is(key, "choices")) {
      f.has_choices = false;
      f.choice.reset();
      if (s_.peek() != '[') return s_.skip(1);
      return s_.array(2, [&] {
        f.has_choices = true;
        if (s_.peek() != '{') return s_.skip(2);
        ChoiceFacts c;
        bool has_index = false;
        std::optional<std::int64_t> index;
        const bool ok = s_.object(3, [&](const JsonString& k) { return choice_member(k, c, has_index, index); });
        if (ok && !f.choice && (!has_index || (index && *index == 0))) f.choice = c;
        return ok;
      });
    }
    return s_.skip(1);
  }

  bool int_field(std::optional<std::int64_t>& out, int depth) {
    const char c = s_.peek();
    out.reset();
    if (c == '-' || (c >= '0' && c <= '9')) {
      JsonNumber v;
      if (!s_.number(&v)) return false;
      if (v.kind == JsonNumber::Kind::kInt) out = v.i;
      return true;
    }
    return s_.skip(depth);
  }

  bool choice_member(const JsonString& k, ChoiceFacts& c, bool& has_index, std::optional<std::int64_t>& index) {
    if (JsonScanner::key_is(k, "index")) {
      has_index = true;
      return int_field(index, 3);
    }
    if (JsonScanner::key_is(k, "delta") || JsonScanner::key_is(k, "message")) {
      const bool delta = JsonScanner::key_is(k, "delta");
      auto& is_object = delta ? c.delta_is_object : c.message_is_object;
      auto& content = delta ? c.delta_content : c.message_content;
      is_object = s_.peek() == '{';
      content = {};
      if (!is_object) return s_.skip(3);
      return s_.object(4, [&](const JsonString& inner) {
        if (JsonScanner::key_is(inner, "content")) {
          content = {};
          return s_.string_field(content, 4);
        }
        return s_.skip(4);
      });
    }
    if (JsonScanner::key_is(k, "text")) {
      c.text = {};
      return s_.string_field(c.text, 3);
    }
    if (JsonScanner::key_is(k, "finish_reason")) {
      c.finish_reason = {};
      return s_.string_field(c.finish_reason, 3);
    }
    return s_.skip(3);
  }

  JsonScanner s_;
};

}  // namespace

bool scan_chunk(std::string_view text, ChunkFacts& facts) {
  facts = ChunkFacts{};
  if (!ChunkScanner(text).document(facts)) return false;
  if (!facts.cached_tokens) facts.cached_tokens = facts.timings_cache_n;  // usage's own field wins
  return true;
}

}  // namespace tidegate::gateway
