// The upstream half of a Session: admission, connect (or reuse), request, and relaying the
// response. Nothing may reach the client before the upstream head is known, so failures
// up to that point can be retried on another replica.
#include <cmath>

#include "session.h"
#include "tidegate/routing/prompt_blocks.h"
#include "upstream_answer.h"

namespace tidegate::gateway {
using namespace std::string_view_literals;
namespace {

// A pooled connection the server already closed reads as EOF without blocking.
bool peer_closed(TcpStream& s) {
  char c;
  const auto n = ::recv(s.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace

std::unique_ptr<TcpStream> ConnPool::take(std::uint64_t serial) {
  auto it = idle_.find(serial);
  if (it == idle_.end()) return nullptr;
  auto& slot = it->second;
  const auto now = coarse_now();
  while (!slot.idle.empty()) {
    auto idle = std::move(slot.idle.back());
    slot.idle.pop_back();
    if (!idle.conn->socket().is_open()) continue;
    const bool trusted = !slot.peek_always && now - idle.since < kTrustIdleFor;
    if (trusted || !peer_closed(*idle.conn)) return std::move(idle.conn);
  }
  return nullptr;
}

void ConnPool::put(const ReplicaPtr& replica, std::unique_ptr<TcpStream> conn) {
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


double Session::upstream_budget_s(double step_s, Clock::time_point now) const {
  const double left = config_->timeouts.total_s - std::chrono::duration<double>(now - start_).count();
  return std::max(0.001, std::min(step_s, left));
}

void Session::proxy() {
  ++gen_;
  awaiting_upstream_ = true;
  pool_ = impl_->upstreams.find(ctx_->model);
  if (!pool_) return fail(Failure::kNoReadyReplica, "no replica is ready for model '" + ctx_->model + "'");
  // The scaler prices demand in prompt tokens; a quarter of the body's bytes is the estimate
  // (English runs ~4 characters a token; JSON quoting adds a little).
  prompt_estimate_ = std::max<std::uint64_t>(1, req_.body().size() / 4);
  pool_->note_arrival(prompt_estimate_);
  route_hint_.reset();
  if (const auto* mc = config_->find_model(ctx_->model)) make_route_hint(*mc);
  std::weak_ptr<Session> weak = shared_from_this();
  auto ex = stream_.get_executor();
  auto pool = pool_;
  auto got = pool_->acquire([weak, ex, pool](ReplicaPtr r) {
    net::post(ex, [weak, pool, r] {
      if (auto self = weak.lock()) self->on_granted(pool, r);
      else if (r) pool->release(r, Outcome::kNeutral);
    });
  }, route_hint_);
  switch (got.status) {
    case ReplicaPool::Status::kGranted:
      return start_attempt(std::move(got.replica), false);
    case ReplicaPool::Status::kNoReplica:
      pool_->note_first_token(-1);  // turned away for want of capacity: an SLO miss
      return fail(Failure::kNoReadyReplica, "no replica is ready for model '" + ctx_->model + "'");
    case ReplicaPool::Status::kQueueFull: {
      pool_->note_first_token(-1);
      auto e = api_error(Failure::kQueueFull, "model '" + ctx_->model + "' is at capacity and its queue is full; retry later");
      e.retry_after_s = 1;
      return fail(e);
    }
    case ReplicaPool::Status::kQueued:
      break;
  }
  // Queued: the grant or the timer, whichever comes first; the pool's cancel() decides.
  ticket_ = got.ticket;
  waiting_in_queue_ = true;
  pool_->note_queued(static_cast<std::int64_t>(prompt_estimate_));
  queued_at_ = Clock::now();
  const auto& mc = *config_->find_model(ctx_->model);
  queue_timer_.emplace(stream_.get_executor());
  queue_timer_->expires_after(secs(mc.queue.max_wait_s));
  queue_timer_->async_wait([self = shared_from_this(), wait = mc.queue.max_wait_s](beast::error_code ec) {
    if (ec || !self->waiting_in_queue_) return;
    if (!self->pool_->cancel(self->ticket_)) return;  // a grant is already on its way
    self->waiting_in_queue_ = false;
    self->pool_->note_queued(-static_cast<std::int64_t>(self->prompt_estimate_));
    self->pool_->note_first_token(-1);
    self->ctx_->timings.queue_s = std::chrono::duration<double>(Clock::now() - self->queued_at_).count();
    self->impl_->stats.queue_wait(self->ctx_->model, self->ctx_->timings.queue_s);
    auto e = api_error(Failure::kQueueTimeout, "request waited " + std::to_string(static_cast<int>(std::lround(wait))) +
                                                   "s in the queue for model '" + self->ctx_->model + "' without a free replica");
    e.retry_after_s = std::max(1.0, wait);
    self->fail(e);
  });
}

// Prefix-aware routing hashes the prompt's bytes as the client sent them (routing/
// prompt_blocks.h); affinity keys on the session header or the OpenAI `user` field. Neither
// costs anything for pools that use neither.
void Session::make_route_hint(const ModelConfig& mc) {
  const bool prefix = mc.balancer == BalancerKind::kPrefixAware;
  std::uint64_t session = 0;
  if (mc.affinity.enabled()) {
    std::string_view key;
    if (!mc.affinity.header.empty()) key = req_.header(mc.affinity.header);
    if (key.empty() && mc.affinity.use_user) key = ctx_->user;
    if (!key.empty()) session = routing::hash_bytes(key, 0x5e55) | 1;  // never 0 (= none)
  }
  std::string_view prompt;
  if (prefix && parsed_ && parsed_->prompt_end > parsed_->prompt_begin) {
    const auto body = parsed_->client_body;
    const auto end = std::min(parsed_->prompt_end, body.size());
    prompt = body.substr(std::min(parsed_->prompt_begin, end), end - std::min(parsed_->prompt_begin, end));
  }
  // A prompt shorter than one block has nothing to match: without a session it is balanced as
  // least_outstanding, and allocates nothing (most small requests).
  if (prompt.size() < mc.prefix.block_bytes && !session) return;
  route_hint_ = std::make_shared<RouteHint>();
  route_hint_->session = session;
  routing::prompt_blocks(prompt, {mc.prefix.block_bytes, mc.prefix.max_prompt_bytes}, route_hint_->blocks);
}

void Session::on_granted(const std::shared_ptr<ReplicaPool>& pool, ReplicaPtr replica) {
  if (!waiting_in_queue_ || !ctx_ || pool != pool_) {  // gave up meanwhile
    if (replica) pool->release(replica, Outcome::kNeutral);
    return;
  }
  waiting_in_queue_ = false;
  pool_->note_queued(-static_cast<std::int64_t>(prompt_estimate_));
  if (queue_timer_) queue_timer_->cancel();
  ctx_->timings.queue_s = std::chrono::duration<double>(Clock::now() - queued_at_).count();
  impl_->stats.queue_wait(ctx_->model, ctx_->timings.queue_s);
  start_attempt(std::move(replica), false);
}

void Session::start_attempt(ReplicaPtr replica, bool fresh_connection) {
  replica_ = std::move(replica);
  ctx_->replica_id = replica_->id;
  if (route_hint_) {
    ctx_->route_reason = route_hint_->reason;
    ctx_->prefix_blocks_matched = route_hint_->matched_blocks;
    if (impl_->placement_sink && (route_hint_->new_blocks || route_hint_->new_pin)) tell_placement();
  }
  ctx_->replica_class = replica_->replica_class;
  tried_.push_back(replica_->serial);
  ++attempts_;
  if (!fresh_connection)  // a stale pooled connection retried is the same try
    for (auto& f : impl_->filters) invoke_filter("on_attempt_start", [&] { f->on_attempt_start(*ctx_); });
  up_buffer_.clear();
  upstream_ = fresh_connection ? nullptr : worker_.conns.take(replica_->serial);
  upstream_reused_ = upstream_ != nullptr;
  if (upstream_) return send_upstream();
  connect(replica_);
}

// The other gateways of a fleet learn where this prompt's prefix and this session now live.
void Session::tell_placement() {
  RoutePlacement p;
  p.model = ctx_->model;
  p.replica_id = replica_->id;
  if (route_hint_->new_blocks) p.blocks = route_hint_->blocks;
  if (route_hint_->new_pin) p.session = route_hint_->session;
  route_hint_->new_blocks = route_hint_->new_pin = false;  // told once (a retry's pick sets them again)
  impl_->placement_sink(std::move(p));
}

void Session::connect(const ReplicaPtr& replica) {
  upstream_ = std::make_unique<TcpStream>(stream_.get_executor());
  // The address comes inline when known (an IP, or a name looked up before); a name's first
  // lookup runs off the loop and the connect continues when it ends.
  resolve_address(replica->host, replica->port, replica->address, stream_.get_executor(),
                  [self = shared_from_this(), g = gen_, replica](beast::error_code ec, Endpoints endpoints) {
    if (g != self->gen_) return;  // the client left; this request is gone
    if (ec) return self->attempt_failed(Failure::kResolveFailed);
    self->upstream_->expires_after(secs(self->upstream_budget_s(self->config_->timeouts.connect_s)));
    self->upstream_->async_connect(*endpoints, [self, g, replica, endpoints](beast::error_code ec, const tcp::endpoint&) {
      if (g != self->gen_) return;
      if (ec) {
        replica->address.forget();  // a name may point elsewhere by the next try; an IP costs nothing to rebuild
        return self->attempt_failed(ec == beast::error::timeout ? Failure::kConnectTimeout : Failure::kConnectFailed);
      }
      self->upstream_->socket().set_option(tcp::no_delay(true), ec);
      self->send_upstream();
    });
  });
}

void Session::send_upstream() {
  const auto body = parsed_->upstream_body();
  up_head_.clear();
  up_head_ += "POST "sv;
  up_head_ += ctx_->path;
  up_head_ += " HTTP/1.1\r\nHost: "sv;
  up_head_ += replica_->host;
  up_head_ += ':';
  up_head_ += std::to_string(replica_->port);
  up_head_ += "\r\nContent-Type: application/json\r\nAccept: "sv;
  up_head_ += ctx_->stream ? "text/event-stream"sv : "application/json"sv;
  up_head_ += "\r\nx-request-id: "sv;
  up_head_ += ctx_->request_id;
  // The replica's own key (the client's Authorization never leaves the gateway).
  const std::string* key = &replica_->api_key;
  if (key->empty())
    if (const auto* mc = config_->find_model(ctx_->model)) key = &mc->replica_api_key;
  if (!key->empty()) {
    up_head_ += "\r\nAuthorization: Bearer "sv;
    up_head_ += *key;
  }
  up_head_ += "\r\nContent-Length: "sv;
  up_head_ += std::to_string(body.size());
  up_head_ += "\r\n\r\n"sv;
  const auto now = Clock::now();
  if (!upstream_started_) {
    upstream_started_ = true;
    upstream_start_ = now;
  }
  up_parser_.emplace();
  up_parser_->body_limit(boost::none);
  // One deadline covers the write and the wait for the first byte.
  arm_upstream_deadline(upstream_budget_s(config_->timeouts.first_byte_s, now));
  // The write and the head read use the raw socket: the tick enforces their deadline, and
  // single buffers let Asio use send(2)/recv(2) instead of sendmsg(2)/recvmsg(2). A small
  // body is copied behind the head for that; a large one is sent from the client's bytes.
  auto written = [self = shared_from_this(), g = gen_](beast::error_code ec, std::size_t) {
    if (g != self->gen_) return;
    if (ec) {
      self->upstream_deadline_ = Clock::time_point::max();
      const bool timed_out = ec == beast::error::timeout || self->upstream_timed_out_;
      return self->attempt_failed(timed_out ? Failure::kWriteTimeout : Failure::kWriteFailed);
    }
    self->interim_heads_ = 0;
    self->read_upstream_head();
  };
  if (body.size() <= kCopiedBodyBytes) {
    up_head_ += body;
    // A request this small nearly always fits the socket's send buffer: sent here, the answer's
    // read starts in this handler instead of behind a queued write completion. What does not
    // fit goes out asynchronously.
    auto& socket = upstream_->socket();
    beast::error_code ec;
    if (!socket.non_blocking()) socket.non_blocking(true, ec);  // write_some must not block the loop
    const std::size_t sent = ec ? 0 : socket.write_some(net::buffer(up_head_), ec);
    if (!ec && sent == up_head_.size()) return written(ec, sent);
    if (ec && ec != net::error::would_block) return written(ec, 0);
    net::async_write(socket, net::buffer(up_head_) + sent, std::move(written));
  } else {
    const std::array<net::const_buffer, 2> bufs{net::buffer(up_head_), net::buffer(body)};
    net::async_write(upstream_->socket(), bufs, std::move(written));
  }
}

void Session::read_upstream_head() {
  http::async_read_header(upstream_->socket(), up_buffer_, *up_parser_, [self = shared_from_this(), g = gen_](beast::error_code ec, std::size_t) {
    if (g != self->gen_) return;
    self->upstream_deadline_ = Clock::time_point::max();
    if (ec && self->upstream_timed_out_) ec = beast::error::timeout;
    self->on_upstream_head(ec);
  });
}

void Session::arm_upstream_deadline(double seconds) {
  upstream_timed_out_ = false;
  upstream_deadline_ = coarse_now() + secs(seconds) + coarse_resolution();
}

void Session::on_upstream_head(beast::error_code ec) {
  if (ec) return attempt_failed(ec == beast::error::timeout ? Failure::kFirstByteTimeout : Failure::kReadFailed);
  const int status = up_parser_->status();
  if (status >= 100 && status < 200 && status != 101 && ++interim_heads_ <= kMaxInterimHeads) {
    // An interim answer (100 Continue, 103 Early Hints) is not the answer: relayed as final, it
    // left the client waiting for a body until its idle timeout. Read on to the real head,
    // within what is left of the first-byte deadline.
    up_parser_.emplace();
    up_parser_->body_limit(boost::none);
    arm_upstream_deadline(upstream_budget_s(config_->timeouts.first_byte_s));
    return read_upstream_head();
  }
  if (status < 200 || status > 599)  // 101 (we asked for no upgrade), endless 1xx, 999: not HTTP we relay
    return attempt_failed(Failure::kBadStatus);
  // 502/503/504 are the replica's whatever their body says; other errors are classified by
  // their body once it is read (upstream_answer.h).
  if (is_replica_status(status) && retry_elsewhere(status)) return;
  const auto ct = up_parser_->content_type();
  if (status == 200 && ct.find("text/event-stream") != std::string_view::npos) {
    served_elsewhere();
    return start_stream();
  }
  up_body_.clear();
  // A declared length over the cap fails before reading anything.
  if (const auto len = up_parser_->content_length(); len && *len > config_->limits.max_upstream_body_bytes)
    return upstream_body_too_large();
  up_parser_->collect_into(&up_body_);
  read_upstream_body();
}

void Session::read_upstream_body() {
  // The bytes that came with the head (usually the whole body) are parsed here: async_read_some
  // would queue its immediate completion behind a poll of the reactor. The parser appends the
  // body to up_body_.
  while (!up_parser_->is_done() && up_buffer_.size() > 0) {
    beast::error_code ec;
    const std::size_t used = up_parser_->put(up_buffer_.data(), ec);
    up_buffer_.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) return attempt_failed(Failure::kBodyReadFailed);
    if (up_body_.size() > config_->limits.max_upstream_body_bytes) return upstream_body_too_large();
    if (used == 0) break;
  }
  if (up_parser_->is_done()) return on_upstream_body({});
  upstream_->expires_after(secs(upstream_budget_s(config_->timeouts.between_chunks_s)));
  http::async_read_some(*upstream_, up_buffer_, *up_parser_, [self = shared_from_this(), g = gen_](beast::error_code ec, std::size_t) {
    if (g != self->gen_) return;
    if (!ec && self->up_body_.size() > self->config_->limits.max_upstream_body_bytes) return self->upstream_body_too_large();
    if (ec) return self->attempt_failed(ec == beast::error::timeout ? Failure::kBodyTimeout : Failure::kBodyReadFailed);
    self->read_upstream_body();
  });
}

// Not the replica's fault as far as health goes (it answered), and not retried: the same
// request would produce the same body.
void Session::upstream_body_too_large() {
  impl_->stats.upstream_error(ctx_->model, std::string(spec(Failure::kUpstreamBodyTooLarge).name));
  drop_upstream();
  release_replica(Outcome::kNeutral);
  up_body_.clear();
  up_body_.shrink_to_fit();
  fail(Failure::kUpstreamBodyTooLarge, "upstream response body is larger than limits.max_upstream_body_bytes (" +
                                          std::to_string(config_->limits.max_upstream_body_bytes) + " bytes)");
}

// Retries a replica-attributed failure on another replica when one can take it right now
// (else the caller relays the answer). True when the retry started.
bool Session::retry_elsewhere(int status) {
  if (attempts_ > config_->max_retries) return false;
  auto next = pool_->try_acquire(tried_, route_hint_.get());
  if (!next) return false;
  impl_->stats.upstream_error(ctx_->model, "status_" + std::to_string(status));
  impl_->stats.retries.Add({{"model", ctx_->model}}).Increment();
  drop_upstream();
  release_replica(Outcome::kFailure);
  start_attempt(std::move(next), false);
  return true;
}

// The replica asked for a second opinion answered the request: the first one's refusal was
// its own trouble.
void Session::served_elsewhere() {
  if (!refused_by_) return;
  impl_->stats.upstream_error(ctx_->model, "refused_served_elsewhere");
  pool_->blame(refused_by_);
  refused_by_.reset();
}

void Session::on_upstream_body(beast::error_code) {
  upstream_end_ = Clock::now();
  const int status = up_parser_->status();
  auto fault = classify_upstream_answer(status, up_body_);
  // (A 502/503/504 was offered to another replica at the head already.)
  if (fault == UpstreamFault::kReplica && !is_replica_status(status) && retry_elsewhere(status)) return;
  if (fault == UpstreamFault::kUnclear) {
    if (refused_by_) {
      fault = UpstreamFault::kRequest;  // two replicas refused it: the request is the cause
    } else if (attempts_ <= config_->max_retries) {
      // One second opinion, never more: a bad request costs at most two engine calls.
      if (auto next = pool_->try_acquire(tried_, route_hint_.get())) {
        impl_->stats.retries.Add({{"model", ctx_->model}}).Increment();
        refused_by_ = replica_;
        drop_upstream();
        release_replica(Outcome::kNeutral);
        return start_attempt(std::move(next), false);
      }
    }
  }
  if (status < 500) served_elsewhere();  // a 4xx is a healthy replica's answer too
  refused_by_.reset();
  summarize_response_body(up_body_, summary_);
  ctx_->prompt_tokens = summary_.prompt_tokens;
  ctx_->cached_prompt_tokens = summary_.cached_prompt_tokens;
  ctx_->completion_tokens = summary_.completion_tokens;
  ctx_->content = std::move(summary_.content);
  ctx_->finish_reason = summary_.finish_reason;
  ctx_->complete = status < 400;
  const bool reusable = up_parser_->keep_alive() && up_buffer_.size() == 0;
  const auto replica = replica_;
  Outcome outcome = Outcome::kSuccess;  // a 4xx is a healthy replica's answer
  if (fault == UpstreamFault::kReplica) {
    impl_->stats.upstream_error(ctx_->model, "status_" + std::to_string(status));
    outcome = Outcome::kFailure;
  } else if (fault == UpstreamFault::kRequest) {
    impl_->stats.upstream_rejected(ctx_->model, status);
    if (status >= 500) outcome = Outcome::kNeutral;
  } else if (fault == UpstreamFault::kUnclear) {
    impl_->stats.upstream_rejected(ctx_->model, status);
    outcome = Outcome::kNeutral;  // no second replica to ask: not held against it; its probe judges it
  }
  release_replica(outcome);
  if (reusable) worker_.conns.put(replica, std::move(upstream_));
  drop_upstream(false);
  LocalReply r;
  r.status = status;
  if (fault != UpstreamFault::kNone) {
    // Engines' error shapes differ (llama.cpp and vLLM put the status in "code" as a number):
    // clients get OpenAI's, whichever engine answered.
    const auto e = normalize_engine_error(status, up_body_);
    r.body = error_body(e);
    r.reason = e.code;
    return send_local(std::move(r));
  }
  if (const auto ct = up_parser_->content_type(); !ct.empty()) r.content_type.assign(ct);  // default: application/json
  // The answer moves into the reply and the previous answer's buffer, already written, becomes
  // the next upstream body's: a connection's answers cycle through two buffers.
  r.body.swap(up_body_);
  up_body_.swap(out_body_);
  send_local(std::move(r));
}

void Session::attempt_failed(Failure failure) {
  if (!ctx_) {  // the request already ended (client gone)
    drop_upstream();
    return release_replica(Outcome::kNeutral);
  }
  // Each step's deadline is cut short by what is left of the total budget: when that is what
  // ran out, the total is to blame, not the step, and no other replica has time left either.
  if (spec(failure).deadline && since_start() >= config_->timeouts.total_s - 0.01) failure = Failure::kTotalTimeout;
  const FailureSpec& row = spec(failure);
  // A kept-alive connection the replica had closed shows as a failed write or read before any
  // response: not an upstream error (healthy replicas do it), and not a new try; the same
  // replica on a fresh connection.
  const bool stale_reuse = upstream_reused_ && (failure == Failure::kWriteFailed || failure == Failure::kReadFailed);
  drop_upstream();
  if (stale_reuse && replica_) {
    worker_.conns.distrust(replica_->serial);
    auto r = replica_;
    upstream_reused_ = false;
    --attempts_;
    return start_attempt(std::move(r), true);
  }
  const std::string name(row.name);
  impl_->stats.upstream_error(ctx_->model, name);
  release_replica(Outcome::kFailure);
  if (row.retryable && !response_started_ && attempts_ <= config_->max_retries) {
    if (auto next = pool_->try_acquire(tried_, route_hint_.get())) {
      impl_->stats.retries.Add({{"model", ctx_->model}}).Increment();
      return start_attempt(std::move(next), false);
    }
  }
  if (response_started_) {  // the head went out: the stream ends with an error event naming the step
    ApiError e = api_error(failure, (row.status == 504 ? "upstream stopped sending (" : "upstream failed mid-response (") + name + ")");
    e.code = name;
    return end_stream_with_error(e);
  }
  if (row.status == 504) return fail(failure, "upstream timed out (" + name + ")");
  if (row.status == 503) return fail(failure, "no replica of model '" + ctx_->model + "' is reachable (" + name + ")");
  fail(failure, "upstream failed (" + name + ")");
}

// While the replica works, a wait on the client socket notices a client that hangs up, so its
// upstream request is cancelled and the slot freed without waiting for the answer. The worker's
// tick starts it, so only requests that outlive a tick pay for it; the wait re-arms the socket
// in epoll, which reports a hang-up that came before it too. It waits for readability rather
// than reading: a read would almost always find nothing (one wasted syscall); when the socket
// turns readable, one non-blocking read tells a hang-up from a pipelined request.
void Session::watch_client() {
  if (watching_) return;
  watching_ = true;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
    self->watching_ = false;
    if (!ec) {
      auto& socket = self->stream_.socket();
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
    if (ec && !self->resume_after_watch_ && self->ctx_ && self->awaiting_upstream_) {
      ++self->gen_;  // orphan the upstream handlers still in flight
      if (self->waiting_in_queue_) {
        self->waiting_in_queue_ = false;
        self->pool_->cancel(self->ticket_);
      }
      return self->fail(Failure::kClientDisconnected, "");  // counted; the connection closes
    }
    // Otherwise cancelled on purpose (the response is done and the next request may be read),
    // or the client went away after its answer: the next read finds out.
    if (self->resume_after_watch_) {
      self->resume_after_watch_ = false;
      self->wait_for_request();
    }
  });
}

void Session::release_replica(Outcome outcome) {
  if (!replica_) return;
  auto r = std::move(replica_);
  replica_.reset();
  if (ctx_) {
    if (summary_.prompt_tokens >= 0) ctx_->prompt_tokens = summary_.prompt_tokens;
    if (summary_.cached_prompt_tokens >= 0) ctx_->cached_prompt_tokens = summary_.cached_prompt_tokens;
    if (summary_.completion_tokens >= 0) ctx_->completion_tokens = summary_.completion_tokens;
    for (auto& f : impl_->filters) invoke_filter("on_attempt_end", [&] { f->on_attempt_end(*ctx_, outcome == Outcome::kSuccess); });
  }
  if (pool_) pool_->release(r, outcome);
  else if (auto pool = impl_->upstreams.find(ctx_ ? ctx_->model : "")) pool->release(r, outcome);
}

void Session::drop_upstream(bool stamp_end) {
  upstream_deadline_ = Clock::time_point::max();
  if (stamp_end && (upstream_reused_ || upstream_)) {
    if (upstream_started_) upstream_end_ = Clock::now();
  }
  if (!upstream_) return;
  beast::error_code ec;
  upstream_->socket().shutdown(tcp::socket::shutdown_both, ec);
  upstream_->close();
  upstream_.reset();
}

}  // namespace tidegate::gateway
