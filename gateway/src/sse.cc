#include "sse.h"

#include "chunk_scan.h"

namespace tidegate::gateway {

void SseParser::feed(std::string_view bytes) {
  if (start_ > 0) {  // drop the events already handed out
    buffer_.erase(0, start_);
    search_ -= start_;
    start_ = 0;
  }
  buffer_.append(bytes);
  if (buffer_.size() > kMaxEventBytes) {
    overflowed_ = true;
    buffer_.clear();
    search_ = 0;
  }
}

bool SseParser::next(SseEvent& ev) {
  // Only new bytes can end an event; the empty-line test looks backwards, so it also sees
  // a "\n" + "\n" pair split across two reads.
  for (auto nl = buffer_.find('\n', search_); nl != std::string::npos; nl = buffer_.find('\n', nl + 1)) {
    search_ = nl + 1;
    const bool leading_blank = nl == start_ || (nl == start_ + 1 && buffer_[start_] == '\r');
    if (leading_blank) {  // stray blank lines between events carry nothing
      start_ = nl + 1;
      continue;
    }
    const bool blank_line = (nl >= start_ + 1 && buffer_[nl - 1] == '\n') ||
                            (nl >= start_ + 2 && buffer_[nl - 1] == '\r' && buffer_[nl - 2] == '\n');
    if (blank_line) {
      const auto raw = std::string_view(buffer_).substr(start_, nl + 1 - start_);
      start_ = nl + 1;
      parse_event(raw, ev);
      return true;
    }
  }
  search_ = buffer_.size();
  return false;
}

void SseParser::parse_event(std::string_view raw, SseEvent& ev) {
  ev.raw = raw;
  ev.data = {};
  ev.event = {};
  int data_lines = 0;
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
      if (data_lines == 1) joined_.assign(ev.data);  // second line: from now on, join
      if (data_lines >= 1) {
        joined_.push_back('\n');
        joined_.append(value);
      } else {
        ev.data = value;
      }
      ++data_lines;
    } else if (field == "event") {
      ev.event = value;
    }
  }
  if (data_lines > 1) ev.data = joined_;
}

ChunkKind accumulate_stream_chunk(std::string_view data, CompletionSummary& s) {
  if (data == "[DONE]") {
    s.done = true;
    return {};
  }
  ChunkFacts f;
  if (!scan_chunk(data, f)) return {};
  if (f.prompt_tokens) s.prompt_tokens = *f.prompt_tokens;
  if (f.completion_tokens) s.completion_tokens = *f.completion_tokens;
  if (f.cached_tokens && *f.cached_tokens >= 0) s.cached_prompt_tokens = *f.cached_tokens;
  bool has_content = false;
  if (f.choice) {
    const auto& c = *f.choice;
    if (c.delta_is_object) {
      if (c.delta_content.present) c.delta_content.append_to(s.content);
      has_content = c.delta_content.present && !c.delta_content.raw.empty();
    } else if (c.text.present) {
      c.text.append_to(s.content);
      has_content = !c.text.raw.empty();
    }
    if (c.finish_reason.present) {
      s.finish_reason.clear();
      c.finish_reason.append_to(s.finish_reason);
    }
  }
  return {!f.has_choices && f.usage_is_object, f.has_choices, has_content};
}

void summarize_response_body(std::string_view body, CompletionSummary& s) {
  ChunkFacts f;
  if (!scan_chunk(body, f)) return;
  if (f.prompt_tokens) s.prompt_tokens = *f.prompt_tokens;
  if (f.completion_tokens) s.completion_tokens = *f.completion_tokens;
  if (f.cached_tokens && *f.cached_tokens >= 0) s.cached_prompt_tokens = *f.cached_tokens;
  if (f.choice) {
    const auto& c = *f.choice;
    if (c.message_is_object) {
      if (c.message_content.present) {
        s.content.clear();
        c.message_content.append_to(s.content);
      }
    } else if (c.text.present) {
      s.content.clear();
      c.text.append_to(s.content);
    }
    if (c.finish_reason.present) {
      s.finish_reason.clear();
      c.finish_reason.append_to(s.finish_reason);
    }
  }
  s.done = true;
}

}  // namespace tidegate::gateway
