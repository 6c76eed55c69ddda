// Relaying an SSE stream: the events of each upstream read go out as one chunk (one write,
// the response head included when the first events came with the upstream head), the
// usage-only chunk is dropped when the gateway asked for it, and an upstream that breaks
// mid-stream ends the client's stream with a terminal error event.
#include <boost/json.hpp>

#include <cstdio>

#include "active_request.h"
#include "tidegate/common/json_text.h"

namespace tidegate::gateway {

// By hand: the Beast serializer was a visible cost per stream, and a string we own can be
// sent in the same write as the first events.
void ActiveRequest::format_stream_head() {
  stream_keep_alive_ = conn_.keep_alive() && !impl().draining;
  auto& h = conn_.stream_buffers().head;
  h.clear();
  h += "HTTP/1.1 200 OK\r\nServer: tidegate\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nx-request-id: ";
  h += ctx_->request_id;
  for (auto& f : impl().filters) invoke_filter("on_response_headers", [&] { f->on_response_headers(*ctx_); });
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

void ActiveRequest::start_stream() {
  response_started_ = true;
  ctx_->status = 200;
  format_stream_head();
  head_pending_ = true;
  auto& out = conn_.stream_buffers();
  out.out.clear();
  out.sse.reset();
  // Events that came with the upstream head are relayed in the same write as our head;
  // otherwise the head goes out now, so clients see the 200 while the model works.
  if (attempt_->has_buffered()) return attempt_->read_stream();
  write_stream_chunk(false);
}

void ActiveRequest::on_attempt_stream(UpstreamAttempt& a, beast::error_code ec) {
  auto self = shared_from_this();
  relay_stream_bytes(a.take_chunk());
  auto& sse = conn_.stream_buffers().sse;
  // Beast's read returns after each chunk header or chunk; the rest of what that read
  // brought in (more events, the last chunk) is parsed here, so it leaves in the same
  // write. Non-eager puts: nothing parsed is ever held back waiting for the socket.
  while (!ec && !sse.overflowed()) {
    const bool more = a.parse_buffered(ec);
    relay_stream_bytes(a.take_chunk());
    if (!more) break;
  }
  if (ec)
    return attempt_failed(ec == beast::error::timeout ? Failure::kStreamIdleTimeout : Failure::kStreamBroken, false);
  // An event past SseParser::kMaxEventBytes with no blank line: the parser dropped it, so
  // what follows would be the middle of an event. The replica broke the stream; it ends here.
  if (sse.overflowed()) return attempt_failed(Failure::kStreamEventTooLarge, false);
  const bool done = a.parser().is_done();
  // The replica closed the stream cleanly but never said [DONE]: still a cut answer.
  if (done && !summary_.done) return attempt_failed(Failure::kStreamTruncated, false);
  if (conn_.stream_buffers().out.empty() && !done && !head_pending_) return a.read_stream();
  write_stream_chunk(done);
}

// Body bytes the parser wrote into the attempt's chunk: events to the output, summary,
// hooks. on_stream_event runs once per batch of events (not per event), and separately
// for the usage chunk.
void ActiveRequest::relay_stream_bytes(std::string_view bytes) {
  if (bytes.empty()) return;
  auto& out = conn_.stream_buffers().out;
  auto& sse = conn_.stream_buffers().sse;
  const bool strip_usage = parsed_->usage_injected;
  const bool hooks = !impl().filters.empty();
  bool progress = false;  // events not yet reported to on_stream_event
  auto report_progress = [&] {
    copy_tokens();
    for (auto& f : impl().filters) invoke_filter("on_stream_event", [&] { f->on_stream_event(*ctx_, nullptr); });
    progress = false;
  };
  if (sse.overflowed()) return;  // the stream is ending; nothing after the cut is relayed
  sse.feed(bytes);
  SseEvent ev;
  while (sse.next(ev)) {
    const auto kind = accumulate_stream_chunk(ev.data, summary_);
    // Content chunks stand in for tokens until the usage arrives (copy_tokens); the usage
    // then replaces the count, so the ledger only ever sees it go up.
    if (kind.has_content && summary_.completion_tokens < 0) ++content_chunks_;
    if (!kind.usage_only) {
      progress = true;
      out.append(ev.raw);
      continue;
    }
    if (hooks) {
      if (progress) report_progress();
      copy_tokens();
      boost::json::error_code jec;
      auto v = boost::json::parse(ev.data, jec);
      if (!jec && v.is_object()) {
        auto& usage = v.get_object();
        for (auto& f : impl().filters) invoke_filter("on_stream_event", [&] { f->on_stream_event(*ctx_, &usage); });
        if (!strip_usage) {
          out += "data: ";
          out += common::to_json_text(v);  // the added cost in plain decimals
          out += "\n\n";
        } else {
          // The client did not ask for usage, so the chunk stays with us; what filters added
          // to it (the request's cost) still reaches the client, as an SSE comment, which
          // every SSE client, the openai SDK included, skips unless it looks.
          boost::json::object added;
          for (const auto& kv : usage)
            if (kv.key().starts_with("tidegate_")) added.emplace(kv.key(), kv.value());
          if (!added.empty()) {
            out += ": ";
            out += common::to_json_text(added);
            out += "\n\n";
          }
        }
        continue;
      }
    }
    if (!strip_usage) out.append(ev.raw);
  }
  if (hooks && progress) report_progress();
}

// One write: [head] [chunk-size line, events, CRLF] [last chunk]. The output stays intact
// until the write completes (a stream is strictly read, then write).
std::array<net::const_buffer, 3> ActiveRequest::frame_stream_out(bool last) {
  auto& b = conn_.stream_buffers();
  b.frame.clear();
  if (head_pending_) {
    b.frame = b.head;
    head_pending_ = false;
  }
  if (!b.out.empty()) {
    char size[24];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", b.out.size());
    b.frame.append(size, static_cast<std::size_t>(n));
  }
  std::string_view suffix = b.out.empty() ? (last ? "0\r\n\r\n" : "") : (last ? "\r\n0\r\n\r\n" : "\r\n");
  ctx_->bytes_sent += b.out.size();
  return {net::buffer(b.frame), net::buffer(b.out), net::buffer(suffix.data(), suffix.size())};
}

void ActiveRequest::write_stream_chunk(bool last) {
  conn_.write_response(frame_stream_out(last), [self = shared_from_this(), last](beast::error_code ec) {
    if (self->ended_) return;
    // Client disconnected: the connection closes, which cancels the upstream attempt and
    // frees the slot.
    if (ec) return self->conn_.fail(Failure::kClientDisconnected, "");  // counted
    self->conn_.stream_buffers().out.clear();
    if (self->ctx_->timings.ttfb_s < 0) self->ctx_->timings.ttfb_s = self->conn_.since_start();
    if (!last) return self->attempt_->read_stream();
    self->finish_stream();
  });
}

void ActiveRequest::finish_stream() {
  upstream_end_ = Clock::now();
  summary_to_context(true);
  release_replica(Outcome::kSuccess);
  attempt_->finish();  // the connection goes back to the pool when the replica keeps it open
  drop_attempt(false);
  conn_.response_written(!stream_keep_alive_, {});
}

void ActiveRequest::end_stream_with_error(const ApiError& e) {
  // Events already read are still in the output: they go first, then the terminal event.
  auto& out = conn_.stream_buffers().out;
  out += "data: ";
  out += error_body(e);
  out += "\n\n";
  ctx_->status = 200;  // the head already said 200; the reason records what happened
  ctx_->reason = e.code;
  summary_to_context(false);
  conn_.write_response(frame_stream_out(true), [self = shared_from_this()](beast::error_code ec) {
    if (self->ended_) return;
    self->conn_.stream_buffers().out.clear();
    self->conn_.response_written(ec || !self->stream_keep_alive_, ec);
  });
}

}  // namespace tidegate::gateway
