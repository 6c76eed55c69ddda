#include "client_connection.h"

#include "active_request.h"

#include "tidegate/common/log.h"

namespace tidegate::gateway {
using namespace std::string_view_literals;

ClientConnection::ClientConnection(std::shared_ptr<Gateway::Impl> impl, Worker& worker, Socket socket)
    : impl_(std::move(impl)), worker_(worker), socket_(std::move(socket)) {
  impl_->open_connections++;
  impl_->stats.connections_open.Increment();
  impl_->stats.connections_total.Increment();
}

ClientConnection::~ClientConnection() {
  // Only reached with a request still held when the loop is torn down (every other path ends
  // the request first): its replica and attempt go back without a log line.
  if (request_) request_->abandon();
  impl_->open_connections--;
  impl_->stats.connections_open.Decrement();
  std::lock_guard lock(worker_.connections_mu);
  worker_.connections.erase(this);
}

void ClientConnection::start() {
  {
    std::lock_guard lock(worker_.connections_mu);
    worker_.connections[this] = weak_from_this();
  }
  wait_for_request();
}

void ClientConnection::close_if_idle() {
  if (idle_) close();
}

void ClientConnection::on_tick(Clock::time_point now) {
  if (request_) request_->on_tick(now);  // the upstream attempt's deadline
  if (deadline_.expired(now)) {
    beast::error_code ignored;
    socket_.close(ignored);  // the pending step completes with an error, read as a timeout
    return;
  }
  if (request_ && request_->awaiting_upstream()) watch_client();
}

double ClientConnection::since_start() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

// Waiting for the first byte of a request is "idle" (keep-alive timeout); once bytes come,
// the whole head must arrive within header_read (slow-loris). A new connection gets the
// header timeout from the start.
void ClientConnection::wait_for_request() {
  impl_->refresh(config_, config_seen_);
  if (impl_->draining && !first_request_) return close();
  if (buffer_.size() > 0) return read_header();
  idle_ = true;
  deadline_.arm(first_request_ ? config_->timeouts.header_read_s : config_->timeouts.idle_s);
  // The raw socket, not the Beast stream: the tick enforces this step's deadline, and a plain
  // buffer lets Asio use recv(2) rather than recvmsg(2) with a one-entry iovec.
  socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
    self->idle_ = false;
    self->deadline_.disarm();
    if (ec) return self->close();
    self->buffer_.commit(n);
    self->read_header();
  });
}

void ClientConnection::read_header() {
  idle_ = false;
  parser_.emplace(req_);
  parser_->header_limit(static_cast<std::uint32_t>(config_->limits.max_header_bytes));
  parser_->body_limit(config_->limits.max_body_bytes);
  // What a client can make us hold unparsed: a head, or a chunk header with its extensions, or
  // a trailer section, none of which the parser consumes until it is whole. Without a bound, a
  // chunk extension of hundreds of MiB was buffered before the key was even checked. Body bytes
  // are consumed as they arrive, so this is not a bound on the body (body_limit is).
  buffer_.max_size(std::max<std::size_t>(buffer_.size(), config_->limits.max_header_bytes + kFramingSlackBytes));
  // Usually one read has brought the whole request: parse it from the buffer here rather than
  // through async_read_header, whose immediate completion would be queued behind a poll of the
  // reactor. Only a head still incomplete waits for more bytes.
  if (buffer_.size() > 0) {
    beast::error_code ec;
    buffer_.consume(parser_->put(buffer_.data(), ec));
    if (ec != http::error::need_more) return on_header(ec);
  }
  deadline_.arm(config_->timeouts.header_read_s);
  http::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->deadline_.disarm();
    self->on_header(self->deadline_.mapped(ec));
  });
}

