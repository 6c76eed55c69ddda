#pragma once
// One try of a request on one replica: its connection (pooled or new), the request head it
// sends, the response parser and buffers, the deadline of the step in progress, and how it
// failed. A retry is a new attempt. The request holds it through an AttemptHandle; letting go
// of the handle cancels the attempt: its socket closes, and a completion still in flight finds
// no owner and does nothing. Nothing is compared against a counter to find stale handlers.
//
// Its steps report to an AttemptOwner (the ActiveRequest): the final response head, the whole
// body, each streamed read, or the Failure that ended it. The owner decides what that means
// (retry, relay, answer); the attempt knows only its own socket and deadline.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "attempt_buffers.h"
#include "failure.h"
#include "impl.h"
#include "upstream_parser.h"

namespace tidegate::gateway {

class UpstreamAttempt;

class AttemptOwner {
 public:
  virtual void on_attempt_head(UpstreamAttempt& a) = 0;  // a final status (200-599) came
  virtual void on_attempt_body(UpstreamAttempt& a) = 0;  // the whole body is in a.body()
  // A read_stream() ended: new body bytes are in the chunk (a.take_chunk()), and more may be
  // buffered. `ec` is the read's error, already mapped (a fired deadline reads as timeout).
  virtual void on_attempt_stream(UpstreamAttempt& a, beast::error_code ec) = 0;
  virtual void on_attempt_failed(UpstreamAttempt& a, Failure failure) = 0;

 protected:
  ~AttemptOwner() = default;
};

// The per-step limits, taken from the request's config snapshot when the attempt starts.
struct AttemptLimits {
  Clock::time_point total_deadline;  // the request's start + timeouts.total
  double connect_s = 0, first_byte_s = 0, between_chunks_s = 0;
  std::size_t max_body_bytes = 0;
};

class UpstreamAttempt final : public std::enable_shared_from_this<UpstreamAttempt> {
 public:
  // `anchor` is kept alive by every step in flight (the client connection: a request waiting
  // on its replica must not vanish because nothing else holds it).
  UpstreamAttempt(Worker& worker, ReplicaPtr replica, AttemptOwner& owner, std::weak_ptr<void> anchor, AttemptLimits limits);
  ~UpstreamAttempt();
  UpstreamAttempt(const UpstreamAttempt&) = delete;
  UpstreamAttempt& operator=(const UpstreamAttempt&) = delete;

  // The request head goes into head() before start(); `body` must stay valid until the attempt
  // ends (it is the request's). A pooled connection is used unless `fresh_connection`.
  std::string& head() { return buffers_->head; }
  void start(std::string_view body, bool fresh_connection);
  // After on_attempt_head: read the whole body (on_attempt_body) ...
  void read_body();
  // ... or stream it: each call reads once into the chunk (on_attempt_stream).
  void read_stream();
  // Stream bytes: points the parser at the chunk and parses what is already buffered; false
  // when nothing more can be parsed without a read (ec set on a framing error).
  bool parse_buffered(beast::error_code& ec);
  // The body bytes the parser wrote into the chunk since the last call.
  std::string_view take_chunk();

  // The whole response was read and the replica keeps the connection open: it goes back to
  // the worker's pool. The attempt is over either way.
  void finish();
  // Cancels what is in flight and forgets the owner. Idempotent; the handle calls it.
  void cancel();
  // From the worker's tick: past the step's deadline the socket closes and the step fails
  // as timed out.
  void on_tick(Clock::time_point now);

  bool reused() const { return reused_; }  // on a pooled connection
  UpstreamResponseParser& parser() { return *parser_; }
  std::string& body() { return buffers_->body; }
  bool has_buffered() const { return buffers_->in.size() > 0; }
  std::optional<Failure> failure() const { return failure_; }

 private:
  void connect();
  void send();
  void read_head();
  void on_head(beast::error_code ec);
  void fail(Failure f);
  void arm(double step_s);  // the step's own timeout, cut to what is left of the total
  void close_socket();

  static constexpr int kMaxInterimHeads = 8;  // 1xx answers skipped before one is a fault

  Worker& worker_;
  ReplicaPtr replica_;
  AttemptOwner* owner_;  // null once cancelled or finished
  std::weak_ptr<void> anchor_;
  const AttemptLimits limits_;
  std::unique_ptr<AttemptBuffers> buffers_;
  std::unique_ptr<Socket> socket_;
  std::optional<UpstreamResponseParser> parser_;
  std::string_view body_out_;
  StepDeadline deadline_;
  bool reused_ = false;
  int interim_heads_ = 0;
  std::optional<Failure> failure_;
};

// The request's hold on its attempt: resetting or destroying it cancels the attempt.
class AttemptHandle final {
 public:
  AttemptHandle() = default;
  explicit AttemptHandle(std::shared_ptr<UpstreamAttempt> a) : a_(std::move(a)) {}
  AttemptHandle(AttemptHandle&&) = default;
  AttemptHandle& operator=(AttemptHandle&& o) noexcept {
    if (this != &o) {
      reset();
      a_ = std::move(o.a_);
    }
    return *this;
  }
  ~AttemptHandle() { reset(); }
  void reset() {
    if (a_) a_->cancel();
    a_.reset();
  }
  UpstreamAttempt* operator->() const { return a_.get(); }
  UpstreamAttempt& operator*() const { return *a_; }
  explicit operator bool() const { return a_ != nullptr; }
  UpstreamAttempt* get() const { return a_.get(); }

 private:
  std::shared_ptr<UpstreamAttempt> a_;
};

}  // namespace tidegate::gateway
