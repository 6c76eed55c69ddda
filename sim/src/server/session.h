#pragma once
// One HTTP/1.1 keep-alive connection of tidegate-sim. Requests on a connection are served one
// at a time; generations are driven by the shared Engine, whose events arrive on this
// connection's strand and are written as they come (SSE) or all at once (non-stream).
#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "openai.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

namespace tidegate::sim {

// Everything the connections share; immutable config plus thread-safe parts.
struct ServerState {
  ServerState(std::shared_ptr<const ServerConfig> c, boost::asio::io_context& io)
      : cfg(std::move(c)), engine(io, cfg->timing) {}
  std::shared_ptr<const ServerConfig> cfg;
  Engine engine;
  SimMetrics metrics;
  std::atomic<std::int64_t> posts_started{0};
  std::atomic<std::uint64_t> next_reply_id{1};
  std::int64_t created = 0;  // unix seconds at start, the "created" of every object
  // vLLM's sleep mode (POST /sleep, POST /wake_up, GET /is_sleeping): asleep, the engine
  // refuses work; a wake-up takes --wake-ms, during which /health answers 503.
  std::atomic<bool> asleep{false};
  std::atomic<double> awake_at{0};  // engine time at which the last wake-up completes
  bool waking() const { return engine.now() < awake_at.load(); }
};

class Session final : public EventSink, public std::enable_shared_from_this<Session> {
 public:
  Session(boost::asio::ip::tcp::socket socket, ServerState& state);
  void start();
  void on_events(std::vector<Event> events) override;

 private:
  struct Generation {
    GenerationRequest req;
    Reply reply;
    std::optional<ChunkWriter> chunks;
    std::string id;
    RequestId model_id = 0;
    double submitted_at = 0;
    bool dying = false;  // --die-after: this is the request the process dies in
    bool headers_sent = false;
  };

  void read_next();
  void on_read(boost::system::error_code ec);
  void route();
  void start_generation(Api api, bool dying);
  void handle_events(const std::vector<Event>& events);
  void respond(int status, std::string_view content_type, std::string_view body);
  void respond_error(const ApiError& e);
  void queue_stream_data(std::string&& sse_events, bool last);
  void write_more();
  void on_write(boost::system::error_code ec);
  void close();

  boost::beast::tcp_stream stream_;
  ServerState& state_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool keep_alive_ = true;
  bool chunked_ = true;  // false for HTTP/1.0 clients: stream until close instead
  std::optional<Generation> gen_;
  std::string pending_;   // bytes not yet handed to the socket
  std::string in_flight_; // bytes of the write in progress
  bool writing_ = false;
  bool response_done_ = false;  // the whole response is in pending_/in_flight_
  bool closed_ = false;
};

}  // namespace tidegate::sim
