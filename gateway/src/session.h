#pragma once
// One client connection: reads requests (keep-alive), answers locally or proxies to a
// replica. Every step is an async operation with its timeout set just before it.
// Downstream handling lives in session.cc, the upstream exchange in proxy.cc.
#include <boost/beast/http.hpp>

#include <optional>
#include <vector>

#include "client_request.h"
#include "impl.h"
#include "sse.h"
#include "upstream_parser.h"

namespace tidegate::gateway {

namespace http = beast::http;

// The metric label of every request for a model that is not configured.
inline constexpr const char* kUnknownModel = "(unknown)";
// Room beyond max_header_bytes for the unparsed part of the client's bytes (session.cc).
inline constexpr std::size_t kFramingSlackBytes = 64 * 1024;

class Session final : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<Gateway::Impl> impl, Worker& worker, Socket socket);
  ~Session();
  void start();
  void close_if_idle();
  // From the worker's tick: a step past its loop deadline fails as if it had timed out, and a
  // request still waiting on its replica starts watching for a client that hangs up.
  void on_tick(Clock::time_point now);

 private:
  // --- downstream (session.cc)
  void wait_for_request();
  void read_header();
  void on_header(beast::error_code ec);
  // `waited`: the body needed reads of its own, so the request starts now, not at its head.
  void on_body(beast::error_code ec, bool waited = true);
  void handle_request();
  void handle_inference(Endpoint endpoint);
  void handle_route(const Route& route);
  void run_filters(std::size_t index);  // Impl::before_forward[index..], then proxy()
  // The one boundary around filter code: an exception out of a hook would unwind through the
  // worker's loop and end it. Here it is logged and counted by hook (tidegate_filter_errors_total);
  // false tells the caller, which answers 500 when nothing was answered yet, else goes on.
  template <typename Call>
  bool invoke_filter(const char* hook, Call&& call) noexcept {
    try {
      call();
      return true;
    } catch (const std::exception& e) {
      filter_threw(hook, e.what());
    } catch (...) {
      filter_threw(hook, "not a std::exception");
    }
    return false;
  }
  void filter_threw(const char* hook, const char* what) noexcept;
  void answer_from_filter(LocalReply reply);
  void send_local(LocalReply reply, bool close = false);
  // Every failure's answer: counted (tidegate_local_replies_total{reason=code}), recorded as
  // the request's reason, and sent; a failure whose row sends nothing closes the connection.
  void fail(const ApiError& e, bool close = false);
  void fail(Failure failure, std::string message, bool close = false) { fail(api_error(failure, std::move(message)), close); }
  void on_written(bool close, beast::error_code ec);
  void finish_request(int status, std::string reason);
  void close();
  double since_start() const;

  // --- upstream (proxy.cc)
  void proxy();
  void on_granted(const std::shared_ptr<ReplicaPool>& pool, ReplicaPtr replica);
  void start_attempt(ReplicaPtr replica, bool fresh_connection);
  void connect(const ReplicaPtr& replica);
  void send_upstream();
  void on_upstream_head(beast::error_code ec);
  void read_upstream_body();
  void on_upstream_body(beast::error_code ec);
  bool retry_elsewhere(int status);
  bool has_admin_key() const;
  // False after answering 401/403 itself; `browser` adds a Basic challenge.
  bool admit_guarded(bool guarded, bool browser);
  void read_upstream_head();
  static constexpr int kMaxInterimHeads = 8;  // 1xx answers skipped before one is a fault
  int interim_heads_ = 0;
  void served_elsewhere();
  void upstream_body_too_large();
  void start_stream();
  void read_stream();
  void on_stream_read(beast::error_code ec);
  void relay_stream_bytes();
  void format_stream_head();
  void write_stream_chunk(bool last);
  std::array<net::const_buffer, 3> frame_stream_out(bool last);
  void finish_stream();
  void end_stream_with_error(const ApiError& e);
  // The upstream attempt in progress failed at `failure` (an upstream row of failure.h):
  // retried on another replica, relayed as a broken stream, or answered with the row's error.
  void attempt_failed(Failure failure);
  void release_replica(Outcome outcome);
  void watch_client();
  // `stamp_end`: the try ends now (false where the caller already set upstream_end_).
  void drop_upstream(bool stamp_end = true);
  // The steps every request takes (waiting for the next request, writing the response, sending
  // upstream, waiting for the first byte) are timed by the worker's tick instead of a Beast
  // timer each: a timer cost a heap insert, a cancel and a handler run per step. They fire up
  // to one tick (Worker::kTick) late. The step's completion disarms them.
  void arm_client_deadline(double seconds);
  void arm_upstream_deadline(double seconds);
  // What is left of the total timeout at `now`, capped at the step's own timeout.
  double upstream_budget_s(double step_s, Clock::time_point now = Clock::now()) const;

  std::shared_ptr<Gateway::Impl> impl_;
  Worker& worker_;
  TcpStream stream_;
  beast::flat_buffer buffer_;
  std::optional<ClientRequestParser> parser_;  // fills req_
  ClientRequest req_;
  std::shared_ptr<const GatewayConfig> config_;  // snapshot for the current request
  std::uint64_t config_seen_ = 0;                // Impl::config_version when it was taken
  RequestSeries series_;                         // metric children of the last request
  std::string out_head_;  // send_local's response head and body, kept while they are written
  std::string out_body_;
  static constexpr std::size_t kReusedBodyBytes = 64 * 1024;  // a larger out_body_ is freed once written
  static constexpr std::size_t kCopiedBodyBytes = 16 * 1024;  // a body up to this is sent in the head's buffer
  bool first_request_ = true;
  bool idle_ = false;
  bool keep_alive_ = true;
  Clock::time_point start_;

  // Per inference request.
  std::shared_ptr<RequestContext> ctx_;
  std::optional<ParsedRequest> parsed_;
  std::shared_ptr<ReplicaPool> pool_;
  ReplicaPtr replica_;
  std::uint64_t ticket_ = 0;
  std::optional<net::steady_timer> queue_timer_;
  bool waiting_in_queue_ = false;
  std::uint64_t prompt_estimate_ = 0;  // tokens, for the scaler's work signals
  Clock::time_point queued_at_;
  int attempts_ = 0;
  std::vector<std::uint64_t> tried_;  // replica serials of this request's attempts
  std::shared_ptr<RouteHint> route_hint_;  // prefix_aware / affinity: the prompt's blocks, the session
  void tell_placement();
  void make_route_hint(const ModelConfig& model);
  // The replica whose unclear refusal (upstream_answer.h) a second replica is judging; it is
  // blamed if that one serves the request.
  ReplicaPtr refused_by_;
  std::unique_ptr<TcpStream> upstream_;
  bool upstream_reused_ = false;
  // Bounded like the client's buffer: the parser consumes bodies as they come, so only a head
  // (Beast's 8 KiB header limit), a chunk header with its extensions, or a trailer section
  // can make it grow, and a replica sending an endless one fails at this size instead of
  // taking the gateway's memory.
  static constexpr std::size_t kUpstreamBufferBytes = 256 * 1024;
  beast::flat_buffer up_buffer_{kUpstreamBufferBytes};
  std::optional<UpstreamResponseParser> up_parser_;
  std::string up_head_;  // upstream request head, formatted by hand
  std::array<char, 16384> up_chunk_{};
  std::string up_body_;
  Clock::time_point upstream_start_;
  Clock::time_point upstream_end_;
  bool upstream_started_ = false;
  SseParser sse_;
  CompletionSummary summary_;
  bool response_started_ = false;  // bytes reached the client: no more retries
  // Stream output, reused across requests: the hand-formatted head (sent with the first
  // events when they came in the same read), events batched per upstream read, framing.
  std::string stream_head_;
  bool head_pending_ = false;
  bool stream_keep_alive_ = true;
  std::string stream_out_;
  std::string stream_frame_;
  bool upstream_finished_ = false;
  std::int64_t content_chunks_ = 0;  // stream token estimate until usage arrives
  std::uint64_t gen_ = 0;             // bumps per proxied request; stale upstream handlers bail
  bool watching_ = false;             // a read on the client socket is pending
  bool resume_after_watch_ = false;   // that read was cancelled to read the next request
  bool awaiting_upstream_ = false;    // nothing written to the client yet
  Clock::time_point client_deadline_ = Clock::time_point::max();
  Clock::time_point upstream_deadline_ = Clock::time_point::max();
  bool upstream_timed_out_ = false;   // the tick closed the upstream socket
};

}  // namespace tidegate::gateway
