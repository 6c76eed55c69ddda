#include "openai.h"

#include "tidegate/sim/text.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>

namespace tidegate::sim {
namespace json = boost::json;

namespace {

ApiError bad(std::string message, std::string param = "") {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param)};
}

// Text of a message content: a string, or the text parts of an array of content parts.
std::optional<std::string> content_text(const json::value& v) {
  if (v.is_null()) return std::string();
  if (v.is_string()) return std::string(v.get_string());
  if (!v.is_array()) return std::nullopt;
  std::string out;
  for (const auto& part : v.get_array()) {
    if (!part.is_object()) return std::nullopt;
    if (const auto* t = part.get_object().if_contains("text"); t && t->is_string()) out += t->get_string();
  }
  return out;
}

std::optional<ApiError> parse_chat(const json::object& o, GenerationRequest& out, std::string& basis,
                                   PrefixBlockHasher& blocks) {
  const auto* msgs = o.if_contains("messages");
  if (!msgs || !msgs->is_array()) return bad("'messages' must be an array", "messages");
  if (msgs->get_array().empty()) return bad("'messages' must not be empty", "messages");
  out.prompt_tokens = kTokensPerChat;
  for (const auto& m : msgs->get_array()) {
    const auto* mo = m.if_object();
    const auto* role = mo ? mo->if_contains("role") : nullptr;
    if (!role || !role->is_string()) return bad("each message needs a string 'role'", "messages");
    const auto* c = mo->if_contains("content");
    auto text = c ? content_text(*c) : std::optional<std::string>(std::string());
    if (!text) return bad("message 'content' must be a string or an array of parts", "messages");
    out.prompt_tokens += kTokensPerMessage + count_tokens(*text);
    // The chat template's markers around each message are tokens of the prompt too.
    const auto role_hash = hash_text(role->get_string(), 0x726f6c65);
    for (std::int64_t i = 0; i < kTokensPerMessage; ++i) blocks.add_token(role_hash + static_cast<std::uint64_t>(i));
    blocks.add_text(*text);
    basis.append(role->get_string()).append(":").append(*text).append("\n");
    if (role->get_string() == "user") out.echo_text = std::move(*text);
  }
  return std::nullopt;
}

std::optional<ApiError> parse_prompt(const json::object& o, GenerationRequest& out, std::string& basis,
                                     PrefixBlockHasher& blocks) {
  const auto* p = o.if_contains("prompt");
  if (!p) return bad("'prompt' is required", "prompt");
  if (p->is_string()) {
    out.echo_text = std::string(p->get_string());
  } else if (p->is_array() && !p->get_array().empty()) {
    const auto& a = p->get_array();
    if (std::all_of(a.begin(), a.end(), [](const json::value& v) { return v.is_string(); })) {
      // Batched prompts are answered as one (n=1): enough for load shaping.
      for (const auto& v : a) out.echo_text += v.get_string();
    } else if (std::all_of(a.begin(), a.end(), [](const json::value& v) { return v.is_int64() || v.is_uint64(); })) {
      out.prompt_tokens = static_cast<std::int64_t>(a.size());
      for (const auto& v : a) blocks.add_token(mix64(v.is_uint64() ? v.get_uint64() : static_cast<std::uint64_t>(v.get_int64())));
      basis = json::serialize(*p);
      return std::nullopt;
    } else {
      return bad("'prompt' must be a string, an array of strings or an array of token ids", "prompt");
    }
  } else {
    return bad("'prompt' must be a string, an array of strings or an array of token ids", "prompt");
  }
  out.prompt_tokens = std::max<std::int64_t>(1, count_tokens(out.echo_text));
  blocks.add_text(out.echo_text);
  basis = out.echo_text;
  return std::nullopt;
}

std::optional<ApiError> check_model(const json::object& o, const ServerConfig& cfg) {
  const auto* model = o.if_contains("model");
  if (!model || !model->is_string()) return bad("'model' must be a string", "model");
  if (model->get_string() != cfg.model)
    return ApiError{404, "The model `" + std::string(model->get_string()) + "` does not exist.", "NotFoundError", "model"};
  return std::nullopt;
}

// Parses a request body into `v`, which must be a JSON object naming this server's model.
std::optional<ApiError> parse_body(std::string_view body, const ServerConfig& cfg, json::value& v) {
  boost::system::error_code ec;
  v = json::parse(json::string_view(body.data(), body.size()), ec);
  if (ec) return bad("request body is not valid JSON: " + ec.message());
  if (!v.is_object()) return bad("request body must be a JSON object");
  return check_model(v.get_object(), cfg);
}

