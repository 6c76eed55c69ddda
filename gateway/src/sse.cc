#include "sse.h"

#include <boost/json.hpp>

namespace tidegate::gateway {
namespace json = boost::json;

void SseParser::feed(std::string_view bytes, const std::function<void(SseEvent&&)>& on_event) {
  // Only new bytes can end an event; the empty-line test looks backwards, so it also sees
  // a "\n" + "\n" pair split across two reads.
  const std::size_t from = buffer_.size();
  buffer_.append(bytes);
  std::size_t start = 0;
  for (auto nl = buffer_.find('\n', from); nl != std::string::npos; nl = buffer_.find('\n', nl + 1)) {
    const bool leading_blank = nl == start || (nl == start + 1 && buffer_[start] == '\r');
    if (leading_blank) {  // stray blank lines between events carry nothing
      start = nl + 1;
      continue;
    }
    const bool blank_line = (nl >= start + 1 && buffer_[nl - 1] == '\n') ||
                            (nl >= start + 2 && buffer_[nl - 1] == '\r' && buffer_[nl - 2] == '\n');
    if (blank_line) {
      parse_event(std::string_view(buffer_).substr(start, nl + 1 - start), on_event);
      start = nl + 1;
    }
  }
  buffer_.erase(0, start);
  if (buffer_.size() > kMaxEventBytes) {
    overflowed_ = true;
    buffer_.clear();
  }
}

void SseParser::parse_event(std::string_view raw, const std::function<void(SseEvent&&)>& on_event) {
  SseEvent ev;
  ev.raw.assign(raw);
  bool any_data = false;
  std::size_t pos = 0;
  while (pos < raw.size()) {
    auto end = raw.find('\n', pos);
    if (end == std::string_view::npos) end = raw.size();
    auto line = raw.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = end + 1;
    if (line.empty() || line.front() == ':') continue;  // blank or comment
    const auto colon = line.find(':');
    auto field = line.substr(0, colon);
    std::string_view value;
    if (colon != std::string_view::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
      if (any_data) ev.data.push_back('\n');
      ev.data.append(value);
      any_data = true;
    } else if (field == "event") {
      ev.event.assign(value);
    }
  }
  on_event(std::move(ev));
}

namespace {

void read_usage(const json::object& obj, CompletionSummary& s) {
  const auto* usage = obj.if_contains("usage");
  if (!usage || !usage->is_object()) return;
  const auto& u = usage->get_object();
  if (const auto* p = u.if_contains("prompt_tokens"); p && p->is_int64()) s.prompt_tokens = p->get_int64();
  if (const auto* c = u.if_contains("completion_tokens"); c && c->is_int64()) s.completion_tokens = c->get_int64();
}

const json::object* first_choice(const json::object& obj, bool* has_choices) {
  *has_choices = false;
  const auto* choices = obj.if_contains("choices");
  if (!choices || !choices->is_array() || choices->get_array().empty()) return nullptr;
  *has_choices = true;
  for (const auto& c : choices->get_array()) {
    if (!c.is_object()) continue;
    const auto* idx = c.get_object().if_contains("index");
    if (!idx || (idx->is_int64() && idx->get_int64() == 0)) return &c.get_object();
  }
  return nullptr;
}

void read_finish(const json::object& choice, CompletionSummary& s) {
  if (const auto* f = choice.if_contains("finish_reason"); f && f->is_string()) s.finish_reason = f->get_string();
}

}  // namespace

bool accumulate_stream_chunk(std::string_view data, CompletionSummary& s) {
  if (data == "[DONE]") {
    s.done = true;
    return false;
  }
  json::error_code ec;
  auto v = json::parse(data, ec);
  if (ec || !v.is_object()) return false;
  const auto& obj = v.get_object();
  read_usage(obj, s);
  bool has_choices = false;
  const auto* choice = first_choice(obj, &has_choices);
  if (choice) {
    if (const auto* delta = choice->if_contains("delta"); delta && delta->is_object()) {
      if (const auto* c = delta->get_object().if_contains("content"); c && c->is_string()) s.content.append(c->get_string());
    } else if (const auto* t = choice->if_contains("text"); t && t->is_string()) {
      s.content.append(t->get_string());
    }
    read_finish(*choice, s);
  }
  const auto* usage = obj.if_contains("usage");
  return !has_choices && usage && usage->is_object();
}

void summarize_response_body(std::string_view body, CompletionSummary& s) {
  json::error_code ec;
  auto v = json::parse(body, ec);
  if (ec || !v.is_object()) return;
  const auto& obj = v.get_object();
  read_usage(obj, s);
  bool has_choices = false;
  if (const auto* choice = first_choice(obj, &has_choices)) {
    if (const auto* m = choice->if_contains("message"); m && m->is_object()) {
      if (const auto* c = m->get_object().if_contains("content"); c && c->is_string()) s.content = c->get_string();
    } else if (const auto* t = choice->if_contains("text"); t && t->is_string()) {
      s.content = t->get_string();
    }
    read_finish(*choice, s);
  }
  s.done = true;
}

}  // namespace tidegate::gateway
