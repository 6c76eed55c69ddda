// An inference request's upstream attempts: starting one on the replica it was granted, what
// its answer means (relayed, retried on another replica, or asked a second opinion), and how a
// failed attempt ends (retried, a broken stream, or the row's error). Nothing may reach the
// client before an attempt's response head is known, so failures up to that point can be
// retried on another replica.
#include "active_request.h"
#include "upstream_answer.h"

namespace tidegate::gateway {
using namespace std::string_view_literals;

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
  head += replica_->authority;
  head += "\r\nContent-Type: application/json\r\nAccept: "sv;
  head += ctx_->stream ? "text/event-stream"sv : "application/json"sv;
  head += "\r\nx-request-id: "sv;
  head += ctx_->request_id;
  // The replica's own key (the client's Authorization never leaves the gateway).
  const std::string* key = replica_->api_key.empty() ? &model_->replica_api_key : &replica_->api_key;
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
  summary_to_context(status < 400);
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
  else if (ctx_->stream) ctx_->completion_tokens = content_chunks_;
}

void ActiveRequest::summary_to_context(bool complete) {
  copy_tokens();
  ctx_->content = std::move(summary_.content);
  ctx_->finish_reason = summary_.finish_reason;
  ctx_->complete = complete;
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

}  // namespace tidegate::gateway
