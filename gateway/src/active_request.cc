// An inference request's admission, routing and retries: the filters, the pool's queue, one
// upstream attempt after another, and the non-streamed answer. Nothing may reach the client
// before an attempt's response head is known, so failures up to that point can be retried on
// another replica.
#include "active_request.h"

#include <cmath>

#include "tidegate/routing/prompt_blocks.h"
#include "upstream_answer.h"

namespace tidegate::gateway {
using namespace std::string_view_literals;

ActiveRequest::ActiveRequest(ClientConnection& conn, std::shared_ptr<RequestContext> ctx)
    : conn_(conn), worker_(conn.worker()), config_(conn.config()), start_(ctx->start), ctx_(std::move(ctx)) {}

ActiveRequest::~ActiveRequest() { abandon(); }

void ActiveRequest::abandon() {
  ended_ = true;
  attempt_.reset();
  if (waiting_in_queue_ && pool_) {
    waiting_in_queue_ = false;
    pool_->cancel(ticket_);
    pool_->note_queued(-static_cast<std::int64_t>(prompt_estimate_));
  }
  if (replica_) release_replica(Outcome::kNeutral);
}

void ActiveRequest::start(Endpoint endpoint) {
  const auto& req = conn_.request();
  parsed_.emplace();
  if (auto err = parse_request(endpoint, req.body(), *parsed_, impl().parse_request_body)) return conn_.fail(*err);
  auto& ctx = *ctx_;
  ctx.model = parsed_->model;
  ctx.stream = parsed_->stream;
  ctx.client_wants_usage = parsed_->client_wants_usage;
  ctx.max_tokens = parsed_->max_tokens;
  ctx.temperature = parsed_->temperature;
  ctx.n = parsed_->n;
  ctx.user = parsed_->user;
  ctx.body = std::move(parsed_->json);
  if (!config_->find_model(parsed_->model)) {
    // The name is the client's: it goes into no metric label (one bucket for every unknown
    // name, so nobody can mint series) and only a bounded prefix of it into the answer.
    constexpr std::size_t kShown = 128;
    const std::string shown = parsed_->model.size() > kShown ? parsed_->model.substr(0, kShown) + "..." : parsed_->model;
    ctx.model = kUnknownModel;
    return conn_.fail(api_error(Failure::kModelNotFound, "the model '" + shown + "' does not exist", "model"));
  }
  run_filters(0);
}

namespace {

// One filter's pre_forward call. `done` may come inside pre_forward (most filters) or later
// from any thread (a cache lookup); whichever of the two ends second continues the request.
struct FilterCall {
  static constexpr int kInside = 0, kReturned = 1, kAnsweredInside = 2;
  explicit FilterCall(std::size_t i) : index(i) {}
  const std::size_t index;
  std::atomic<bool> answered{false};  // done was called (a second call is a filter bug)
  std::atomic<int> phase{kInside};
  std::optional<LocalReply> reply;
};

}  // namespace

void ActiveRequest::run_filters(std::size_t index) {
  auto& before = impl().before_forward;
  for (; index < before.size(); ++index) {
    auto call = std::make_shared<FilterCall>(index);
    const bool returned = invoke_filter("pre_forward", [&] { before[index]->pre_forward(
        ctx_, [anchors = anchors(), ex = worker_.ioc.get_executor(), call](std::optional<LocalReply> r) {
          if (call->answered.exchange(true)) return;
          call->reply = std::move(r);
          int inside = FilterCall::kInside;
          if (call->phase.compare_exchange_strong(inside, FilterCall::kAnsweredInside)) return;  // the loop goes on
          // Answered after pre_forward returned, perhaps on another thread: resume on the loop.
          net::post(ex, [anchors, call] {
            auto& self = anchors.first;
            if (self->ended_) return;  // the client left meanwhile
            if (!call->reply) return self->run_filters(call->index + 1);
            self->answer_from_filter(std::move(*call->reply));
          });
        }); });
    // Threw before answering: a 500, and a later done() from it is ignored. Threw after
    // answering: the answer stands.
    if (!returned && !call->answered.exchange(true)) return conn_.fail(Failure::kFilterFailed, "a request filter failed");
    int inside = FilterCall::kInside;
    if (call->phase.compare_exchange_strong(inside, FilterCall::kReturned)) return;  // done comes later
    // Answered inside pre_forward: go on here, without a trip through the loop's queue.
    if (call->reply) return answer_from_filter(std::move(*call->reply));
  }
  proxy();
}

void ActiveRequest::answer_from_filter(LocalReply reply) {
  ctx_->local_reply = true;
  impl().stats.local_reply(reply.reason.empty() ? "filter" : reply.reason);
  conn_.send_local(std::move(reply));
}

void ActiveRequest::proxy() {
  pool_ = impl().upstreams.find(ctx_->model);
  const auto* model = config_->find_model(ctx_->model);
  if (!pool_ || !model) return conn_.fail(Failure::kNoReadyReplica, "no replica is ready for model '" + ctx_->model + "'");
  // The scaler prices demand in prompt tokens; a quarter of the body's bytes is the estimate
  // (English runs ~4 characters a token; JSON quoting adds a little).
  prompt_estimate_ = std::max<std::uint64_t>(1, conn_.request().body().size() / 4);
  pool_->note_arrival(prompt_estimate_);
  const auto& mc = *model;
  make_route_hint(mc);
  std::weak_ptr<ActiveRequest> weak = shared_from_this();
  auto ex = worker_.ioc.get_executor();
  auto pool = pool_;
  auto got = pool_->acquire([weak, ex, pool](ReplicaPtr r) {
    net::post(ex, [weak, pool, r] {
      auto self = weak.lock();
      if (self && !self->ended_) self->on_granted(pool, r);
      else if (r) pool->release(r, Outcome::kNeutral);
    });
  }, route_hint_);
  switch (got.status) {
    case ReplicaPool::Status::kGranted:
      return start_attempt(std::move(got.replica), false);
    case ReplicaPool::Status::kNoReplica:
      pool_->note_first_token(-1);  // turned away for want of capacity: an SLO miss
      return conn_.fail(Failure::kNoReadyReplica, "no replica is ready for model '" + ctx_->model + "'");
    case ReplicaPool::Status::kQueueFull: {
      pool_->note_first_token(-1);
      auto e = api_error(Failure::kQueueFull, "model '" + ctx_->model + "' is at capacity and its queue is full; retry later");
      e.retry_after_s = 1;
      return conn_.fail(e);
    }
    case ReplicaPool::Status::kQueued:
      break;
  }
  // Queued: the grant or the queue's deadline (the tick), whichever comes first; the pool's
  // cancel() decides.
  ticket_ = got.ticket;
  waiting_in_queue_ = true;
  pool_->note_queued(static_cast<std::int64_t>(prompt_estimate_));
  queued_at_ = Clock::now();
  queue_max_wait_s_ = mc.queue.max_wait_s;
  queue_deadline_ = coarse_now() + secs(queue_max_wait_s_) + coarse_resolution();
  conn_.watch_client();
}

void ActiveRequest::on_tick(Clock::time_point now) {
  if (attempt_) return attempt_->on_tick(now);
  if (waiting_in_queue_ && now >= queue_deadline_) {
    auto self = shared_from_this();  // the answer may end the request
    on_queue_timeout();
  }
}

void ActiveRequest::on_queue_timeout() {
  const double wait = queue_max_wait_s_;
  if (!pool_->cancel(ticket_)) return;  // a grant is already on its way
  waiting_in_queue_ = false;
  pool_->note_queued(-static_cast<std::int64_t>(prompt_estimate_));
  pool_->note_first_token(-1);
  ctx_->timings.queue_s = std::chrono::duration<double>(Clock::now() - queued_at_).count();
  impl().stats.queue_wait(ctx_->model, ctx_->timings.queue_s);
  auto e = api_error(Failure::kQueueTimeout, "request waited " + std::to_string(static_cast<int>(std::lround(wait))) +
                                                 "s in the queue for model '" + ctx_->model + "' without a free replica");
  e.retry_after_s = std::max(1.0, wait);
  conn_.fail(e);
}

// Prefix-aware routing hashes the prompt's bytes as the client sent them (routing/
// prompt_blocks.h); affinity keys on the session header or the OpenAI `user` field. Neither
// costs anything for pools that use neither.
void ActiveRequest::make_route_hint(const ModelConfig& mc) {
  const bool prefix = mc.balancer == BalancerKind::kPrefixAware;
  std::uint64_t session = 0;
  if (mc.affinity.enabled()) {
    std::string_view key;
    if (!mc.affinity.header.empty()) key = conn_.request().header(mc.affinity.header);
    if (key.empty() && mc.affinity.use_user) key = ctx_->user;
    if (!key.empty()) session = routing::hash_bytes(key, 0x5e55) | 1;  // never 0 (= none)
  }
  std::string_view prompt;
  if (prefix && parsed_->prompt_end > parsed_->prompt_begin) {
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

void ActiveRequest::on_granted(const std::shared_ptr<ReplicaPool>& pool, ReplicaPtr replica) {
  if (!waiting_in_queue_ || pool != pool_) {  // gave up meanwhile
    if (replica) pool->release(replica, Outcome::kNeutral);
    return;
  }
  waiting_in_queue_ = false;
  pool_->note_queued(-static_cast<std::int64_t>(prompt_estimate_));
  ctx_->timings.queue_s = std::chrono::duration<double>(Clock::now() - queued_at_).count();
  impl().stats.queue_wait(ctx_->model, ctx_->timings.queue_s);
  start_attempt(std::move(replica), false);
}

void ActiveRequest::start_attempt(ReplicaPtr replica, bool fresh_connection) {
  replica_ = std::move(replica);
  ctx_->replica_id = replica_->id;
  if (route_hint_) {
    ctx_->route_reason = route_hint_->reason;
    ctx_->prefix_blocks_matched = route_hint_->matched_blocks;
    if (impl().placement_sink && (route_hint_->new_blocks || route_hint_->new_pin)) tell_placement();
  }
  ctx_->replica_class = replica_->replica_class;
  tried_.push_back(replica_->serial);
  ++attempts_;
  if (!fresh_connection)  // a stale pooled connection retried is the same try
    for (auto& f : impl().filters) invoke_filter("on_attempt_start", [&] { f->on_attempt_start(*ctx_); });
  const auto& t = config_->timeouts;
  AttemptLimits limits{start_ + secs(t.total_s), t.connect_s, t.first_byte_s, t.between_chunks_s,
                       config_->limits.max_upstream_body_bytes};
  auto attempt = std::make_shared<UpstreamAttempt>(worker_, replica_, *this, conn_.weak_from_this(), limits);
  const auto body = parsed_->upstream_body();
  format_upstream_head(attempt->head(), body);
  if (!upstream_started_) {
    upstream_started_ = true;
    upstream_start_ = Clock::now();
  }
  attempt_ = AttemptHandle(attempt);
  attempt->start(body, fresh_connection);
}

void ActiveRequest::format_upstream_head(std::string& head, std::string_view body) const {
  head += "POST "sv;
  head += ctx_->path;
  head += " HTTP/1.1\r\nHost: "sv;
  head += replica_->host;
  head += ':';
  head += std::to_string(replica_->port);
  head += "\r\nContent-Type: application/json\r\nAccept: "sv;
  head += ctx_->stream ? "text/event-stream"sv : "application/json"sv;
  head += "\r\nx-request-id: "sv;
  head += ctx_->request_id;
  // The replica's own key (the client's Authorization never leaves the gateway).
  const std::string* key = &replica_->api_key;
  if (key->empty())
    if (const auto* mc = config_->find_model(ctx_->model)) key = &mc->replica_api_key;
  if (!key->empty()) {
    head += "\r\nAuthorization: Bearer "sv;
    head += *key;
  }
  head += "\r\nContent-Length: "sv;
  head += std::to_string(body.size());
  head += "\r\n\r\n"sv;
}

// The other gateways of a fleet learn where this prompt's prefix and this session now live.
void ActiveRequest::tell_placement() {
  RoutePlacement p;
  p.model = ctx_->model;
  p.replica_id = replica_->id;
  if (route_hint_->new_blocks) p.blocks = route_hint_->blocks;
  if (route_hint_->new_pin) p.session = route_hint_->session;
  route_hint_->new_blocks = route_hint_->new_pin = false;  // told once (a retry's pick sets them again)
  impl().placement_sink(std::move(p));
}

void ActiveRequest::on_attempt_head(UpstreamAttempt& a) {
  auto self = shared_from_this();  // an answer below may end the request
  const int status = a.parser().status();
  // 502/503/504 are the replica's whatever their body says; other errors are classified by
  // their body once it is read (upstream_answer.h).
  if (is_replica_status(status) && retry_elsewhere(status)) return;
  const auto ct = a.parser().content_type();
  if (status == 200 && ct.find("text/event-stream") != std::string_view::npos) {
    served_elsewhere();
    return start_stream();
  }
  a.read_body();
}

// Not the replica's fault as far as health goes (it answered), and not retried: the same
// request would produce the same body.
void ActiveRequest::body_too_large() {
  impl().stats.upstream_error(ctx_->model, std::string(spec(Failure::kUpstreamBodyTooLarge).name));
  drop_attempt();
  release_replica(Outcome::kNeutral);
  conn_.fail(Failure::kUpstreamBodyTooLarge, "upstream response body is larger than limits.max_upstream_body_bytes (" +
                                                 std::to_string(config_->limits.max_upstream_body_bytes) + " bytes)");
}

bool ActiveRequest::retry_elsewhere(int status) {
  if (attempts_ > config_->max_retries) return false;
  auto next = pool_->try_acquire(tried(), route_hint_.get());
  if (!next) return false;
  impl().stats.upstream_error(ctx_->model, "status_" + std::to_string(status));
  impl().stats.retries.Add({{"model", ctx_->model}}).Increment();
  drop_attempt();
  release_replica(Outcome::kFailure);
  start_attempt(std::move(next), false);
  return true;
}

// The replica asked for a second opinion answered the request: the first one's refusal was
// its own trouble.
void ActiveRequest::served_elsewhere() {
  if (!refused_by_) return;
  impl().stats.upstream_error(ctx_->model, "refused_served_elsewhere");
  pool_->blame(refused_by_);
  refused_by_.reset();
}

void ActiveRequest::on_attempt_body(UpstreamAttempt& a) {
  auto self = shared_from_this();
  upstream_end_ = Clock::now();
  const int status = a.parser().status();
  auto& body = a.body();
  auto fault = classify_upstream_answer(status, body);
  // (A 502/503/504 was offered to another replica at the head already.)
  if (fault == UpstreamFault::kReplica && !is_replica_status(status) && retry_elsewhere(status)) return;
  if (fault == UpstreamFault::kUnclear) {
    if (refused_by_) {
      fault = UpstreamFault::kRequest;  // two replicas refused it: the request is the cause
    } else if (attempts_ <= config_->max_retries) {
      // One second opinion, never more: a bad request costs at most two engine calls.
      if (auto next = pool_->try_acquire(tried(), route_hint_.get())) {
        impl().stats.retries.Add({{"model", ctx_->model}}).Increment();
        refused_by_ = replica_;
        drop_attempt();
        release_replica(Outcome::kNeutral);
        return start_attempt(std::move(next), false);
      }
    }
  }
  if (status < 500) served_elsewhere();  // a 4xx is a healthy replica's answer too
  refused_by_.reset();
  summarize_response_body(body, summary_);
  ctx_->prompt_tokens = summary_.prompt_tokens;
  ctx_->cached_prompt_tokens = summary_.cached_prompt_tokens;
  ctx_->completion_tokens = summary_.completion_tokens;
  ctx_->content = std::move(summary_.content);
  ctx_->finish_reason = summary_.finish_reason;
  ctx_->complete = status < 400;
  Outcome outcome = Outcome::kSuccess;  // a 4xx is a healthy replica's answer
  if (fault == UpstreamFault::kReplica) {
    impl().stats.upstream_error(ctx_->model, "status_" + std::to_string(status));
    outcome = Outcome::kFailure;
  } else if (fault == UpstreamFault::kRequest) {
    impl().stats.upstream_rejected(ctx_->model, status);
    if (status >= 500) outcome = Outcome::kNeutral;
  } else if (fault == UpstreamFault::kUnclear) {
    impl().stats.upstream_rejected(ctx_->model, status);
    outcome = Outcome::kNeutral;  // no second replica to ask: not held against it; its probe judges it
  }
  release_replica(outcome);
  LocalReply r;
  r.status = status;
  if (fault != UpstreamFault::kNone) {
    // Engines' error shapes differ (llama.cpp and vLLM put the status in "code" as a number):
    // clients get OpenAI's, whichever engine answered.
    const auto e = normalize_engine_error(status, body);
    r.body = error_body(e);
    r.reason = e.code;
  } else {
    if (const auto ct = a.parser().content_type(); !ct.empty()) r.content_type.assign(ct);  // default: application/json
    // The answer moves into the reply and the previous answer's buffer, already written, goes
    // back with the attempt's: a connection's answers cycle through two buffers.
    r.body.swap(body);
    body.swap(conn_.out_body());
  }
  a.finish();  // the connection goes back to the pool when the replica keeps it open
  drop_attempt(false);
  conn_.send_local(std::move(r));
}

void ActiveRequest::on_attempt_failed(UpstreamAttempt& a, Failure failure) {
  auto self = shared_from_this();
  if (failure == Failure::kUpstreamBodyTooLarge) return body_too_large();
  attempt_failed(failure, a.reused());
}

void ActiveRequest::attempt_failed(Failure failure, bool reused) {
  // Each step's deadline is cut short by what is left of the total budget: when that is what
  // ran out, the total is to blame, not the step, and no other replica has time left either.
  const double since_start = std::chrono::duration<double>(Clock::now() - start_).count();
  if (spec(failure).deadline && since_start >= config_->timeouts.total_s - 0.01) failure = Failure::kTotalTimeout;
  const FailureSpec& row = spec(failure);
  // A kept-alive connection the replica had closed shows as a failed write or read before any
  // response: not an upstream error (healthy replicas do it), and not a new try; the same
  // replica on a fresh connection.
  const bool stale_reuse = reused && (failure == Failure::kWriteFailed || failure == Failure::kReadFailed);
  drop_attempt();
  if (stale_reuse && replica_) {
    worker_.conns.distrust(replica_->serial);
    auto r = replica_;
    --attempts_;
    return start_attempt(std::move(r), true);
  }
  const std::string name(row.name);
  impl().stats.upstream_error(ctx_->model, name);
  release_replica(Outcome::kFailure);
  if (row.retryable && !response_started_ && attempts_ <= config_->max_retries) {
    if (auto next = pool_->try_acquire(tried(), route_hint_.get())) {
      impl().stats.retries.Add({{"model", ctx_->model}}).Increment();
      return start_attempt(std::move(next), false);
    }
  }
  if (response_started_) {  // the head went out: the stream ends with an error event naming the step
    ApiError e = api_error(failure, (row.status == 504 ? "upstream stopped sending (" : "upstream failed mid-response (") + name + ")");
    e.code = name;
    return end_stream_with_error(e);
  }
  if (row.status == 504) return conn_.fail(failure, "upstream timed out (" + name + ")");
  if (row.status == 503) return conn_.fail(failure, "no replica of model '" + ctx_->model + "' is reachable (" + name + ")");
  conn_.fail(failure, "upstream failed (" + name + ")");
}

void ActiveRequest::copy_tokens() {
  if (summary_.prompt_tokens >= 0) ctx_->prompt_tokens = summary_.prompt_tokens;
  if (summary_.cached_prompt_tokens >= 0) ctx_->cached_prompt_tokens = summary_.cached_prompt_tokens;
  if (summary_.completion_tokens >= 0) ctx_->completion_tokens = summary_.completion_tokens;
}

void ActiveRequest::release_replica(Outcome outcome) {
  if (!replica_) return;
  auto r = std::move(replica_);
  replica_.reset();
  copy_tokens();
  for (auto& f : impl().filters) invoke_filter("on_attempt_end", [&] { f->on_attempt_end(*ctx_, outcome == Outcome::kSuccess); });
  if (pool_) pool_->release(r, outcome);
  else if (auto pool = impl().upstreams.find(ctx_->model)) pool->release(r, outcome);
}

void ActiveRequest::drop_attempt(bool stamp_end) {
  if (stamp_end && attempt_ && upstream_started_) upstream_end_ = Clock::now();
  attempt_.reset();
}

// One place that ends an inference request: metrics, access log, on_complete.
void ActiveRequest::end(int status, std::string reason, RequestSeries& series) {
  if (ended_) return;
  drop_attempt();
  if (replica_) release_replica(Outcome::kNeutral);
  ended_ = true;
  auto& ctx = *ctx_;
  if (!reason.empty() && ctx.reason.empty()) ctx.reason = std::move(reason);
  if (status) ctx.status = status;
  auto& t = ctx.timings;
  t.total_s = std::chrono::duration<double>(Clock::now() - start_).count();
  if (upstream_started_) t.upstream_s = std::chrono::duration<double>(upstream_end_ - upstream_start_).count();
  t.overhead_s = std::max(0.0, t.total_s - t.queue_s - t.upstream_s);
  auto& impl = this->impl();
  impl.stats.request_done(series, ctx.model.empty() ? "none" : ctx.model, ctx.tenant, ctx.status, t.total_s, t.ttfb_s,
                          upstream_started_ || ctx.local_reply ? t.overhead_s : -1);
  impl.access_log(ctx, conn_.request().method_string(), *config_);
  if (!ctx.model.empty() && parsed_)
    for (auto& f : impl.filters) invoke_filter("on_complete", [&] { f->on_complete(ctx); });
  if (waiting_in_queue_) {
    waiting_in_queue_ = false;
    if (pool_) {
      pool_->cancel(ticket_);  // a grant already on its way finds the request gone and releases
      pool_->note_queued(-static_cast<std::int64_t>(prompt_estimate_));
    }
  }
  // The first streamed byte is the client's first token.
  if (pool_ && ctx.stream && t.ttfb_s >= 0 && !ctx.local_reply) pool_->note_first_token(t.ttfb_s);
}

}  // namespace tidegate::gateway
