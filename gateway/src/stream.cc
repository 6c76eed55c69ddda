// Relaying an SSE stream: the events of each upstream read go out as one chunk (one write,
// the response head included when the first events came with the upstream head), the
// usage-only chunk is dropped when the gateway asked for it, and an upstream that breaks
// mid-stream ends the client's stream with a terminal error event.
#include <boost/json.hpp>

#include <cstdio>

#include "tidegate/common/json_text.h"

#include "session.h"

namespace tidegate::gateway {

// By hand: the Beast serializer was a visible cost per stream, and a string we own can be
// sent in the same write as the first events.
void Session::format_stream_head() {
  stream_keep_alive_ = keep_alive_ && !impl_->draining;
  auto& h = stream_head_;
  h.clear();
  h += "HTTP/1.1 200 OK\r\nServer: tidegate\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nx-request-id: ";
  h += ctx_->request_id;
  for (auto& f : impl_->filters) invoke_filter("on_response_headers", [&] { f->on_response_headers(*ctx_); });
  for (const auto& [k, v] : ctx_->response_headers) {
    h += "\r\n";
    h += k;
    h += ": ";
    h += v;
  }
  h += "\r\nTransfer-Encoding: chunked\r\n";
  if (!stream_keep_alive_) h += "Connection: close\r\n";
  h += "\r\n";
}

void Session::start_stream() {
  response_started_ = true;
  awaiting_upstream_ = false;
  ctx_->status = 200;
  format_stream_head();
  head_pending_ = true;
  stream_out_.clear();
  // Events that came with the upstream head are relayed in the same write as our head;
  // otherwise the head goes out now, so clients see the 200 while the model works.
  if (up_buffer_.size() > 0) return read_stream();
  write_stream_chunk(false);
}

void Session::read_stream() {
  if (up_parser_->is_done()) return on_stream_read({});
  up_parser_->body().data = up_chunk_.data();
  up_parser_->body().size = up_chunk_.size();
  upstream_->expires_after(secs(upstream_budget_s(config_->timeouts.between_chunks_s)));
  http::async_read_some(*upstream_, up_buffer_, *up_parser_, [self = shared_from_this(), g = gen_](beast::error_code ec, std::size_t) {
    if (g == self->gen_) self->on_stream_read(ec);
  });
}

void Session::on_stream_read(beast::error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  relay_stream_bytes();
  // Beast's read returns after each chunk header or chunk; the rest of what that read
  // brought in (more events, the last chunk) is parsed here, so it leaves in the same
  // write. Non-eager puts: nothing parsed is ever held back waiting for the socket.
  while (!ec && !up_parser_->is_done() && up_buffer_.size() > 0 && !sse_.overflowed()) {
    up_parser_->body().data = up_chunk_.data();
    up_parser_->body().size = up_chunk_.size();
    const auto used = up_parser_->put(up_buffer_.data(), ec);
    up_buffer_.consume(used);
    if (ec == http::error::need_buffer) ec = {};
    relay_stream_bytes();
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (used == 0 && !ec) break;
  }
  if (ec)
    return attempt_failed(ec == beast::error::timeout ? Failure::kStreamIdleTimeout : Failure::kStreamBroken);
  // An event past SseParser::kMaxEventBytes with no blank line: the parser dropped it, so
  // what follows would be the middle of an event. The replica broke the stream; it ends here.
  if (sse_.overflowed()) return attempt_failed(Failure::kStreamEventTooLarge);
  const bool done = up_parser_->is_done();
  // The replica closed the stream cleanly but never said [DONE]: still a cut answer.
  if (done && !summary_.done) return attempt_failed(Failure::kStreamTruncated);
  if (stream_out_.empty() && !done && !head_pending_) return read_stream();
  write_stream_chunk(done);
}

// The body bytes the parser just wrote into up_chunk_: events to stream_out_, summary,
// hooks. on_stream_event runs once per batch of events (not per event), and separately
// for the usage chunk.
void Session::relay_stream_bytes() {
  const auto got = up_chunk_.size() - up_parser_->body().size;
  up_parser_->body().size = up_chunk_.size();  // consumed
  if (got == 0) return;
  const bool strip_usage = parsed_->usage_injected;
  const bool hooks = !impl_->filters.empty();
  auto update_tokens = [this] {
    if (summary_.prompt_tokens >= 0) ctx_->prompt_tokens = summary_.prompt_tokens;
    if (summary_.cached_prompt_tokens >= 0) ctx_->cached_prompt_tokens = summary_.cached_prompt_tokens;
    ctx_->completion_tokens = summary_.completion_tokens >= 0 ? summary_.completion_tokens : content_chunks_;
  };
  bool progress = false;  // events not yet reported to on_stream_event
  auto report_progress = [&] {
    update_tokens();
    for (auto& f : impl_->filters) invoke_filter("on_stream_event", [&] { f->on_stream_event(*ctx_, nullptr); });
    progress = false;
  };
  if (sse_.overflowed()) return;  // the stream is ending; nothing after the cut is relayed
  sse_.feed(std::string_view(up_chunk_.data(), got));
  SseEvent ev;
  while (sse_.next(ev)) {
    const auto kind = accumulate_stream_chunk(ev.data, summary_);
    // Until the engine's usage arrives, content chunks stand in for tokens (a lower bound:
    // an engine may put several tokens in one chunk, never fewer than one); the usage then
    // replaces the count, so the ledger only ever sees it go up.
    if (kind.has_content && summary_.completion_tokens < 0) ++content_chunks_;
    if (!kind.usage_only) {
      progress = true;
      stream_out_.append(ev.raw);
      continue;
    }
    if (hooks) {
      if (progress) report_progress();
      update_tokens();
      boost::json::error_code jec;
      auto v = boost::json::parse(ev.data, jec);
      if (!jec && v.is_object()) {
        auto& usage = v.get_object();
        for (auto& f : impl_->filters) invoke_filter("on_stream_event", [&] { f->on_stream_event(*ctx_, &usage); });
        if (!strip_usage) {
          stream_out_ += "data: ";
          stream_out_ += common::to_json_text(v);  // the added cost in plain decimals
          stream_out_ += "\n\n";
        } else {
          // The client did not ask for usage, so the chunk stays with us; what filters added
          // to it (the request's cost) still reaches the client, as an SSE comment, which
          // every SSE client, the openai SDK included, skips unless it looks.
          boost::json::object added;
          for (const auto& kv : usage)
            if (kv.key().starts_with("tidegate_")) added.emplace(kv.key(), kv.value());
          if (!added.empty()) {
            stream_out_ += ": ";
            stream_out_ += common::to_json_text(added);
            stream_out_ += "\n\n";
          }
        }
        continue;
      }
    }
    if (!strip_usage) stream_out_.append(ev.raw);
  }
  if (hooks && progress) report_progress();
}

// One write: [head] [chunk-size line, events, CRLF] [last chunk]. stream_out_ stays intact
// until the write completes (the session is strictly read, then write).
std::array<net::const_buffer, 3> Session::frame_stream_out(bool last) {
  stream_frame_.clear();
  if (head_pending_) {
    stream_frame_ = stream_head_;
    head_pending_ = false;
  }
  if (!stream_out_.empty()) {
    char size[24];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", stream_out_.size());
    stream_frame_.append(size, static_cast<std::size_t>(n));
  }
  std::string_view suffix = stream_out_.empty() ? (last ? "0\r\n\r\n" : "") : (last ? "\r\n0\r\n\r\n" : "\r\n");
  ctx_->bytes_sent += stream_out_.size();
  return {net::buffer(stream_frame_), net::buffer(stream_out_), net::buffer(suffix.data(), suffix.size())};
}

void Session::write_stream_chunk(bool last) {
  stream_.expires_after(secs(config_->timeouts.write_s));
  net::async_write(stream_, frame_stream_out(last), [self = shared_from_this(), last](beast::error_code ec, std::size_t) {
    if (ec) {
      // Client disconnected: cancel the upstream request (closing its socket) and free the slot.
      return self->fail(Failure::kClientDisconnected, "");  // counted; the connection closes
    }
    self->stream_out_.clear();
    if (self->ctx_->timings.ttfb_s < 0) self->ctx_->timings.ttfb_s = self->since_start();
    if (!last) return self->read_stream();
    self->finish_stream();
  });
}

void Session::finish_stream() {
  upstream_end_ = Clock::now();
  ctx_->prompt_tokens = summary_.prompt_tokens;
  ctx_->cached_prompt_tokens = summary_.cached_prompt_tokens;
  ctx_->completion_tokens = summary_.completion_tokens >= 0 ? summary_.completion_tokens : content_chunks_;
  ctx_->content = std::move(summary_.content);
  ctx_->finish_reason = summary_.finish_reason;
  ctx_->complete = true;
  const auto replica = replica_;
  const bool reusable = up_parser_->keep_alive() && up_buffer_.size() == 0;
  release_replica(Outcome::kSuccess);
  if (reusable && upstream_ && replica) worker_.conns.put(replica, std::move(upstream_));
  drop_upstream(false);
  on_written(!stream_keep_alive_, {});
}

void Session::end_stream_with_error(const ApiError& e) {
  // Events already read are still in stream_out_: they go first, then the terminal event.
  stream_out_ += "data: ";
  stream_out_ += error_body(e);
  stream_out_ += "\n\n";
  ctx_->status = 200;  // the head already said 200; the reason records what happened
  ctx_->reason = e.code;
  ctx_->prompt_tokens = summary_.prompt_tokens;
  ctx_->cached_prompt_tokens = summary_.cached_prompt_tokens;
  ctx_->completion_tokens = summary_.completion_tokens >= 0 ? summary_.completion_tokens : content_chunks_;
  ctx_->content = std::move(summary_.content);
  ctx_->finish_reason = summary_.finish_reason;
  ctx_->complete = false;
  stream_.expires_after(secs(config_->timeouts.write_s));
  net::async_write(stream_, frame_stream_out(true), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->stream_out_.clear();
    self->on_written(ec || !self->stream_keep_alive_, ec);
  });
}

}  // namespace tidegate::gateway
