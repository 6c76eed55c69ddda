// A cache hit rendered exactly as an OpenAI-compatible server would answer, so clients and
// SDKs cannot tell it apart (apart from the x-tidegate-cache headers).
#include <chrono>
#include <random>

#include "tidegate/cache/semantic_cache.h"
#include "tidegate/common/json_text.h"

namespace tidegate::cache {
namespace {

namespace json = boost::json;

std::string fresh_id(RequestView::Endpoint endpoint) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string id = endpoint == RequestView::Endpoint::kChat ? "chatcmpl-tg-" : "cmpl-tg-";
  for (int i = 0; i < 2; ++i) {
    auto v = rng();
    for (int k = 0; k < 12; ++k, v >>= 4) id += kHex[v & 0xf];
  }
  return id;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json::object usage(const CachedAnswer& a) {
  return {{"prompt_tokens", a.prompt_tokens},
          {"completion_tokens", a.completion_tokens},
          {"total_tokens", a.prompt_tokens + a.completion_tokens}};
}

// Pieces of about four words, each keeping its trailing whitespace, so that concatenating
// the deltas gives back the content byte for byte.
std::vector<std::string> split_pieces(const std::string& s) {
  constexpr int kWordsPerPiece = 4;
  std::vector<std::string> out;
  std::size_t start = 0, i = 0;
  int words = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    while (i < s.size() && !(s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    if (++words == kWordsPerPiece) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
      out.push_back(s.substr(start, i - start));
      start = i;
      words = 0;
    }
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

void event(std::string& out, const json::object& chunk) {
  out += "data: ";
  out += common::to_json_text(chunk);
  out += "\n\n";
}

}  // namespace

std::string_view to_string(CacheStatus s) {
  switch (s) {
    case CacheStatus::kHit: return "hit";
    case CacheStatus::kMiss: return "miss";
    case CacheStatus::kBypass: return "bypass";
    case CacheStatus::kOff: return "off";
  }
  return "off";
}

std::string render_hit_json(RequestView::Endpoint endpoint, const std::string& model, const CachedAnswer& answer) {
  json::object body;
  body["id"] = fresh_id(endpoint);
  body["created"] = unix_now();
  body["model"] = model;
  if (endpoint == RequestView::Endpoint::kChat) {
    body["object"] = "chat.completion";
    body["choices"] = json::array{json::object{
        {"index", 0},
        {"message", json::object{{"role", "assistant"}, {"content", answer.content}}},
        {"logprobs", nullptr},
        {"finish_reason", answer.finish_reason}}};
  } else {
    body["object"] = "text_completion";
    body["choices"] = json::array{json::object{
        {"index", 0}, {"text", answer.content}, {"logprobs", nullptr}, {"finish_reason", answer.finish_reason}}};
  }
  body["usage"] = usage(answer);
  return common::to_json_text(body);
}

std::string render_hit_sse(RequestView::Endpoint endpoint, const std::string& model, const CachedAnswer& answer,
                           bool include_usage, const json::object* usage_extra) {
  const bool chat = endpoint == RequestView::Endpoint::kChat;
  const auto id = fresh_id(endpoint);
  const auto created = unix_now();
  auto chunk = [&](json::object choice) {
    json::object c{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                   {"created", created}, {"model", model}, {"choices", json::array{std::move(choice)}}};
    if (include_usage) c["usage"] = nullptr;  // as OpenAI does on every chunk but the last
    return c;
  };
  std::string out;
  if (chat)
    event(out, chunk({{"index", 0},
                      {"delta", json::object{{"role", "assistant"}, {"content", ""}}},
                      {"logprobs", nullptr},
                      {"finish_reason", nullptr}}));
  for (const auto& piece : split_pieces(answer.content)) {
    if (chat)
      event(out, chunk({{"index", 0},
                        {"delta", json::object{{"content", piece}}},
                        {"logprobs", nullptr},
                        {"finish_reason", nullptr}}));
    else
      event(out, chunk({{"index", 0}, {"text", piece}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));
  }
  if (chat)
    event(out, chunk({{"index", 0}, {"delta", json::object{}}, {"logprobs", nullptr},
                      {"finish_reason", answer.finish_reason}}));
  else
    event(out, chunk({{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", answer.finish_reason}}));
  if (include_usage) {
    json::object u{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                   {"created", created}, {"model", model}, {"choices", json::array{}}, {"usage", usage(answer)}};
    if (usage_extra)
      for (const auto& field : *usage_extra) u[field.key()] = field.value();
    event(out, u);
  }
  out += "data: [DONE]\n\n";
  return out;
}

}  // namespace tidegate::cache
