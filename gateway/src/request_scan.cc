#include "request_scan.h"

namespace tidegate::gateway {
namespace {

class RequestScanner {
 public:
  explicit RequestScanner(std::string_view body) : s_(body, /*validate_utf8=*/true) {}

  bool document(RequestFacts& f) {
    if (s_.peek() != '{') {
      f.is_object = false;
      return s_.skip(0) && s_.at_end();
    }
    f.is_object = true;
    if (!s_.object(1, [&](const JsonString& key) { return member(key, f); })) return false;
    f.object_end = s_.position() - 1;
    return s_.at_end();
  }

 private:
  JsonMember* slot(const JsonString& key, RequestFacts& f) {
    for (const auto& [name, field] : kRequestFactSlots)
      if (JsonScanner::key_is(key, name)) return &(f.*field);
    return nullptr;
  }

  bool member(const JsonString& key, RequestFacts& f) {
    JsonMember* m = slot(key, f);
    if (!m) return s_.skip(1);
    if (m == &f.stream_options) f.include_usage = {};  // a later stream_options replaces the earlier
    return capture(*m, 1, m == &f.stream_options ? &f.include_usage : nullptr);
  }

  // Reads one value at nesting `depth` into m; `usage` (for stream_options) gets its
  // include_usage member.
  bool capture(JsonMember& m, int depth, JsonMember* usage) {
    const int occurrences = m.occurrences + 1;
    m = {};
    m.occurrences = occurrences;
    const char c = s_.peek();
    m.begin = s_.position();
    bool ok = false;
    switch (c) {
      case '"':
        m.kind = JsonKind::kString;
        ok = s_.string(m.text);
        break;
      case '{':
        m.kind = JsonKind::kObject;
        ok = s_.object(depth + 1, [&](const JsonString& k) {
          ++m.size;
          if (usage && JsonScanner::key_is(k, "include_usage")) return capture(*usage, depth + 1, nullptr);
          return s_.skip(depth + 1);
        });
        break;
      case '[':
        m.kind = JsonKind::kArray;
        ok = s_.array(depth + 1, [&] {
          ++m.size;
          if (s_.peek() != '{') m.all_objects = false;
          return s_.skip(depth + 1);
        });
        break;
      case 't':
      case 'f':
        m.kind = JsonKind::kBool;
        m.boolean = c == 't';
        ok = s_.literal(c == 't' ? "true" : "false");
        break;
      case 'n':
        m.kind = JsonKind::kNull;
        ok = s_.literal("null");
        break;
      default:
        m.kind = JsonKind::kNumber;
        ok = s_.number(&m.number);
    }
    m.end = s_.position();
    return ok;
  }

  JsonScanner s_;
};

}  // namespace

bool scan_request(std::string_view body, RequestFacts& facts) {
  facts = RequestFacts{};
  return RequestScanner(body).document(facts);
}

}  // namespace tidegate::gateway
