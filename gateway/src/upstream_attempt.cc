// An upstream attempt's steps: a pooled connection or a connect, the request, the response
// head (interim 1xx answers skipped), then the body whole or streamed read by read. Every step
// is on the plain socket with its deadline armed just before it; the worker's tick enforces it.
#include "upstream_attempt.h"

#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include <algorithm>

namespace tidegate::gateway {
namespace http = beast::http;
namespace {

// A pooled connection the server already closed reads as EOF without blocking.
bool peer_closed(Socket& s) {
  char c;
  const auto n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace

std::unique_ptr<Socket> ConnPool::take(std::uint64_t serial) {
  auto it = idle_.find(serial);
  if (it == idle_.end()) return nullptr;
  auto& slot = it->second;
  const auto now = coarse_now();
  while (!slot.idle.empty()) {
    auto idle = std::move(slot.idle.back());
    slot.idle.pop_back();
    if (!idle.conn->is_open()) continue;
    const bool trusted = !slot.peek_always && now - idle.since < kTrustIdleFor;
    if (trusted || !peer_closed(*idle.conn)) return std::move(idle.conn);
  }
  return nullptr;
}

void ConnPool::put(const ReplicaPtr& replica, std::unique_ptr<Socket> conn) {
  auto& slot = idle_[replica->serial];
  slot.replica = replica;
  if (slot.idle.size() < kMaxIdlePerReplica) slot.idle.push_back({coarse_now(), std::move(conn)});
}

void ConnPool::prune(std::chrono::steady_clock::time_point now) {
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& slot = it->second;
    if (slot.replica.expired()) {
      it = idle_.erase(it);
      continue;
    }
    std::erase_if(slot.idle, [now](const Idle& i) { return now - i.since > kMaxIdle; });
    // An empty slot is kept only for its peek flag (a replica that closes connections early).
    if (slot.idle.empty() && !slot.peek_always) it = idle_.erase(it);
    else ++it;
  }
}

UpstreamAttempt::UpstreamAttempt(Worker& worker, ReplicaPtr replica, AttemptOwner& owner, std::weak_ptr<void> anchor,
                                 AttemptLimits limits)
    : worker_(worker),
      replica_(std::move(replica)),
      owner_(&owner),
      anchor_(std::move(anchor)),
      limits_(limits),
      buffers_(worker.attempt_buffers.take()) {}

UpstreamAttempt::~UpstreamAttempt() {
  close_socket();
  worker_.attempt_buffers.give_back(std::move(buffers_));
}

void UpstreamAttempt::cancel() {
  owner_ = nullptr;
  deadline_.disarm();
  close_socket();
}

// Closed, not destroyed: an operation in flight still refers to the socket object until its
// completion has run (Asio's range connect looks at it then), and that completion holds the
// attempt, so the socket goes with the attempt.
void UpstreamAttempt::close_socket() {
  if (!socket_ || !socket_->is_open()) return;
  beast::error_code ignored;
  socket_->shutdown(tcp::socket::shutdown_both, ignored);
  socket_->close(ignored);
}

void UpstreamAttempt::on_tick(Clock::time_point now) {
  if (!socket_ || !socket_->is_open() || !deadline_.expired(now)) return;
  beast::error_code ignored;
  socket_->close(ignored);  // the pending step completes with an error, read as a timeout
}

void UpstreamAttempt::arm(double step_s) {
  const double left = std::chrono::duration<double>(limits_.total_deadline - coarse_now()).count();
  deadline_.arm(std::max(0.001, std::min(step_s, left)));
}

void UpstreamAttempt::fail(Failure f) {
  deadline_.disarm();
  failure_ = f;
  close_socket();
  if (auto* owner = std::exchange(owner_, nullptr)) owner->on_attempt_failed(*this, f);
}

void UpstreamAttempt::start(std::string_view body, bool fresh_connection) {
  body_out_ = body;
  if (!fresh_connection) socket_ = worker_.conns.take(replica_->serial);
  reused_ = socket_ != nullptr;
  if (reused_) return send();
  connect();
}

void UpstreamAttempt::connect() {
  // The address comes inline when known (an IP, or a name looked up before); a name's first
  // lookup runs off the loop and the connect continues when it ends.
  resolve_address(replica_->host, replica_->port, replica_->address, worker_.ioc.get_executor(),
                  [self = shared_from_this(), anchor = anchor_.lock()](beast::error_code ec, Endpoints endpoints) {
    if (!self->owner_) return;  // cancelled meanwhile
    if (ec || !endpoints || endpoints->empty()) return self->fail(Failure::kResolveFailed);
    self->socket_ = std::make_unique<Socket>(self->worker_.ioc);
    // Every address of the name in turn, under one deadline: once it fired or the attempt was
    // cancelled (either closed the socket), the rest are skipped rather than tried on a socket
    // Asio would reopen.
    self->arm(self->limits_.connect_s);
    net::async_connect(*self->socket_, *endpoints,
                       [self](beast::error_code, const tcp::endpoint&) { return self->owner_ && !self->deadline_.fired(); },
                       [self, anchor, endpoints](beast::error_code ec, const tcp::endpoint&) {
      if (!self->owner_) return;
      if (ec) {
        self->replica_->address.forget();  // a name may point elsewhere by the next try; an IP costs nothing to rebuild
        return self->fail(self->deadline_.fired() ? Failure::kConnectTimeout : Failure::kConnectFailed);
      }
      self->socket_->set_option(tcp::no_delay(true), ec);
      self->send();
    });
  });
}

void UpstreamAttempt::send() {
  parser_.emplace();
  parser_->body_limit(boost::none);
  // One deadline covers the write and the wait for the first byte.
  arm(limits_.first_byte_s);
  // Single buffers let Asio use send(2)/recv(2) instead of sendmsg(2)/recvmsg(2). A small body
  // is copied behind the head for that; a large one is sent from the client's bytes.
  auto written = [self = shared_from_this(), anchor = anchor_.lock()](beast::error_code ec, std::size_t) {
    if (!self->owner_) return;
    if (ec) return self->fail(self->deadline_.fired() ? Failure::kWriteTimeout : Failure::kWriteFailed);
    self->interim_heads_ = 0;
    self->read_head();
  };
  auto& head = buffers_->head;
  if (body_out_.size() <= kCopiedBodyBytes) {
    head += body_out_;
    // A request this small nearly always fits the socket's send buffer: sent here, the answer's
    // read starts in this handler instead of behind a queued write completion. What does not
    // fit goes out asynchronously.
    beast::error_code ec;
    if (!socket_->non_blocking()) socket_->non_blocking(true, ec);  // write_some must not block the loop
    const std::size_t sent = ec ? 0 : socket_->write_some(net::buffer(head), ec);
    if (!ec && sent == head.size()) return written(ec, sent);
    if (ec && ec != net::error::would_block) return written(ec, 0);
    net::async_write(*socket_, net::buffer(head) + sent, std::move(written));
  } else {
    const std::array<net::const_buffer, 2> bufs{net::buffer(head), net::buffer(body_out_)};
    net::async_write(*socket_, bufs, std::move(written));
  }
}

void UpstreamAttempt::read_head() {
  http::async_read_header(*socket_, buffers_->in, *parser_, [self = shared_from_this(), anchor = anchor_.lock()](
                                                                 beast::error_code ec, std::size_t) {
    if (!self->owner_) return;
    self->deadline_.disarm();
    self->on_head(self->deadline_.mapped(ec));
  });
}

void UpstreamAttempt::on_head(beast::error_code ec) {
  if (ec) return fail(ec == beast::error::timeout ? Failure::kFirstByteTimeout : Failure::kReadFailed);
  const int status = parser_->status();
  if (status >= 100 && status < 200 && status != 101 && ++interim_heads_ <= kMaxInterimHeads) {
    // An interim answer (100 Continue, 103 Early Hints) is not the answer: relayed as final, it
    // left the client waiting for a body until its idle timeout. Read on to the real head,
    // within what is left of the first-byte deadline.
    parser_.emplace();
    parser_->body_limit(boost::none);
    arm(limits_.first_byte_s);
    return read_head();
  }
  if (status < 200 || status > 599)  // 101 (we asked for no upgrade), endless 1xx, 999: not HTTP we relay
    return fail(Failure::kBadStatus);
  owner_->on_attempt_head(*this);
}

void UpstreamAttempt::read_body() {
  auto& body = buffers_->body;
  // A declared length over the cap fails before reading anything.
  if (const auto len = parser_->content_length(); len && *len > limits_.max_body_bytes)
    return fail(Failure::kUpstreamBodyTooLarge);
  parser_->collect_into(&body);
  // The bytes that came with the head (usually the whole body) are parsed here: async_read_some
  // would queue its immediate completion behind a poll of the reactor.
  auto& in = buffers_->in;
  while (!parser_->is_done() && in.size() > 0) {
    beast::error_code ec;
    const std::size_t used = parser_->put(in.data(), ec);
    in.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) return fail(Failure::kBodyReadFailed);
    if (body.size() > limits_.max_body_bytes) return fail(Failure::kUpstreamBodyTooLarge);
    if (used == 0) break;
  }
  if (parser_->is_done()) {
    deadline_.disarm();
    return owner_->on_attempt_body(*this);
  }
  arm(limits_.between_chunks_s);
  http::async_read_some(*socket_, in, *parser_, [self = shared_from_this(), anchor = anchor_.lock()](beast::error_code ec, std::size_t) {
    if (!self->owner_) return;
    ec = self->deadline_.mapped(ec);
    if (!ec && self->buffers_->body.size() > self->limits_.max_body_bytes) return self->fail(Failure::kUpstreamBodyTooLarge);
    if (ec) return self->fail(ec == beast::error::timeout ? Failure::kBodyTimeout : Failure::kBodyReadFailed);
    self->read_body();
  });
}

void UpstreamAttempt::read_stream() {
  if (parser_->is_done()) return owner_->on_attempt_stream(*this, {});
  parser_->body().data = buffers_->chunk.data();
  parser_->body().size = buffers_->chunk.size();
  arm(limits_.between_chunks_s);
  http::async_read_some(*socket_, buffers_->in, *parser_, [self = shared_from_this(), anchor = anchor_.lock()](
                                                              beast::error_code ec, std::size_t) {
    if (!self->owner_) return;
    self->deadline_.disarm();
    ec = self->deadline_.mapped(ec);
    if (ec == http::error::need_buffer) ec = {};
    self->owner_->on_attempt_stream(*self, ec);
  });
}

bool UpstreamAttempt::parse_buffered(beast::error_code& ec) {
  auto& in = buffers_->in;
  if (parser_->is_done() || in.size() == 0) return false;
  parser_->body().data = buffers_->chunk.data();
  parser_->body().size = buffers_->chunk.size();
  const auto used = parser_->put(in.data(), ec);
  in.consume(used);
  if (ec == http::error::need_buffer) ec = {};
  if (ec == http::error::need_more) {
    ec = {};
    return false;
  }
  return used != 0 || ec;
}

std::string_view UpstreamAttempt::take_chunk() {
  auto& b = parser_->body();
  if (!b.data) return {};
  const auto got = buffers_->chunk.size() - b.size;
  b.size = buffers_->chunk.size();  // consumed
  b.data = buffers_->chunk.data();
  return {buffers_->chunk.data(), got};
}

void UpstreamAttempt::finish() {
  deadline_.disarm();
  owner_ = nullptr;
  const bool reusable = socket_ && socket_->is_open() && parser_ && parser_->keep_alive() && buffers_->in.size() == 0;
  if (reusable) {
    worker_.conns.put(replica_, std::move(socket_));
  }
  close_socket();
}

}  // namespace tidegate::gateway
