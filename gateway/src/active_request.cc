// An inference request's admission and end: its body parsed, the filters, the pool's queue and
// the routing hint, and the one place that ends it. Its attempts are in request_attempts.cc,
// its streamed response in request_stream.cc.
#include "active_request.h"

#include <cmath>

#include "tidegate/routing/prompt_blocks.h"

namespace tidegate::gateway {

ActiveRequest::ActiveRequest(ClientConnection& conn, std::shared_ptr<RequestContext> ctx)
    : conn_(conn), worker_(conn.worker()), config_(conn.config()), start_(ctx->start), ctx_(std::move(ctx)) {}

ActiveRequest::~ActiveRequest() { abandon(); }

void ActiveRequest::abandon() {
  ended_ = true;
  give_back();
}

void ActiveRequest::give_back() {
  drop_attempt();
  if (waiting_in_queue_) {
    pool_->cancel(ticket_);  // a grant already on its way finds the request gone and releases
    leave_queue(false);
  }
  if (replica_) release_replica(Outcome::kNeutral);
}

void ActiveRequest::leave_queue(bool record_wait) {
  waiting_in_queue_ = false;
  queue_deadline_.disarm();
  pool_->note_queued(-static_cast<std::int64_t>(prompt_estimate_));
  if (!record_wait) return;
  ctx_->timings.queue_s = std::chrono::duration<double>(Clock::now() - queued_at_).count();
  impl().stats.queue_wait(ctx_->model, ctx_->timings.queue_s);
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
  model_ = config_->find_model(parsed_->model);
  if (!model_) {
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
  std::uint64_t hold = 0;  // the worker holds the connection while the answer is out (Worker::hold)
  std::atomic<bool> answered{false};  // done was called (a second call is a filter bug)
  std::atomic<int> phase{kInside};
  std::optional<LocalReply> reply;
};

}  // namespace

void ActiveRequest::run_filters(std::size_t index) {
  auto& before = impl().before_forward;
  for (; index < before.size(); ++index) {
    auto call = std::make_shared<FilterCall>(index);
    // The callback holds nothing strongly but the call: see Worker::hold.
    const bool returned = invoke_filter("pre_forward", [&] { before[index]->pre_forward(
        ctx_, [door = worker_.door, worker = &worker_, weak = weak_from_this(), call](std::optional<LocalReply> r) {
          if (call->answered.exchange(true)) return;
          call->reply = std::move(r);
          int inside = FilterCall::kInside;
          if (call->phase.compare_exchange_strong(inside, FilterCall::kAnsweredInside)) return;  // the loop goes on
          // Answered after pre_forward returned, perhaps on another thread: resume on the loop.
          door->post([worker, weak, call] {
            const auto conn = worker->let_go(call->hold);  // alive until this handler ends
            const auto self = weak.lock();
            if (!self || self->ended_) return;  // the client left meanwhile
            if (!call->reply) return self->run_filters(call->index + 1);
            self->answer_from_filter(std::move(*call->reply));
          });
        }); });
    // Threw before answering: a 500, and a later done() from it is ignored. Threw after
    // answering: the answer stands.
    if (!returned && !call->answered.exchange(true)) return conn_.fail(Failure::kFilterFailed, "a request filter failed");
    int inside = FilterCall::kInside;
    if (call->phase.compare_exchange_strong(inside, FilterCall::kReturned)) {
      // done comes later. The answer's handler runs on this loop, so after this line.
      call->hold = worker_.hold(conn_.shared_from_this());
      return;
    }
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
  if (!pool_) return conn_.fail(Failure::kNoReadyReplica, "no replica is ready for model '" + ctx_->model + "'");
  // The scaler prices demand in prompt tokens; a quarter of the body's bytes is the estimate
  // (English runs ~4 characters a token; JSON quoting adds a little).
  prompt_estimate_ = std::max<std::uint64_t>(1, conn_.request().body().size() / 4);
  pool_->note_arrival(prompt_estimate_);
  const auto& mc = *model_;
  make_route_hint(mc);
  std::weak_ptr<ActiveRequest> weak = shared_from_this();
  auto pool = pool_;
  // A grant comes from whichever thread released the replica.
  auto got = pool_->acquire([weak, door = worker_.door, pool](ReplicaPtr r) {
    door->post([weak, pool, r] {
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
  queue_deadline_.arm(queue_max_wait_s_);
  conn_.watch_client();
}

void ActiveRequest::on_tick(Clock::time_point now) {
  if (attempt_) return attempt_->on_tick(now);
  if (waiting_in_queue_ && queue_deadline_.expired(now)) {
    auto self = shared_from_this();  // the answer may end the request
    on_queue_timeout();
  }
}

void ActiveRequest::on_queue_timeout() {
  const double wait = queue_max_wait_s_;
  if (!pool_->cancel(ticket_)) return;  // a grant is already on its way
  leave_queue(true);
  pool_->note_first_token(-1);
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
  leave_queue(true);
  start_attempt(std::move(replica), false);
}

// One place that ends an inference request: metrics, access log, on_complete.
void ActiveRequest::end(int status, std::string reason, RequestSeries& series) {
  if (ended_) return;
  give_back();
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
  // The first streamed byte is the client's first token.
  if (pool_ && ctx.stream && t.ttfb_s >= 0 && !ctx.local_reply) pool_->note_first_token(t.ttfb_s);
}

}  // namespace tidegate::gateway