void ClientConnection::on_header(beast::error_code ec) {
  start_ = Clock::now();
  if (ec == http::error::header_limit) {
    return fail(Failure::kHeaderTooLarge, "request headers are larger than the limit", true);
  }
  if (ec == http::error::body_limit) {
    return fail(Failure::kBodyTooLarge, "request body is larger than " + std::to_string(config_->limits.max_body_bytes) + " bytes",
                true);
  }
  if (ec == beast::error::timeout) {
    return fail(Failure::kHeaderTimeout, "");  // closes: a slow-loris client gets no more of our time
  }
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::operation_aborted) return close();
  if (ec) {
    return fail(Failure::kBadHttp, "malformed HTTP request: " + ec.message(), true);
  }
  // The body's bytes that came with the head, parsed here for the same reason.
  while (!parser_->is_done() && buffer_.size() > 0) {
    const std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec) return on_body(ec);
    if (used == 0) break;
  }
  if (parser_->is_done()) return on_body({}, false);
  // curl and others wait (up to a second) for this before sending a larger body.
  if (beast::iequals(req_.header(http::field::expect), "100-continue")) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    return write_response(net::buffer(kContinue.data(), kContinue.size()), [this](beast::error_code ec) {
      if (ec) return close();
      read_body();
    });
  }
  read_body();
}

void ClientConnection::read_body() {
  deadline_.arm(config_->timeouts.body_read_s);
  http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    self->deadline_.disarm();
    self->on_body(self->deadline_.mapped(ec));
  });
}

void ClientConnection::on_body(beast::error_code ec, bool waited) {
  if (ec == http::error::body_limit) {
    return fail(Failure::kBodyTooLarge, "request body is larger than the limit", true);
  }
  if (ec == http::error::buffer_overflow || ec == net::error::no_buffer_space || ec == http::error::header_limit) {
    return fail(Failure::kHeaderTooLarge, "chunk extensions or trailers are larger than limits.max_header_bytes", true);
  }
  if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset)
    return close();  // gone or too slow: nobody to answer
  if (ec) {  // bad framing in the body (a malformed chunk size, say): say so, then close
    return fail(Failure::kBadHttp, "malformed HTTP request body: " + ec.message(), true);
  }
  keep_alive_ = req_.keep_alive();
  impl_->refresh(config_, config_seen_);  // a reload while this connection sat idle applies now
  if (waited) start_ = Clock::now();
  handle_request();
}

// Responses are formatted by hand into one buffer (plus the body): on the hot path this is
// measurably cheaper than Beast's generic serializer.
void ClientConnection::send_local(LocalReply reply, bool close) {
  const bool must_close = close || !keep_alive_ || impl_->draining;
  // The connection's own buffers, reused: one response is written at a time.
  auto& head = out_head_;
  head.clear();
  head += "HTTP/1.1 "sv;
  head += std::to_string(reply.status);
  head += ' ';
  head += http::obsolete_reason(static_cast<http::status>(reply.status));
  head += "\r\nServer: tidegate\r\nContent-Type: "sv;
  head += reply.content_type;
  auto add = [&head](std::string_view k, std::string_view v) {
    head += "\r\n"sv;
    head += k;
    head += ": "sv;
    head += v;
  };
  for (const auto& [k, v] : reply.headers) add(k, v);
  RequestContext* ctx = request_ ? &request_->ctx() : nullptr;
  if (ctx) {
    add("x-request-id", ctx->request_id);
    if (!reply.reason.empty()) ctx->reason = reply.reason;
    for (auto& f : impl_->filters)
      invoke_filter(impl_->stats, ctx, "on_response_headers", [&] { f->on_response_headers(*ctx); });
    for (const auto& [k, v] : ctx->response_headers) add(k, v);
  }
  add("Content-Length", std::to_string(reply.body.size()));
  add("Connection", must_close ? "close" : "keep-alive");
  head += "\r\n\r\n"sv;
  out_body_.clear();
  if (req_.method() != http::verb::head) out_body_.swap(reply.body);
  if (ctx) {
    request_->response_started();
    ctx->status = reply.status;
    ctx->bytes_sent = out_body_.size();
    if (ctx->timings.ttfb_s < 0) ctx->timings.ttfb_s = since_start();
  }
  // A small body is copied behind the head so the answer goes out in one send(2); a large one
  // is not copied.
  auto written = [this, must_close](beast::error_code ec) { response_written(must_close, ec); };
  if (out_body_.size() <= kCopiedBodyBytes) {
    head += out_body_;
    write_response(net::buffer(out_head_), std::move(written));
  } else {
    write_response(std::array<net::const_buffer, 2>{net::buffer(out_head_), net::buffer(out_body_)}, std::move(written));
  }
}

