#pragma once
// One client connection: its socket, keep-alive, the client-side deadline, the request being
// read and the response being written. It answers locally (health, metrics, admin routes,
// errors) or hands an inference request to an ActiveRequest, which it owns until the response
// is written. Every step is an async operation on the plain socket with its deadline set just
// before it; the worker's tick enforces it (on_tick). Reading, writing and the hang-up watch
// are in client_connection.cc; the local routes and an inference request's first context in
// client_routes.cc.
#include <boost/beast/http.hpp>

#include <optional>
#include <vector>

#include "client_request.h"
#include "filter_boundary.h"
#include "impl.h"
#include "sse.h"

namespace tidegate::gateway {

namespace http = beast::http;

class ActiveRequest;

// The metric label of every request for a model that is not configured.
inline constexpr const char* kUnknownModel = "(unknown)";
// Room beyond max_header_bytes for the unparsed part of the client's bytes (client_connection.cc).
inline constexpr std::size_t kFramingSlackBytes = 64 * 1024;

// A streamed response's output, kept by the connection so that the next stream on it reuses
// the memory: the hand-formatted head, the events batched per upstream read, the framing.
struct StreamBuffers {
  std::string head;
  std::string out;
  std::string frame;
  SseParser sse;
};

class ClientConnection final : public std::enable_shared_from_this<ClientConnection> {
 public:
  ClientConnection(std::shared_ptr<Gateway::Impl> impl, Worker& worker, Socket socket);
  ~ClientConnection();
  void start();
  void close_if_idle();
  // From the worker's tick: a step past its deadline (the client's or the upstream attempt's)
  // fails as timed out, and a request still waiting on its replica starts watching for a
  // client that hangs up.
  void on_tick(Clock::time_point now);

  // --- what the active request uses
  Gateway::Impl& impl() { return *impl_; }
  Worker& worker() { return worker_; }
  const std::shared_ptr<const GatewayConfig>& config() const { return config_; }
  const ClientRequest& request() const { return req_; }
  bool keep_alive() const { return keep_alive_; }
  Clock::time_point request_start() const { return start_; }
  double since_start() const;
  // Every failure's answer: counted (tidegate_local_replies_total{reason=code}), recorded as
  // the request's reason, and sent; a failure whose row sends nothing closes the connection.
  void fail(const ApiError& e, bool close = false);
  void fail(Failure failure, std::string message, bool close = false) { fail(api_error(failure, std::move(message)), close); }
  void send_local(LocalReply reply, bool close = false);
  // Writes part of a streamed response under the client's write deadline; `done(ec)` runs on
  // completion with the connection kept alive.
  template <class Buffers, class Done>
  void write_response(const Buffers& buffers, Done&& done);
  // The response was written whole (or the write failed): the request ends, and the next one
  // is read unless `close`.
  void response_written(bool close, beast::error_code ec);
  StreamBuffers& stream_buffers() { return stream_; }
  // Waits on the client socket for a hang-up while the request has no answer yet (started by
  // the tick, or at once for a queued request, which it also keeps alive: nothing else is in
  // flight for it).
  void watch_client();
  // The answer being written, and the buffer the next one is built in (swapped, not copied).
  std::string& out_body() { return out_body_; }

 private:
  void wait_for_request();
  void read_header();
  void on_header(beast::error_code ec);
  void read_body();  // what the head's read did not bring
  // `waited`: the body needed reads of its own, so the request starts now, not at its head.
  void on_body(beast::error_code ec, bool waited = true);
  void handle_request();
  void handle_inference(Endpoint endpoint);
  void handle_route(const Route& route);
  bool has_admin_key() const;
  // False after answering 401/403 itself; `browser` adds a Basic challenge.
  bool admit_guarded(bool guarded, bool browser);
  void end_request(int status, std::string reason);
  void close();

  std::shared_ptr<Gateway::Impl> impl_;
  Worker& worker_;
  Socket socket_;
  beast::flat_buffer buffer_;
  std::optional<ClientRequestParser> parser_;  // fills req_
  ClientRequest req_;
  std::shared_ptr<const GatewayConfig> config_;  // snapshot for the current request
  std::uint64_t config_seen_ = 0;                // Impl::config_version when it was taken
  RequestSeries series_;                         // metric children of the last request
  std::shared_ptr<ActiveRequest> request_;       // the inference request in progress, if any
  std::string out_head_;  // send_local's response head and body, kept while they are written
  std::string out_body_;
  StreamBuffers stream_;
  static constexpr std::size_t kReusedBodyBytes = 64 * 1024;  // a larger out_body_ is freed once written
  bool first_request_ = true;
  bool idle_ = false;
  bool keep_alive_ = true;
  bool watching_ = false;            // a wait on the client socket is pending
  bool resume_after_watch_ = false;  // that wait was cancelled to read the next request
  Clock::time_point start_;
  StepDeadline deadline_;  // of the client-side step in progress
};

template <class Buffers, class Done>
void ClientConnection::write_response(const Buffers& buffers, Done&& done) {
  deadline_.arm(config_->timeouts.write_s);
  net::async_write(socket_, buffers, [self = shared_from_this(), done = std::forward<Done>(done)](beast::error_code ec, std::size_t) mutable {
    self->deadline_.disarm();
    done(ec);
  });
}

}  // namespace tidegate::gateway
