// make_plan: decides whether a request may be answered from / stored into the cache, and
// splits it into the exact-match scope (hashed) and the paraphrasable text (embedded).
#include <algorithm>
#include <cctype>
#include <optional>

#include "tidegate/cache/policy.h"

namespace tidegate::cache {
namespace {

namespace json = boost::json;

// Body keys that influence sampling randomness or delivery but not which answer is a correct
// one. Every other key (tools, response_format, stop, max_tokens, seed, logit_bias, suffix,
// guided_*, unknown vendor extensions...) goes into the scope, so an unknown parameter can only
// cost hits, never serve a wrong answer.
constexpr std::string_view kIgnoredKeys[] = {
    "model", "messages", "prompt", "stream", "stream_options", "temperature", "top_p", "top_k", "min_p",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "user", "metadata", "store",
    "service_tier", "n"};

bool ignored_key(std::string_view k) {
  return std::find(std::begin(kIgnoredKeys), std::end(kIgnoredKeys), k) != std::end(kIgnoredKeys);
}

struct Reject {
  std::string reason;
};

CachePlan bypass(CachePlan plan, std::string reason) {
  plan.read = plan.write = false;
  plan.status_without_hit = CacheStatus::kBypass;
  plan.reason = std::move(reason);
  plan.text.clear();
  return plan;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// Text of a message content: a string, or an array of parts whose text parts are joined.
// Non-text parts (images, audio, files) are not visible to the embedder, so two requests with
// the same words and different images would collide: such a message is not cacheable.
std::optional<std::string> content_text(const json::value& content, std::string& reason) {
  if (content.is_string()) return std::string(content.get_string());
  if (content.is_null()) return std::string();
  if (!content.is_array()) {
    reason = "invalid-request";
    return std::nullopt;
  }
  std::string out;
  for (const auto& part : content.get_array()) {
    const auto* obj = part.if_object();
    const auto* type = obj ? obj->if_contains("type") : nullptr;
    if (!type || !type->is_string() || type->get_string() != "text") {
      reason = obj && type ? "non-text-content" : "invalid-request";
      return std::nullopt;
    }
    const auto* text = obj->if_contains("text");
    if (!text || !text->is_string()) {
      reason = "invalid-request";
      return std::nullopt;
    }
    if (!out.empty()) out += '\n';
    out += text->get_string();
  }
  return out;
}

bool has_tool_traffic(const json::object& body, const json::array& messages) {
  for (auto key : {"tools", "functions", "tool_choice", "function_call"})
    if (const auto* v = body.if_contains(key); v && !v->is_null()) return true;
  for (const auto& m : messages) {
    const auto* o = m.if_object();
    if (!o) continue;
    const auto* role = o->if_contains("role");
    if (role && role->is_string() && (role->get_string() == "tool" || role->get_string() == "function")) return true;
    if (o->contains("tool_calls") || o->contains("function_call")) return true;
  }
  return false;
}

// Fills text and adds the conversation part of the scope; returns a bypass reason or "".
std::string plan_chat(const CacheConfig& cfg, const json::object& body, const ContextConfig& ctx,
                      std::string& text, std::string& scope) {
  const auto* mv = body.if_contains("messages");
  if (!mv || !mv->is_array() || mv->get_array().empty()) return "invalid-request";
  const auto& messages = mv->get_array();
  if (!cfg.cache_tool_calls && has_tool_traffic(body, messages)) return "tool-calls";
  for (const auto& m : messages) {
    const auto* o = m.if_object();
    if (!o || !o->contains("role") || !o->at("role").is_string()) return "invalid-request";
  }
  const auto& last = messages.back().get_object();
  if (last.at("role").get_string() != "user") return "last-message-not-user";

  std::string reason;
  const std::size_t n = messages.size();
  if (ctx.mode == ContextConfig::Mode::kScope || ctx.turns <= 1) {
    auto t = content_text(last.at("content"), reason);
    if (!t) return reason;
    text = std::move(*t);
    // Everything before the last message, verbatim and in order, plus the last message's
    // own non-content fields (e.g. "name").
    json::array history(messages.begin(), messages.end() - 1);
    json::object last_rest = last;
    last_rest.erase("content");
    scope += "history:" + canonical_json(history) + "\nlast:" + canonical_json(last_rest) + "\n";
    return "";
  }
  // Window: system/developer messages stay in the scope; the last K non-system messages are
  // embedded together with their roles; older turns are ignored.
  json::array system;
  std::vector<const json::object*> turns;
  for (const auto& m : messages) {
    const auto& o = m.get_object();
    const auto role = o.at("role").get_string();
    if (role == "system" || role == "developer")
      system.push_back(m);
    else
      turns.push_back(&o);
  }
  const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(ctx.turns), turns.size());
  for (std::size_t i = turns.size() - k; i < turns.size(); ++i) {
    const auto* c = turns[i]->if_contains("content");
    if (!c) return "invalid-request";
    auto t = content_text(*c, reason);
    if (!t) return reason;
    if (!text.empty()) text += '\n';
    text += std::string(turns[i]->at("role").get_string()) + ": " + *t;
  }
  scope += "system:" + canonical_json(system) + "\nwindow:" + std::to_string(k) + "\n";
  (void)n;
  return "";
}

std::string plan_completion(const json::object& body, std::string& text) {
  const auto* p = body.if_contains("prompt");
  if (!p) return "invalid-request";
  if (p->is_string()) {
    text = std::string(p->get_string());
  } else if (p->is_array() && p->get_array().size() == 1 && p->get_array()[0].is_string()) {
    text = std::string(p->get_array()[0].get_string());
  } else {
    return "unsupported-prompt";  // token arrays and batches of prompts
  }
  if (const auto* e = body.if_contains("echo"); e && e->is_bool() && e->get_bool()) return "echo";
  if (const auto* b = body.if_contains("best_of"); b && b->is_number() && b->to_number<double>() > 1) return "n>1";
  return "";
}

std::optional<double> number(const json::value* v) {
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  if (v->is_double()) return v->get_double();
  return std::nullopt;
}

}  // namespace

bool cache_control_has(std::string_view header, std::string_view directive) {
  const auto h = lower(header);
  std::size_t pos = 0;
  while (pos <= h.size()) {
    auto comma = h.find(',', pos);
    if (comma == std::string::npos) comma = h.size();
    auto token = trim(std::string_view(h).substr(pos, comma - pos));
    if (auto eq = token.find('='); eq != std::string::npos) token = trim(token.substr(0, eq));
    if (token == directive) return true;
    pos = comma + 1;
  }
  return false;
}

CachePlan make_plan(const CacheConfig& cfg, const RequestView& req) {
  CachePlan plan;
  plan.model = req.model;
  if (!cfg.enabled_for(req.model)) {
    plan.status_without_hit = CacheStatus::kOff;
    plan.reason = "off";
    return plan;
  }
  const bool shared = cfg.shared_for(req.model);
  plan.tenant = shared ? std::string() : req.tenant;
  plan.ttl_s = cfg.ttl_for(req.model);

  if (cache_control_has(req.cache_control, "no-store")) return bypass(std::move(plan), "no-store");
  if (lower(trim(req.cache_directive)) == "bypass") return bypass(std::move(plan), "header-bypass");
  if (req.ttl_override_s) {
    if (!(*req.ttl_override_s > 0)) return bypass(std::move(plan), "no-store");
    plan.ttl_s = std::min(*req.ttl_override_s, cfg.max_ttl_s);
  }
  if (!req.body) return bypass(std::move(plan), "invalid-request");
  const auto& body = *req.body;

  if (const auto* n = body.if_contains("n"); n && !n->is_null()) {
    const auto v = number(n);
    if (!v) return bypass(std::move(plan), "invalid-request");
    if (*v != 1) return bypass(std::move(plan), "n>1");
  }
  if (const auto* t = body.if_contains("temperature"); t && !t->is_null()) {
    const auto v = number(t);
    if (!v) return bypass(std::move(plan), "invalid-request");
    if (*v > cfg.max_temperature) return bypass(std::move(plan), "temperature");
  }
  // The cache stores text only: logprobs cannot be replayed.
  if (const auto* lp = body.if_contains("logprobs");
      lp && !lp->is_null() && !(lp->is_bool() && !lp->get_bool()))
    return bypass(std::move(plan), "logprobs");

  std::string scope = "v1\nendpoint:";
  scope += req.endpoint == RequestView::Endpoint::kChat ? "chat" : "completions";
  scope += "\nmodel:" + req.model + "\ntenant:" + (shared ? std::string("*shared*") : req.tenant) + "\n";
  std::string text;
  const auto& ctx = cfg.context_for(req.model);
  const auto why = req.endpoint == RequestView::Endpoint::kChat ? plan_chat(cfg, body, ctx, text, scope)
                                                                  : plan_completion(body, text);
  if (!why.empty()) return bypass(std::move(plan), why);

  json::object params;
  for (const auto& kv : body)
    if (!ignored_key(kv.key())) params.emplace(kv.key(), kv.value());
  scope += "params:" + canonical_json(params) + "\n";

  if (!is_valid_utf8(text) || !is_valid_utf8(scope)) return bypass(std::move(plan), "invalid-utf8");
  if (trim(text).empty()) return bypass(std::move(plan), "empty-prompt");
  // MiniLM reads only the first 256 word pieces: two long prompts that differ after that point
  // would embed alike, so truncating would serve wrong answers. Long prompts bypass instead.
  if (text.size() > cfg.max_prompt_bytes) return bypass(std::move(plan), "prompt-too-long");

  plan.scope_key = sha256_hex(scope);
  plan.text = std::move(text);
  plan.write = true;
  plan.read = !cache_control_has(req.cache_control, "no-cache");
  plan.status_without_hit = plan.read ? CacheStatus::kMiss : CacheStatus::kBypass;
  plan.reason = plan.read ? "" : "no-cache";
  return plan;
}

}  // namespace tidegate::cache
