#pragma once
// One inference request, from its parsed body to the last byte of its response: the request
// context and the filter chain, the routing decision (queue, replica, retries), the upstream
// attempt in progress and the response relayed to the client. A new one per request, so no
// state is reset by hand; its connection owns it and lets go when the response is written
// (end()). A completion that arrives after that finds it ended and does nothing.
//
// Admission and the end live in active_request.cc, the attempts and retries in
// request_attempts.cc, the streamed response in request_stream.cc.
#include <boost/container/small_vector.hpp>

#include <optional>
#include <span>
#include <vector>

#include "client_connection.h"
#include "upstream_attempt.h"

namespace tidegate::gateway {

class ActiveRequest final : public std::enable_shared_from_this<ActiveRequest>, public AttemptOwner {
 public:
  ActiveRequest(ClientConnection& conn, std::shared_ptr<RequestContext> ctx);
  ~ActiveRequest();
  ActiveRequest(const ActiveRequest&) = delete;
  ActiveRequest& operator=(const ActiveRequest&) = delete;

  // Parses the client's body (the connection has authenticated it), then runs the filters and
  // proxies.
  void start(Endpoint endpoint);
  RequestContext& ctx() { return *ctx_; }
  // Nothing was written to the client yet: a hang-up can still cancel the upstream work.
  bool awaiting_upstream() const { return !response_started_; }
  void response_started() { response_started_ = true; }
  // From the worker's tick (through the connection): the deadline of the step in progress,
  // the attempt's or the queue's.
  void on_tick(Clock::time_point now);
  // The end, once: metrics, access log and on_complete; the queue ticket, the replica and the
  // attempt are given back. `status` 0 keeps the context's.
  void end(int status, std::string reason, RequestSeries& series);
  // Gives back what it holds without ending it (the connection is torn down with the loop).
  void abandon();

 private:
  Gateway::Impl& impl() { return conn_.impl(); }
  template <typename Call>
  bool invoke_filter(const char* hook, Call&& call) noexcept {
    return gateway::invoke_filter(impl().stats, ctx_.get(), hook, std::forward<Call>(call));
  }
  // --- admission and routing (active_request.cc); attempts (request_attempts.cc)
  void run_filters(std::size_t index);  // Impl::before_forward[index..], then proxy()
  void answer_from_filter(LocalReply reply);
  void proxy();
  void make_route_hint(const ModelConfig& model);
  void tell_placement();
  void on_granted(const std::shared_ptr<ReplicaPool>& pool, ReplicaPtr replica);
  void on_queue_timeout();
  // Out of the queue (granted, timed out or cancelled): the pool's queued work put back, and
  // the wait recorded when it ended in a grant or the deadline.
  void leave_queue(bool record_wait);
  // What the request holds goes back: its attempt (cancelled), its queue place, its replica.
  void give_back();
  void start_attempt(ReplicaPtr replica, bool fresh_connection);
  void format_upstream_head(std::string& head, std::string_view body) const;
  // Retries a replica-attributed failure on another replica when one can take it right now.
  // True when the retry started.
  bool retry_elsewhere(int status);
  void served_elsewhere();
  void body_too_large();
  // The attempt in progress failed at `failure` (an upstream row of failure.h): retried on
  // another replica, relayed as a broken stream, or answered with the row's error.
  void attempt_failed(Failure failure, bool reused);
  void release_replica(Outcome outcome);
  // The attempt ends (cancelled if still in flight). `stamp_end`: the try ends now.
  void drop_attempt(bool stamp_end = true);
  // The usage seen so far onto the context; on a stream, content chunks stand in for the
  // completion tokens until the engine's usage arrives (a lower bound: an engine may put several
  // tokens in one chunk, never fewer than one).
  void copy_tokens();
  // The answer as the replica gave it onto the context, once it is whole (or cut).
  void summary_to_context(bool complete);
  void on_attempt_head(UpstreamAttempt& a) override;
  void on_attempt_body(UpstreamAttempt& a) override;
  void on_attempt_failed(UpstreamAttempt& a, Failure failure) override;

  // --- the streamed response (request_stream.cc)
  void format_stream_head();
  void start_stream();
  void on_attempt_stream(UpstreamAttempt& a, beast::error_code ec) override;
  void relay_stream_bytes(std::string_view bytes);
  void write_stream_chunk(bool last);
  std::array<net::const_buffer, 3> frame_stream_out(bool last);
  void finish_stream();
  void end_stream_with_error(const ApiError& e);

  ClientConnection& conn_;
  Worker& worker_;
  const std::shared_ptr<const GatewayConfig> config_;
  const Clock::time_point start_;
  std::shared_ptr<RequestContext> ctx_;
  std::optional<ParsedRequest> parsed_;
  bool ended_ = false;

  // Routing: the pool, the queue, the replica and the attempts on it.
  const ModelConfig* model_ = nullptr;  // in config_, the snapshot this request holds
  std::shared_ptr<ReplicaPool> pool_;
  ReplicaPtr replica_;
  std::uint64_t ticket_ = 0;
  bool waiting_in_queue_ = false;
  StepDeadline queue_deadline_;
  double queue_max_wait_s_ = 0;
  std::uint64_t prompt_estimate_ = 0;  // tokens, for the scaler's work signals
  Clock::time_point queued_at_;
  int attempts_ = 0;
  // Replica serials of this request's attempts (a few: max_retries is small), inline.
  boost::container::small_vector<std::uint64_t, 4> tried_;
  std::span<const std::uint64_t> tried() const { return {tried_.data(), tried_.size()}; }
  std::shared_ptr<RouteHint> route_hint_;  // prefix_aware / affinity: the prompt's blocks, the session
  // The replica whose unclear refusal (upstream_answer.h) a second replica is judging; it is
  // blamed if that one serves the request.
  ReplicaPtr refused_by_;
  AttemptHandle attempt_;
  Clock::time_point upstream_start_;
  Clock::time_point upstream_end_;
  bool upstream_started_ = false;

  // The response.
  CompletionSummary summary_;
  // The response to the client began (a local answer, or a stream's head): a hang-up no
  // longer cancels upstream work, and a stream's failure is relayed, never retried.
  bool response_started_ = false;
  bool head_pending_ = false;      // the stream's head goes out with the next write
  bool stream_keep_alive_ = true;
  std::int64_t content_chunks_ = 0;  // stream token estimate until usage arrives
};

}  // namespace tidegate::gateway