void append_number(std::string& s, double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  s.append(buf, r.ptr);
}

// As vLLM with --enable-prompt-tokens-details: the cached part of the prompt, which the gateway
// prices at the cached-prompt weight.
std::string usage_json(std::int64_t prompt, std::int64_t completion, std::int64_t cached) {
  return "{\"prompt_tokens\":" + std::to_string(prompt) + ",\"completion_tokens\":" + std::to_string(completion) +
         ",\"total_tokens\":" + std::to_string(prompt + completion) + ",\"prompt_tokens_details\":{\"cached_tokens\":" +
         std::to_string(cached) + "}}";
}

}  // namespace

std::string json_quote(std::string_view s) { return json::serialize(json::string_view(s.data(), s.size())); }

std::string error_body(const ApiError& e) {
  json::object err{{"message", e.message}, {"type", e.type}, {"code", e.status}};
  err["param"] = e.param.empty() ? json::value(nullptr) : json::value(e.param);
  return json::serialize(json::object{{"error", std::move(err)}});
}

std::optional<ApiError> parse_generation(std::string_view body, Api api, const ServerConfig& cfg,
                                         GenerationRequest& out) {
  json::value v;
  if (auto e = parse_body(body, cfg, v)) return e;
  const auto& o = v.get_object();
  out.api = api;
  if (const auto* s = o.if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return bad("'stream' must be a boolean", "stream");
    out.stream = s->get_bool();
  }
  if (const auto* so = o.if_contains("stream_options"); so && so->is_object()) {
    if (const auto* iu = so->get_object().if_contains("include_usage"); iu && iu->is_bool())
      out.include_usage = iu->get_bool();
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    const auto* mt = o.if_contains(key);
    if (!mt || mt->is_null()) continue;
    if (!(mt->is_int64() || mt->is_uint64()) || mt->to_number<std::int64_t>() < 1 ||
        mt->to_number<std::int64_t>() > 1'000'000)
      return bad(std::string("'") + key + "' must be an integer between 1 and 1000000", key);
    out.max_tokens = static_cast<std::int32_t>(mt->to_number<std::int64_t>());
  }
  std::string basis;
  PrefixBlockHasher blocks(cfg.timing.prefix_block_tokens);
  auto e = api == Api::kChat ? parse_chat(o, out, basis, blocks) : parse_prompt(o, out, basis, blocks);
  out.prefix_blocks = blocks.take();
  if (e) return e;
  out.key = hash_text(basis, cfg.seed);
  return std::nullopt;
}

std::int32_t planned_length(const GenerationRequest& req, const ServerConfig& cfg, std::int32_t* echo_pieces) {
  const auto echo = cfg.echo ? static_cast<std::int32_t>(split_pieces(req.echo_text).size()) : 0;
  if (echo_pieces) *echo_pieces = echo;
  std::int32_t n = req.max_tokens ? *req.max_tokens
                                  : 1 + static_cast<std::int32_t>(mix64(req.key) % std::max(1, cfg.max_tokens_default));
  return std::max(n, std::max(echo, 1));
}

Reply plan_reply(const GenerationRequest& req, const ServerConfig& cfg) {
  std::int32_t echo = 0;
  const std::int32_t n = planned_length(req, cfg, &echo);
  Reply r;
  r.tokens.reserve(static_cast<std::size_t>(n));
  if (cfg.echo)
    for (auto piece : split_pieces(req.echo_text)) r.tokens.emplace_back(piece);
  for (std::int32_t i = echo; i < n; ++i) r.tokens.emplace_back(generated_token(req.key, i - echo));
  r.finish_reason = req.max_tokens && n >= *req.max_tokens ? "length" : "stop";
  return r;
}

ChunkWriter::ChunkWriter(const GenerationRequest& req, const ServerConfig& cfg, std::string id, std::int64_t created)
    : api_(req.api) {
  head_ = "{\"id\":\"" + id + "\",\"object\":\"" +
          (api_ == Api::kChat ? "chat.completion.chunk" : "text_completion") +
          "\",\"created\":" + std::to_string(created) + ",\"model\":" + json_quote(cfg.model) + ",\"choices\":";
}

// One choice per event; `payload` is the delta object (chat) or the text field (completions).
std::string ChunkWriter::choice_event(std::string_view payload, std::string_view finish_reason_json) const {
  std::string s = "data: " + head_ + "[{\"index\":0,";
  s += api_ == Api::kChat ? "\"delta\":" : "\"text\":";
  s.append(payload).append(",\"logprobs\":null,\"finish_reason\":").append(finish_reason_json).append("}]}\n\n");
  return s;
}

