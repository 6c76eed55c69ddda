// Relaying an SSE stream: events pass one by one as they arrive (chunked downstream),
// the usage-only chunk is dropped when the gateway asked for it, and an upstream that
// breaks mid-stream ends the client's stream with a terminal error event.
#include <cstdio>
#include <sstream>

#include "session.h"

namespace tidegate::gateway {
void Session::start_stream() {
  response_started_ = true;
  awaiting_upstream_ = false;
  stream_sr_.reset();  // it points at the previous head
  stream_head_.emplace(http::status::ok, req_.version());
  auto& h = *stream_head_;
  h.set(http::field::server, "tidegate");
  h.set(http::field::content_type, "text/event-stream");
  h.set(http::field::cache_control, "no-cache");
  h.set("x-request-id", ctx_->request_id);
  for (auto& f : impl_->filters) f->on_response_headers(*ctx_);
  for (const auto& [k, v] : ctx_->response_headers) h.set(k, v);
  h.chunked(true);
  h.keep_alive(keep_alive_ && !impl_->draining);
  ctx_->status = 200;
  stream_sr_.emplace(h);
  stream_.expires_after(secs(config_->timeouts.write_s));
  http::async_write_header(stream_, *stream_sr_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec) return self->close();  // client gone: close() frees the upstream and the slot
    self->ctx_->timings.ttfb_s = self->since_start();
    self->read_stream();
  });
}

void Session::read_stream() {
  if (up_parser_->is_done()) return on_stream_read({});
  up_parser_->get().body().data = up_chunk_.data();
  up_parser_->get().body().size = up_chunk_.size();
  upstream_->expires_after(secs(upstream_budget_s(config_->timeouts.between_chunks_s)));
  http::async_read_some(*upstream_, up_buffer_, *up_parser_, [self = shared_from_this(), g = gen_](beast::error_code ec, std::size_t) {
    if (g == self->gen_) self->on_stream_read(ec);
  });
}

void Session::on_stream_read(beast::error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  const auto got = up_chunk_.size() - up_parser_->get().body().size;
  std::string out;
  const bool strip_usage = parsed_->usage_injected;
  const bool hooks = !impl_->filters.empty();
  sse_.feed(std::string_view(up_chunk_.data(), got), [&](SseEvent&& ev) {
    const bool usage_only = accumulate_stream_chunk(ev.data, summary_);
    if (!usage_only && summary_.completion_tokens < 0 && ev.data.find("\"choices\"") != std::string::npos)
      ++content_chunks_;
    if (hooks) {
      if (summary_.prompt_tokens >= 0) ctx_->prompt_tokens = summary_.prompt_tokens;
      ctx_->completion_tokens = summary_.completion_tokens >= 0 ? summary_.completion_tokens : content_chunks_;
      if (usage_only) {
        boost::json::error_code jec;
        auto v = boost::json::parse(ev.data, jec);
        if (!jec && v.is_object()) {
          for (auto& f : impl_->filters) f->on_stream_event(*ctx_, &v.get_object());
          if (!strip_usage) ev.raw = "data: " + boost::json::serialize(v) + "\n\n";
        }
      } else {
        for (auto& f : impl_->filters) f->on_stream_event(*ctx_, nullptr);
      }
    }
    if (usage_only && strip_usage) return;
    out += ev.raw;
  });
  up_parser_->get().body().size = up_chunk_.size();  // consumed
  if (ec) {
    if (!out.empty()) pending_out_ = std::move(out);
    return attempt_failed(ec == beast::error::timeout ? "stream_idle_timeout" : "stream_broken", false,
                          ec == beast::error::timeout);
  }
  const bool done = up_parser_->is_done();
  if (done && !summary_.done) {
    // The replica closed the stream cleanly but never said [DONE]: still a cut answer.
    if (!out.empty()) pending_out_ = std::move(out);
    return attempt_failed("stream_truncated", false, false);
  }
  if (out.empty() && !done) return read_stream();
  write_stream_chunk(std::move(out), done);
}

void Session::write_stream_chunk(std::string data, bool last) {
  auto buf = std::make_shared<std::string>(std::move(data));
  ctx_->bytes_sent += buf->size();
  auto after = [self = shared_from_this(), buf, last](beast::error_code ec, std::size_t) {
    if (ec) {
      // Client disconnected: cancel the upstream request (closing its socket) and free the slot.
      self->impl_->stats.local_reply("client_disconnected");
      return self->close();
    }
    if (!last) return self->read_stream();
    self->upstream_end_ = Clock::now();
    self->ctx_->prompt_tokens = self->summary_.prompt_tokens;
    self->ctx_->completion_tokens = self->summary_.completion_tokens;
    self->ctx_->content = std::move(self->summary_.content);
    self->ctx_->finish_reason = self->summary_.finish_reason;
    self->ctx_->complete = true;
    const auto serial = self->replica_ ? self->replica_->serial : 0;
    const bool reusable = self->up_parser_->get().keep_alive() && self->up_buffer_.size() == 0;
    self->release_replica(Outcome::kSuccess);
    if (reusable && self->upstream_) self->worker_.conns.put(serial, std::move(self->upstream_));
    self->drop_upstream();
    self->on_written(!self->stream_head_->keep_alive(), {});
  };
  // Chunk framing by hand: one contiguous write per batch of events.
  std::string framed;
  if (!buf->empty()) {
    char size[20];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", buf->size());
    framed.reserve(buf->size() + 32);
    framed.append(size, static_cast<std::size_t>(n));
    framed += *buf;
    framed += "\r\n";
  }
  if (last) framed += "0\r\n\r\n";
  *buf = std::move(framed);
  stream_.expires_after(secs(config_->timeouts.write_s));
  net::async_write(stream_, net::buffer(*buf), std::move(after));
}

void Session::end_stream_with_error(const ApiError& e) {
  std::string out = std::move(pending_out_);
  pending_out_.clear();
  out += "data: " + error_body(e) + "\n\n";
  ctx_->status = 200;  // the head already said 200; the reason records what happened
  ctx_->reason = e.code;
  ctx_->prompt_tokens = summary_.prompt_tokens;
  ctx_->completion_tokens = summary_.completion_tokens;
  ctx_->content = std::move(summary_.content);
  ctx_->finish_reason = summary_.finish_reason;
  ctx_->complete = false;
  auto buf = std::make_shared<std::string>();
  std::ostringstream size;
  size << std::hex << out.size();
  *buf = size.str() + "\r\n" + out + "\r\n0\r\n\r\n";
  ctx_->bytes_sent += out.size();
  stream_.expires_after(secs(config_->timeouts.write_s));
  net::async_write(stream_, net::buffer(*buf), [self = shared_from_this(), buf](beast::error_code ec, std::size_t) {
    self->on_written(ec || !self->stream_head_->keep_alive(), ec);
  });
}

}  // namespace tidegate::gateway