void ClientConnection::fail(const ApiError& e, bool close) {
  const auto& row = spec(e.failure);
  impl_->stats.local_reply(std::string(row.code));
  if (request_) request_->ctx().reason = e.code;
  if (!row.replies) return this->close();
  LocalReply r;
  r.status = e.status;
  r.body = error_body(e);
  if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(static_cast<long>(std::ceil(e.retry_after_s))));
  if (!e.challenge.empty()) r.headers.emplace_back("WWW-Authenticate", e.challenge);
  send_local(std::move(r), close);
}

void ClientConnection::response_written(bool close_after, beast::error_code ec) {
  // A kept-alive connection holds on to small buffers only: the next answer reuses them.
  if (out_body_.capacity() > kReusedBodyBytes) std::string().swap(out_body_);
  end_request(0, ec ? "client_write_failed" : "");
  if (ec || close_after) return close();
  first_request_ = false;
  if (watching_) {
    // The client-watch wait must finish before the next request is read.
    resume_after_watch_ = true;
    beast::error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  wait_for_request();
}

void ClientConnection::end_request(int status, std::string reason) {
  if (!request_) return;
  auto request = std::move(request_);
  request_.reset();
  request->end(status, std::move(reason), series_);
}

// While the replica works, a wait on the client socket notices a client that hangs up, so its
// upstream request is cancelled and the slot freed without waiting for the answer. The worker's
// tick starts it, so only requests that outlive a tick pay for it; the wait re-arms the socket
// in epoll, which reports a hang-up that came before it too. It waits for readability rather
// than reading: a read would almost always find nothing (one wasted syscall); when the socket
// turns readable, one non-blocking read tells a hang-up from a pipelined request.
void ClientConnection::watch_client() {
  if (watching_) return;
  watching_ = true;
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
    self->watching_ = false;
    if (!ec) {
      auto& socket = self->socket_;
      beast::error_code read_ec;
      socket.non_blocking(true, read_ec);
      // Within the buffer's bound (prepare beyond it throws); a client that has pipelined that
      // much is read again once this answer is out.
      const std::size_t room = std::min<std::size_t>(4096, self->buffer_.max_size() - self->buffer_.size());
      const std::size_t n = read_ec || room == 0 ? 0 : socket.read_some(self->buffer_.prepare(room), read_ec);
      if (!read_ec) {
        self->buffer_.commit(n);  // a pipelined request: keep it for later, stop watching
      } else if (read_ec == net::error::would_block || read_ec == net::error::try_again) {
        if (!self->resume_after_watch_) return self->watch_client();  // woke without data: wait again
      } else {
        ec = read_ec;  // end of stream or reset: the client is gone
      }
    }
    if (ec && !self->resume_after_watch_ && self->request_ && self->request_->awaiting_upstream()) {
      // Counted; the connection closes, and with the request go its queue ticket and its
      // upstream attempt (cancelled).
      return self->fail(Failure::kClientDisconnected, "");
    }
    // Otherwise cancelled on purpose (the response is done and the next request may be read),
    // or the client went away after its answer: the next read finds out.
    if (self->resume_after_watch_) {
      self->resume_after_watch_ = false;
      self->wait_for_request();
    }
  });
}

void ClientConnection::close() {
  idle_ = false;
  if (request_) end_request(request_->ctx().status ? 0 : 499, "client_disconnected");
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  socket_.close(ec);
}

void filter_threw(GatewayStats& stats, const RequestContext* ctx, const char* hook, const char* what) noexcept {
  try {
    stats.filter_error(hook);
    log::error("filter_threw", {{"hook", hook}, {"what", what}, {"request_id", ctx ? ctx->request_id : ""}});
  } catch (...) {  // out of memory while reporting: the count matters less than the loop
  }
}

}  // namespace tidegate::gateway