std::string ChunkWriter::role_event() const { return choice_event(R"({"role":"assistant","content":""})", "null"); }

std::string ChunkWriter::token_event(std::string_view token) const {
  return choice_event(api_ == Api::kChat ? "{\"content\":" + json_quote(token) + "}" : json_quote(token), "null");
}

std::string ChunkWriter::finish_event(std::string_view reason) const {
  return choice_event(api_ == Api::kChat ? "{}" : "\"\"", json_quote(reason));
}

std::string ChunkWriter::usage_event(std::int64_t prompt, std::int64_t completion, std::int64_t cached) const {
  return "data: " + head_ + "[],\"usage\":" + usage_json(prompt, completion, cached) + "}\n\n";
}

std::string full_response_body(const GenerationRequest& req, const ServerConfig& cfg, const std::string& id,
                               std::int64_t created, const Reply& reply) {
  std::string text;
  for (const auto& t : reply.tokens) text += t;
  const bool chat = req.api == Api::kChat;
  std::string s = "{\"id\":\"" + id + "\",\"object\":\"" + (chat ? "chat.completion" : "text_completion") +
                  "\",\"created\":" + std::to_string(created) + ",\"model\":" + json_quote(cfg.model) +
                  ",\"choices\":[{\"index\":0,";
  if (chat) s += "\"message\":{\"role\":\"assistant\",\"content\":" + json_quote(text) + "},";
  else s += "\"text\":" + json_quote(text) + ",";
  s += "\"logprobs\":null,\"finish_reason\":" + json_quote(reply.finish_reason) + "}],\"usage\":" +
       usage_json(req.prompt_tokens, static_cast<std::int64_t>(reply.tokens.size()), reply.cached_tokens) + "}";
  return s;
}

std::optional<ApiError> embeddings_body(std::string_view body, const ServerConfig& cfg, std::string& out,
                                        std::int64_t& prompt_tokens) {
  json::value v;
  if (auto e = parse_body(body, cfg, v)) return e;
  const auto& o = v.get_object();
  const auto* in = o.if_contains("input");
  if (!in) return bad("'input' is required", "input");
  // Each input becomes (text to hash, token count).
  std::vector<std::pair<std::string, std::int64_t>> inputs;
  auto is_int = [](const json::value& x) { return x.is_int64() || x.is_uint64(); };
  if (in->is_string()) {
    inputs.emplace_back(std::string(in->get_string()), count_tokens(in->get_string()));
  } else if (in->is_array() && !in->get_array().empty()) {
    const auto& a = in->get_array();
    if (std::all_of(a.begin(), a.end(), is_int)) {
      inputs.emplace_back(json::serialize(a), static_cast<std::int64_t>(a.size()));
    } else {
      for (const auto& x : a) {
        if (x.is_string()) inputs.emplace_back(std::string(x.get_string()), count_tokens(x.get_string()));
        else if (x.is_array() && std::all_of(x.get_array().begin(), x.get_array().end(), is_int))
          inputs.emplace_back(json::serialize(x), static_cast<std::int64_t>(x.get_array().size()));
        else return bad("'input' must be a string, an array of strings or token id arrays", "input");
      }
    }
  } else {
    return bad("'input' must be a non-empty string or array", "input");
  }
  prompt_tokens = 0;
  out = "{\"object\":\"list\",\"data\":[";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    prompt_tokens += inputs[i].second;
    if (i) out += ',';
    out += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":[";
    const auto vec = embed_text(inputs[i].first, cfg.seed, cfg.embedding_dim);
    for (std::size_t k = 0; k < vec.size(); ++k) {
      if (k) out += ',';
      append_number(out, vec[k]);
    }
    out += "]}";
  }
  out += "],\"model\":" + json_quote(cfg.model) + ",\"usage\":{\"prompt_tokens\":" + std::to_string(prompt_tokens) +
         ",\"total_tokens\":" + std::to_string(prompt_tokens) + "}}";
  return std::nullopt;
}

std::string models_body(const ServerConfig& cfg, std::int64_t created) {
  return "{\"object\":\"list\",\"data\":[{\"id\":" + json_quote(cfg.model) + ",\"object\":\"model\",\"created\":" +
         std::to_string(created) + ",\"owned_by\":\"tidegate-sim\",\"root\":" + json_quote(cfg.model) +
         ",\"parent\":null,\"max_model_len\":" + std::to_string(cfg.timing.kv_capacity_tokens) + "}]}";
}

}  // namespace tidegate::sim
