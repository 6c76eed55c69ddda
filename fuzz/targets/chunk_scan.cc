// The non-allocating scan of a completion object (gateway/src/chunk_scan.cc over
// json_scanner.h), differentially against boost::json, the full parser it replaced (the
// oracle is the reference of gateway/tests/chunk_scan_test.cc, written again here).
//
// Checks, for every input:
//  - validity: scan_chunk accepts exactly the JSON objects boost::json::parse accepts, except
//    that the chunk scan does not validate UTF-8 inside strings (a replica's output is trusted
//    for it: json_scanner.h), so on input that is not valid UTF-8 it may accept what
//    boost::json rejects, never the other way round;
//  - extraction: on valid input, accumulate_stream_chunk and summarize_response_body leave the
//    same CompletionSummary (content, finish_reason, token counts, [DONE]) and the same
//    ChunkKind as the boost::json reading of the same text.
#include <boost/json.hpp>

#include "chunk_scan.h"
#include "fuzz_util.h"
#include "json_scanner.h"
#include "sse.h"

using namespace tidegate::gateway;
namespace json = boost::json;

namespace {

void ref_usage(const json::object& o, CompletionSummary& s) {
  const auto* usage = o.if_contains("usage");
  if (!usage || !usage->is_object()) return;
  if (const auto* p = usage->get_object().if_contains("prompt_tokens"); p && p->is_int64()) s.prompt_tokens = p->get_int64();
  if (const auto* c = usage->get_object().if_contains("completion_tokens"); c && c->is_int64())
    s.completion_tokens = c->get_int64();
}

// The first object in "choices" whose "index" is absent or the integer 0.
const json::object* ref_choice(const json::object& o, bool& has_choices) {
  has_choices = false;
  const auto* choices = o.if_contains("choices");
  if (!choices || !choices->is_array() || choices->get_array().empty()) return nullptr;
  has_choices = true;
  for (const auto& c : choices->get_array()) {
    if (!c.is_object()) continue;
    const auto* index = c.get_object().if_contains("index");
    if (!index || (index->is_int64() && index->get_int64() == 0)) return &c.get_object();
  }
  return nullptr;
}

const json::string* string_member(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? &v->get_string() : nullptr;
}

ChunkKind ref_stream(const json::object& o, CompletionSummary& s) {
  ref_usage(o, s);
  bool has = false;
  bool content = false;
  if (const auto* c = ref_choice(o, has)) {
    const auto* delta = c->if_contains("delta");
    if (delta && delta->is_object()) {
      if (const auto* t = string_member(delta->get_object(), "content")) {
        s.content.append(t->data(), t->size());
        content = !t->empty();
      }
    } else if (const auto* t = string_member(*c, "text")) {
      s.content.append(t->data(), t->size());
      content = !t->empty();
    }
    if (const auto* f = string_member(*c, "finish_reason")) s.finish_reason.assign(f->data(), f->size());
  }
  const auto* usage = o.if_contains("usage");
  return {!has && usage && usage->is_object(), has, content};
}

void ref_body(const json::object& o, CompletionSummary& s) {
  ref_usage(o, s);
  bool has = false;
  if (const auto* c = ref_choice(o, has)) {
    const auto* m = c->if_contains("message");
    if (m && m->is_object()) {
      if (const auto* t = string_member(m->get_object(), "content")) s.content.assign(t->data(), t->size());
    } else if (const auto* t = string_member(*c, "text")) {
      s.content.assign(t->data(), t->size());
    }
    if (const auto* f = string_member(*c, "finish_reason")) s.finish_reason.assign(f->data(), f->size());
  }
  s.done = true;
}

CompletionSummary prior() {
  CompletionSummary s;
  s.content = "prior ";
  s.finish_reason = "prior";
  return s;
}

void expect_same(const CompletionSummary& got, const CompletionSummary& want, std::string_view text, const char* what,
                 bool tokens = true) {
  FUZZ_CHECK(got.content == want.content, "content differs from boost::json's", text, what);
  FUZZ_CHECK(got.finish_reason == want.finish_reason, "finish_reason differs from boost::json's", text, what);
  if (!tokens) return;
  FUZZ_CHECK(got.prompt_tokens == want.prompt_tokens, "prompt_tokens differs from boost::json's", text, what);
  FUZZ_CHECK(got.completion_tokens == want.completion_tokens, "completion_tokens differs from boost::json's", text, what);
  FUZZ_CHECK(got.done == want.done, "done differs", text, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  json::error_code ec;
  const json::value v = json::parse(text, ec);
  const bool ref_ok = !ec && v.is_object();

  ChunkFacts facts;
  const bool ok = scan_chunk(text, facts);
  if (ref_ok) FUZZ_CHECK(ok, "scan_chunk rejects a JSON object boost::json accepts", text);
  // Known issue K5 (see request_scan.cc): exponents Boost.JSON refuses as exponent_overflow.
  const bool k5 = ec == json::error::exponent_overflow && !fuzz::strict();
  if (ok && !ref_ok && !k5)
    FUZZ_CHECK(!fuzz::valid_utf8(text), "scan_chunk accepts what boost::json rejects", text, ec.message());

  CompletionSummary got = prior(), want = prior();
  const ChunkKind kind = accumulate_stream_chunk(text, got);
  if (text == "[DONE]") {
    FUZZ_CHECK(got.done && got.content == "prior ", "[DONE]");
    return 0;
  }
  if (!ok) {  // invalid text changes nothing
    expect_same(got, want, text, "stream, invalid");
    FUZZ_CHECK(!kind.usage_only && !kind.has_choices && !kind.has_content, "kind of an invalid chunk");
  }
  if (!ref_ok) return 0;
  const auto& obj = v.get_object();
  // K2 (fixed): a second top-level "usage" now resets what the first one set, as boost::json
  // keeps only the last; so token counts are compared always.
  const bool tokens = true;
  const ChunkKind want_kind = ref_stream(obj, want);
  expect_same(got, want, text, "stream", tokens);
  FUZZ_CHECK(kind.usage_only == want_kind.usage_only, "usage_only differs", text);
  FUZZ_CHECK(kind.has_choices == want_kind.has_choices, "has_choices differs", text);
  FUZZ_CHECK(kind.has_content == want_kind.has_content, "has_content differs", text);

  CompletionSummary body = prior(), want_body = prior();
  summarize_response_body(text, body);
  ref_body(obj, want_body);
  expect_same(body, want_body, text, "body", tokens);
  return 0;
}
